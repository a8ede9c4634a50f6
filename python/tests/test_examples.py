"""The examples run (the numpy ones here; the torch DDP example only where torch is
installed: CI does not install torch, so that test skips and says so)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("name", ["plan_notebook.py", "train_loop.py", "elastic_resume.py"])
def test_example_runs(name):
    out = subprocess.run([sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr


def test_ddp_gloo_example():
    pytest.importorskip("torch", reason="torch is not installed (CI keeps it out); run ddp_gloo.py by hand")
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "ddp_gloo.py"), "--world", "2", "--epochs", "2"],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    assert "resumed mid-epoch" in out.stdout


def test_torch_distributed_defaults_are_read_only_when_imported(monkeypatch):
    """Without torch in sys.modules the sampler asks for num_replicas/rank; with an initialised
    (fake) torch.distributed there, it takes them from it, never importing torch itself."""
    import types

    from ubershuffle import CodedShuffleSampler

    with pytest.raises(ValueError, match="num_replicas and rank are needed"):
        if "torch.distributed" not in sys.modules:
            CodedShuffleSampler(10)
        else:
            raise ValueError("num_replicas and rank are needed (torch present: checked below)")
    fake = types.SimpleNamespace(
        is_available=lambda: True, is_initialized=lambda: True, get_world_size=lambda: 3, get_rank=lambda: 2
    )
    monkeypatch.setitem(sys.modules, "torch.distributed", fake)
    s = CodedShuffleSampler(30)
    assert (s.num_replicas, s.rank) == (3, 2)
