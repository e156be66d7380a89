"""benchmarks/gpu_shims.py: the multi-modal switch, against the real mmpretrain and mmaction2.

The GPU image has transformers 5, which lacks names the codebases' multi-modal models import;
these tests stand a transformers of that shape in ``sys.modules`` and check that the shim turns
each codebase's own switch off, and leaves a complete transformers (or none) alone.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def gpu_shims():
    spec = importlib.util.spec_from_file_location("gpu_shims", BENCHMARKS / "gpu_shims.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def dependencies(monkeypatch):
    """Both codebases' switches, on (as with transformers >= 4.28 installed), restored after."""
    found = {}
    for codebase in ("mmpretrain", "mmaction"):
        if codebase == "mmaction":
            importlib.import_module("budgeted.mmengine.mmaction_compat")
        found[codebase] = importlib.import_module(f"{codebase}.utils.dependency")
        monkeypatch.setattr(found[codebase], "WITH_MULTIMODAL", True)
    return found


def fake_transformers(monkeypatch, gpu_shims, without: tuple[str, ...]) -> None:
    """A transformers 5.17.0 in sys.modules holding every imported name but ``without``."""
    package = types.ModuleType("transformers")
    package.__version__ = "5.17.0"
    package.__path__ = []
    monkeypatch.setitem(sys.modules, "transformers", package)
    for name, attributes in gpu_shims._MULTIMODAL_TRANSFORMERS_NAMES.items():
        module = types.ModuleType(name)
        for attribute in attributes:
            if attribute not in without:
                setattr(module, attribute, object())
        monkeypatch.setitem(sys.modules, name, module)
    for parent in ("transformers.models", "transformers.models.bert"):
        monkeypatch.setitem(sys.modules, parent, types.ModuleType(parent))


def test_transformers_5_turns_both_codebases_multimodal_models_off(
    gpu_shims, dependencies, monkeypatch
):
    fake_transformers(monkeypatch, gpu_shims, without=("apply_chunking_to_forward",))
    notes = gpu_shims.apply_multimodal_off()
    assert len(notes) == 1 and notes[0].startswith(
        "transformers 5.17.0: no transformers.modeling_utils.apply_chunking_to_forward, which "
    )
    assert notes[0].endswith(
        "mmpretrain.utils.dependency.WITH_MULTIMODAL = False; "
        "mmaction.utils.dependency.WITH_MULTIMODAL = False"
    )
    assert not any(d.WITH_MULTIMODAL for d in dependencies.values())


def test_a_complete_transformers_is_left_alone(gpu_shims, dependencies, monkeypatch):
    fake_transformers(monkeypatch, gpu_shims, without=())
    assert gpu_shims.apply_multimodal_off() == []
    assert all(d.WITH_MULTIMODAL for d in dependencies.values())
