"""The environment recipe: one set of pins, used by `make setup` and the Docker image alike."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "docker" / "Dockerfile"
SETUP_SCRIPT = ROOT / "tools" / "setup_env.sh"


def pins() -> dict[str, str]:
    found = {}
    for line in (ROOT / "requirements" / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, pinned = line.partition("==")
            assert pinned, f"constraints.txt line {line!r} is not an exact pin"
            found[name.lower()] = pinned
    return found


@pytest.mark.unit
def test_every_package_the_setup_script_installs_is_pinned():
    script = SETUP_SCRIPT.read_text()
    installed = set()
    for call in re.findall(r"^\s*pip_install ([^\n]*(?:\\\n[^\n]*)*)", script, flags=re.M):
        words = re.sub(r"#[^\n]*|[|].*", "", call).replace("\\\n", " ").split()
        installed |= {w.lower() for w in words if re.fullmatch(r"[A-Za-z][\w.-]*", w)}
    assert {"torch", "torchvision", "mmengine", "mmsegmentation", "numpy", "pillow"} <= installed
    assert installed - set(pins()) == set(), "installed without a pin in requirements/"


@pytest.mark.unit
@pytest.mark.parametrize(
    "package",
    [
        "torch",
        "torchvision",
        "numpy",
        "Pillow",
        "setuptools",
        "mmengine",
        "mmcv",
        "mmsegmentation",
        "pycocotools",
        "cityscapesscripts",
        "schedulefree",
        "mlxtend",
    ],
)
def test_the_environment_has_the_pinned_versions(package):
    assert version(package).split("+")[0] == pins()[package.lower()]


@pytest.mark.unit
def test_dockerfile_runs_the_same_script_from_the_same_pins():
    text = DOCKERFILE.read_text()
    assert "COPY requirements/ requirements/" in text
    run_setup = re.search(r"^RUN (?:[^\n]*\\\n)*[^\n]*bash tools/setup_env.sh", text, flags=re.M)
    assert run_setup, "the image is not built by tools/setup_env.sh"
    # mmcv's CUDA ops are compiled there by default (tests/test_docker.py: the CPU smoke build)
    assert 'MMCV_FORCE_CUDA="${MMCV_FORCE_CUDA}"' in run_setup.group(0)
    assert re.search(r"^ARG MMCV_FORCE_CUDA=1$", text, flags=re.M)
    assert 'DETECTRON2_REQUIREMENT="${DETECTRON2_REQUIREMENT}"' in run_setup.group(0)
    # The dependencies' layer sees no code, configs or README: editing them keeps its cache (and
    # mmcv's CUDA build); the package is installed by the same script in a later layer.
    assert "SETUP_PART=deps" in run_setup.group(0)
    before = text[: run_setup.start()]
    assert not re.search(r"^COPY (plugins|configs|setup\.py|README|\. )", before, flags=re.M)
    assert re.search(
        r"^COPY plugins/ plugins/\n(?:COPY [^\n]*\n)*RUN [^\n]*SETUP_PART=self", text, flags=re.M
    )
    # A wheel from docker/wheels/ is where the documented build argument points.
    assert "COPY docker/wheels/ /wheels/" in before and (ROOT / "docker/wheels").is_dir()
    assert re.search(r"^ARG DETECTRON2_REQUIREMENT=", text, flags=re.M)
    # No second recipe: nothing in the image is pip-installed outside the script.
    assert not re.search(r"\bpip3? install\b", text)
    # Python 3.11: numpy 1.23.5 (the pin Detectron2 0.6 needs) has no newer wheels.
    assert pins()["numpy"] == "1.23.5" and "python3.11 -m venv" in text


@pytest.mark.e2e
def test_dockerfile_passes_hadolint():
    hadolint = shutil.which("hadolint") or str(Path(__file__).parents[1] / ".venv/bin/hadolint")
    result = subprocess.run(
        [hadolint, "--config", str(ROOT / ".hadolint.yaml"), str(DOCKERFILE)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.e2e
def test_setup_script_refuses_an_unknown_part_in_one_line_before_installing() -> None:
    env = {**os.environ, "PYTHON": sys.executable, "SETUP_PART": "everything"}
    result = subprocess.run(
        ["bash", str(ROOT / "tools/setup_env.sh")], capture_output=True, text=True, env=env
    )
    assert result.returncode == 2
    assert result.stderr == "setup: SETUP_PART=everything is invalid; allowed: all, deps, self\n"
    assert result.stdout == ""  # no step started


FINALIZER_DURING_PARSE = """
import ast, sys, traceback
class Raises:
    def __del__(self):
        raise FileNotFoundError("scratch folder already removed")
def format_like_pytest(unraisable):
    traceback.format_exception(unraisable.exc_type, unraisable.exc_value, unraisable.exc_traceback)
sys.unraisablehook = format_like_pytest
source = open(sys.argv[1]).read()
failed = 0
for _ in range(50):
    garbage = Raises(); garbage.cycle = garbage; del garbage
    try:
        ast.parse(source)  # what MMEngine's Config.fromfile does to every config
    except SystemError:
        failed += 1
print(failed)
"""


@pytest.mark.e2e
def test_make_test_runs_where_a_finalizer_raising_inside_a_config_parse_fails_nothing(tmp_path):
    """Python 3.11 before 3.11.8 (gh-106905): a finalizer that raises during a garbage collection
    inside ast.parse, formatted with carets as pytest formats it, fails the parse with
    "AST constructor recursion depth mismatch". The Makefile's test targets set
    PYTHONNODEBUGRANGES=1 (no carets, so no nested parse): docs/development.md."""
    config = ROOT / "configs" / "mmaction" / "toy" / "i3d-toy_kinetics400_base.py"
    script = tmp_path / "finalizer_during_parse.py"  # a file: tracebacks show its lines
    script.write_text(FINALIZER_DURING_PARSE)
    makefile = (ROOT / "Makefile").read_text()
    assert "test test-fast: export PYTHONNODEBUGRANGES := 1" in makefile

    def failed_parses(**env: str) -> int:
        clean = {k: v for k, v in os.environ.items() if k != "PYTHONNODEBUGRANGES"}
        cmd = [sys.executable, str(script), str(config)]
        done = subprocess.run(cmd, env={**clean, **env}, capture_output=True, text=True, check=True)
        return int(done.stdout)

    assert failed_parses(PYTHONNODEBUGRANGES="1") == 0
    if (3, 11) <= sys.version_info[:3] < (3, 11, 8):
        assert failed_parses() == 50  # the bug the setting works around, on this Python
