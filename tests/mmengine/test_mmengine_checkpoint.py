"""budgeted.mmengine.checkpoint: MMEngine checkpoints load with weights_only; nothing else does."""

from __future__ import annotations

import fractions
import pickle

import numpy as np
import pytest
import torch
from mmengine.logging import MessageHub
from mmengine.logging.history_buffer import HistoryBuffer

from budgeted.mmengine import UnsafeCheckpointError, allow_mmengine_checkpoints, check_checkpoint
from budgeted.mmengine.checkpoint import MMENGINE_CHECKPOINT_GLOBALS, unsafe_globals

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _allowed() -> None:
    """What our tools and ``budgeted.mmengine.safe_checkpoints`` do (not ``import``)."""
    allow_mmengine_checkpoints()


def mmengine_like_checkpoint() -> dict:
    """What MMEngine's Runner saves besides weights: message hub state with numpy values."""
    hub = MessageHub.get_instance("budgeted-checkpoint-test")
    for it in range(3):
        hub.update_scalar("train/lr", np.float64(0.01 / (it + 1)))
        hub.update_scalar("train/loss", torch.tensor(1.5 - it))
    hub.update_info("iter", np.int64(3))
    return {
        "meta": {"iter": 3, "seed": 0},
        "state_dict": {"w": torch.ones(2)},
        "message_hub": hub.state_dict(),
        "param_schedulers": [{"end": 30, "base_values": [0.01], "params": {"gamma": 0.1}}],
    }


def test_mmengine_checkpoint_globals_load_with_weights_only(tmp_path):
    path = tmp_path / "ok.pth"
    torch.save(mmengine_like_checkpoint(), path)
    assert unsafe_globals(path) == []
    check_checkpoint(path)
    loaded = torch.load(path, weights_only=True)
    buffer = loaded["message_hub"]["log_scalars"]["train/lr"]
    assert isinstance(buffer, HistoryBuffer)
    assert buffer.mean() == pytest.approx(np.mean([0.01, 0.005, 0.01 / 3]))
    assert buffer.current() == pytest.approx(0.01 / 3)


def test_allow_list_is_exactly_what_mmengine_needs():
    names = {name for _, name in MMENGINE_CHECKPOINT_GLOBALS}
    assert "mmengine.logging.history_buffer.HistoryBuffer" in names
    assert "builtins.getattr" in names
    assert not any(n.startswith(("os.", "subprocess", "posix", "builtins.eval")) for n in names)


def test_checkpoint_with_another_global_is_refused_with_a_clear_message(tmp_path):
    path = tmp_path / "foreign.pth"
    checkpoint = mmengine_like_checkpoint()
    checkpoint["meta"]["extra"] = fractions.Fraction(1, 3)
    torch.save(checkpoint, path)
    with pytest.raises(pickle.UnpicklingError):
        torch.load(path)  # torch itself refuses: the allow-list did not open anything else
    with pytest.raises(UnsafeCheckpointError) as err:
        check_checkpoint(path)
    message = str(err.value)
    assert "fractions.Fraction" in message and str(path) in message and "\n" not in message


class _GetattrGadget:
    """Pickles as getattr(HistoryBuffer, "__init__"): a getattr that is not a statistics method."""

    def __reduce__(self):
        return getattr, (HistoryBuffer, "__init__")


def test_getattr_is_limited_to_history_buffer_statistics(tmp_path):
    path = tmp_path / "gadget.pth"
    torch.save({"x": _GetattrGadget()}, path)
    assert unsafe_globals(path) == []  # only allow-listed names appear ...
    with pytest.raises(pickle.UnpicklingError, match="refused getattr"):
        torch.load(path)  # ... but the getattr behind the name refuses anything else


def test_missing_checkpoint_is_one_line(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        check_checkpoint(tmp_path / "nope.pth")
