"""The examples run (the numpy ones everywhere; the torch ones where torch is installed, as in
CI; elsewhere those tests skip and say so)."""

from __future__ import annotations

import ast
import json
import pathlib
import re
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def check_plan_notebook(lines: list) -> None:
    """The paper example's plan and bound, as test_planning knows them."""
    assert "paper example: 3 transmissions; verified: True" in lines
    assert "lower bound: LowerBound(value=3, kind='max-need', uncoded_transmissions=6)" in lines


TRAIN_EPOCH = re.compile(
    r"epoch (\d): ranks receive (\d+) samples; coded delivery (\d+) transmissions vs (\d+) uncoded \((\w+)\)"
)


def check_train_loop(lines: list) -> None:
    """Epoch 0 loads every rank's cache (alpha 0.4 of 20 000 samples, 4 ranks) uncoded; later
    epochs code below what the ranks receive; the resume at step 40 of epoch 1 (41 batches of 32
    served) leaves exactly the rest of rank 0's 5000 samples."""
    epochs = [TRAIN_EPOCH.fullmatch(line).groups() for line in lines if TRAIN_EPOCH.fullmatch(line)]
    assert [(e[0], e[-1]) for e in epochs] == [("0", "initial"), ("1", "chain"), ("2", "chain")]
    assert epochs[0][1:4] == ("32000", "32000", "32000")
    for _, receive, coded, uncoded, _ in epochs[1:]:
        assert int(receive) == int(uncoded) and int(coded) < int(uncoded)
    assert lines[-1] == f"resumed at epoch 1, position {41 * 32}: {5000 - 41 * 32} samples left on rank 0"


def check_elastic_resume(lines: list) -> None:
    """4 ranks served 1000 samples each of 10 000; 3 ranks serve the other 6000, once each; the
    next epoch starts a chain without coding gain, the one after codes."""
    assert lines[0] == "served before: 4000, after: 6000, total distinct 10000"
    assert lines[1] == "epoch 5 finished on 3 ranks: remainder"
    initial = ast.literal_eval(lines[2].removeprefix("epoch 6 on 3 ranks: "))
    chain = ast.literal_eval(lines[3].removeprefix("epoch 7 on 3 ranks: "))
    assert initial["kind"] == "initial" and initial["transmissions"] == initial["uncoded_transmissions"]
    assert chain["kind"] == "chain" and chain["transmissions"] < chain["uncoded_transmissions"]
    assert initial["world_size"] == chain["world_size"] == 3


@pytest.mark.parametrize(
    "name, check",
    [
        ("plan_notebook.py", check_plan_notebook),
        ("train_loop.py", check_train_loop),
        ("elastic_resume.py", check_elastic_resume),
    ],
)
def test_example_runs(name, check):
    """The numpy examples run and print what they claim (each example's own check above)."""
    out = subprocess.run([sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    check(out.stdout.splitlines())


def linear_example_needs(rank: int, epochs: int) -> int:
    """The records rank ``rank`` of exchange_linear.py receives in epochs 0..``epochs``: its
    first batch whole, then what its sampler needs each epoch (the example's chain)."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        import exchange_linear as example
    finally:
        sys.path.remove(str(EXAMPLES))
    from ubershuffle import CodedShuffleSampler

    s = CodedShuffleSampler(
        example.POINTS, num_replicas=4, rank=rank, seed=example.SEED, alpha=example.ALPHA, **example.POLICY
    )
    total = len(s.batch())
    for epoch in range(1, epochs + 1):
        s.set_epoch(epoch)
        total += len(s.needs())
    return total


def test_exchange_linear_example_trains_on_delivered_records():
    """4 processes, each with its own record store: every received record checked (the example
    fails otherwise), exactly the records each rank's sampler needs; coded deliveries send
    fewer packets than records alone; and each rank's loss falls."""
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "exchange_linear.py"), "--epochs", "4"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    ranks = [line for line in lines if "rank" in line]
    assert sorted(r["rank"] for r in ranks) == [0, 1, 2, 3]
    for r in ranks:
        assert r["checked"] == linear_example_needs(r["rank"], 4), r
        assert r["losses"][-1] < r["losses"][0] / 4, r
    epochs = [line for line in lines if "epoch" in line]
    assert [e["epoch"] for e in epochs][:4] == [1, 2, 3, 4]
    assert all(e["packets"] < e["uncoded_packets"] for e in epochs)


def run_without_torch_check(code: str) -> None:
    """Runs ``code`` in a fresh interpreter (no test has imported torch there) and then checks
    that torch was not imported."""
    check = "\nassert 'torch' not in sys.modules, 'torch was imported'\n"
    out = subprocess.run(
        [sys.executable, "-c", "import sys\n" + code + check], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr


def test_exchange_torch_ddp_example_imports_without_torch():
    """The DDP example is run by hand (torch is not installed in CI); its module imports torch
    only when run."""
    path = str(EXAMPLES / "exchange_torch_ddp.py")
    run_without_torch_check(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('example', {path!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "assert callable(module.main)"
    )


def test_ddp_gloo_example():
    pytest.importorskip("torch", reason="torch is not installed: the ddp_gloo example needs it")
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "ddp_gloo.py"), "--world", "2", "--epochs", "2"],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    assert "resumed mid-epoch" in out.stdout


def fake_distributed(initialized: bool):
    """A stand-in for ``torch.distributed`` in ``sys.modules``: 3 ranks, this one rank 2."""
    import types

    return types.SimpleNamespace(
        is_available=lambda: True,
        is_initialized=lambda: initialized,
        get_world_size=lambda: 3,
        get_rank=lambda: 2,
    )


def test_torch_distributed_defaults_are_read_only_when_imported(monkeypatch):
    """Without torch.distributed in sys.modules, or with its group not initialised, the
    sampler asks for num_replicas/rank (and imports no torch); with an initialised (fake)
    torch.distributed there, it takes them from it."""
    from ubershuffle import CodedShuffleSampler

    asks = "num_replicas and rank are needed: torch.distributed is not initialised"
    monkeypatch.delitem(sys.modules, "torch.distributed", raising=False)
    with pytest.raises(ValueError, match=asks):
        CodedShuffleSampler(10)
    run_without_torch_check(
        "from ubershuffle import CodedShuffleSampler\n"
        "try:\n"
        "    CodedShuffleSampler(10)\n"
        "except ValueError as e:\n"
        f"    assert str(e).startswith({asks!r}), e\n"
        "else:\n"
        "    raise AssertionError('no ValueError')"
    )
    monkeypatch.setitem(sys.modules, "torch.distributed", fake_distributed(initialized=False))
    with pytest.raises(ValueError, match=asks):
        CodedShuffleSampler(10)
    monkeypatch.setitem(sys.modules, "torch.distributed", fake_distributed(initialized=True))
    s = CodedShuffleSampler(30)
    assert (s.num_replicas, s.rank) == (3, 2)
    given = CodedShuffleSampler(30, num_replicas=5, rank=4)
    assert (given.num_replicas, given.rank) == (5, 4), "what is passed wins"


@pytest.mark.parametrize("mode, ranks", [("peer", 4), ("store", 5)])
def test_torch_jpeg_example_trains_on_records_the_job_moves(tmp_path, mode, ranks):
    """The torchrun example on JPEG digits: both modes train (held-out accuracy well above
    chance after 2 epochs) on records moved by the job's own process group."""
    for module in ("torch", "PIL", "sklearn"):
        pytest.importorskip(module, reason=f"{module} is not installed: the torch_jpeg example needs it")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}"]
    cmd += [
        str(EXAMPLES / "torch_jpeg.py"),
        "--mode",
        mode,
        "--epochs",
        "2",
        "--data",
        str(tmp_path / "data"),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert [line["epoch"] for line in lines] == [0, 1]
    assert lines[-1]["held_out_accuracy"] > 0.5
    assert lines[1]["records_received"] > 0
    if mode == "store":
        assert lines[1]["coded_packets"] > 0
