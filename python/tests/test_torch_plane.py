"""ubershuffle.torch.ShuffleGroup under torchrun with 4 gloo ranks: every index of every epoch
served exactly once with the right bytes (read in the training process and in persistent
DataLoader worker processes), for records of uneven size, in both modes; the bytes moved are
the chain's, to the byte; a killed rank's job resumes from its last saved state (torchrun
--max-restarts), also onto another number of ranks. Skipped when torch is not installed."""

from __future__ import annotations

import collections
import json
import pathlib
import subprocess
import sys
import time
from collections.abc import Iterable

import numpy as np
import pytest

pytest.importorskip("torch", reason="torch is not installed: the ShuffleGroup tests need it")

from ubershuffle import CodedShuffleSampler  # noqa: E402

RANK_SCRIPT = pathlib.Path(__file__).with_name("torch_plane_rank.py")
sys.path.insert(0, str(RANK_SCRIPT.parent))
import torch_plane_rank  # noqa: E402

RECORDS = torch_plane_rank.records(400, 1)
SIZES = np.array([len(r) for r in RECORDS], dtype=np.int64)


def run_job(
    out: pathlib.Path, nproc: int, *options: str, restarts: int = 0, timeout: float = 240, fails: bool = False
) -> list:
    """Runs the rank script under torchrun; returns every rank's log (``fails``: the job must
    fail, and the logs of the ranks that wrote one are returned)."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={nproc}",
        f"--max-restarts={restarts}",
        str(RANK_SCRIPT),
        str(out),
        *options,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if fails:
        assert done.returncode != 0, "the job was meant to fail"
        return [json.loads(p.read_text()) for p in sorted(out.glob("rank-*.json"))]
    if done.returncode != 0:
        # What the ranks said (their tracebacks come before torchrun's summary), then the end.
        lines = (done.stdout + done.stderr).splitlines()
        said = [line for line in lines if "Error" in line or "error" in line][:20]
        logs = [p.read_text()[:500] for p in sorted(out.glob("rank-*.json")) if '"error"' in p.read_text()]
        tail = "\n".join([*said, *logs, "...", *lines[-40:]])
        pytest.fail(f"torchrun exited with {done.returncode}:\n{tail}")
    return [json.loads((out / f"rank-{r}.json").read_text()) for r in range(nproc)]


def check_served(logs: list, epochs: Iterable, ranks: int, records: int = len(RECORDS)) -> None:
    """Every index of a data set of ``records`` served exactly once per epoch, but for
    DistributedSampler's padding, and every byte read right."""
    per_rank = -(-records // ranks)
    for e in map(str, epochs):
        served = collections.Counter()
        for log in logs:
            assert log["epochs"][e]["bad"] == [], f"epoch {e}: wrong bytes"
            served.update(log["epochs"][e]["served"])
        assert set(served) == set(range(records)), f"epoch {e}: indices missing or foreign"
        assert sum(served.values()) == per_rank * ranks, f"epoch {e}: {sum(served.values())} served"


@pytest.mark.parametrize(("mode", "source"), [("peer", "files"), ("store", "blob")])
def test_a_source_on_disk_is_read_by_the_engine_byte_for_byte(tmp_path, mode, source):
    """A folder of files and a blob with offsets are read by the engine itself (in Rust, off
    the GIL): every record arrives with its bytes, and the readers' figures count them."""
    options = ["policy=global"] if mode == "peer" else ["alpha=0.5"]
    logs = run_job(tmp_path, 3, f"mode={mode}", f"source={source}", "epochs=2", *options)
    trainers = logs if mode == "peer" else logs[1:]
    check_served(trainers, range(2), len(trainers))
    read = sum(t["figures"]["0"]["source_bytes"] for t in trainers)
    if mode == "store":
        read = sum(f["source_bytes"] for f in logs[0]["served"])
    assert read > 0


def test_peer_partial_local_moves_the_chain_s_records_rank_to_rank(tmp_path):
    logs = run_job(tmp_path, 4, "policy=partial-local", "fraction=0.3", "epochs=4")
    check_served(logs, range(4), 4)
    sampler = CodedShuffleSampler(
        len(RECORDS), num_replicas=4, rank=0, seed=3, policy="partial-local", fraction=0.3
    )
    batches = []
    for e in range(4):
        sampler.set_epoch(e)
        batches.append([sampler._core.batch(r) for r in range(4)])
    for r, log in enumerate(logs):
        first = log["figures"]["0"]
        assert first["kind"] == "catch-up"
        assert first["source_records"] == len(batches[0][r]), "a rank reads its own batch, no more"
        assert first["source_bytes"] == SIZES[batches[0][r]].sum()
        for e in range(1, 4):
            f = log["figures"][str(e)]
            arrived = np.setdiff1d(batches[e][r], batches[e - 1][r])
            assert f["kind"] == "step" and f["source_records"] == 0
            assert f["records_received"] == len(arrived)
            assert f["bytes_received"] == SIZES[arrived].sum(), "to the byte"
        # A rank holds its batch and the next epoch's arrivals: at most (1 + Q) N / M.
        assert log["held"] <= 1.3 * len(RECORDS) / 4
    sent = sum(log["figures"]["2"]["bytes_sent"] for log in logs)
    assert sent == sum(log["figures"]["2"]["bytes_received"] for log in logs)


def test_store_mode_codes_from_one_rank_to_the_others(tmp_path):
    logs = run_job(tmp_path, 4, "mode=store", "alpha=0.5", "epochs=3", "spawn=1")
    store, trainers = logs[0], logs[1:]
    check_served(trainers, range(3), 3)
    for e in ("1", "2"):
        figures = [t["figures"][e] for t in trainers]
        assert all(f["kind"] == "step" and f["coded_packets"] > 0 for f in figures)
    steps = [f for f in store["served"] if f["kind"] == "step"]
    assert steps, "the store served coded steps"
    for f in steps:
        assert f["packets"] < f["uncoded_packets"], "coding sends fewer packets than uncoded"
        assert f["data_bytes"] + f["padding_bytes"] == f["packets"] * f["segment_bytes"]
        # The store's uplink carries every packet a rank decodes from once, without its
        # padding (and the plan and its routes besides).
        sent = f["unicast_bytes"] + f["multicast_bytes"]
        assert f["unicast_packets"] + f["multicast_packets"] + f["unneeded_packets"] == f["packets"]
        assert sent <= f["data_bytes"] <= sent + f["unneeded_packets"] * f["segment_bytes"]
        # Its streams carry the rounds and nothing else (each rank's part of the plan is apart).
        assert f["bytes_sent"] == sent
        assert sum(sum(r) for r in f["round_store_bytes"]) == sent
    for e in ("1", "2"):
        served = next(f for f in steps if f["epoch"] == int(e))
        relay = np.sum(served["round_relay_bytes"], axis=0)
        for place, t in enumerate(trainers):
            f = t["figures"][e]
            # A rank receives the packets it decodes from: its message from the store and the
            # other ranks' pieces, nothing else.
            got = sum(r[place] for r in served["round_store_bytes"]) + int(relay[:, place].sum())
            assert f["round_bytes_received"] == f["bytes_received"] == got, "the rounds, to the byte"
        assert sum(t["figures"][e]["part_bytes"] for t in trainers) == served["part_bytes"]


def test_uncoded_store_mode_sends_each_rank_only_the_records_it_lacks(tmp_path):
    logs = run_job(tmp_path, 4, "mode=store", "alpha=0.5", "scheme=uncoded", "epochs=3")
    store, trainers = logs[0], logs[1:]
    check_served(trainers, range(3), 3)
    # The epochs the ranks asked for (the store serves the next ahead, unasked).
    steps = [f for f in store["served"] if f["kind"] == "step" and f["epoch"] < 3]
    assert len(steps) == 2, "the store served steps"
    for f in steps:
        # An uncoded plan is unicasts of what each rank lacks: the records go whole, unencoded.
        assert f["sent"] == "whole" and f["round_relay_bytes"] == []
        received = [t["figures"][str(f["epoch"])]["record_bytes_received"] for t in trainers]
        assert f["bytes_sent"] == sum(received) > 0, "each lacked record once, to the byte"
        # In one round of unicasts: each rank's own records.
        assert f["round_store_bytes"] == [received]
    for e in ("1", "2"):
        for t in trainers:
            f = t["figures"][e]
            assert f["bytes_received"] == f["record_bytes_received"], "its records, to the byte"
            # No plan travels (each rank knows what it lacks), and no relay.
            assert f["part_bytes"] == 0
            assert f["bytes_sent"] == 0, "no relay: a rank sends its requests, no records"


@pytest.mark.parametrize(("mode", "options"), [("peer", ["policy=global"]), ("store", ["alpha=0.5"])])
def test_yielding_to_the_gradients_holds_the_delivery_and_changes_no_record_that_arrives(
    tmp_path, mode, options
):
    """DDP steps on every batch while each next epoch's delivery (many rounds: records 64
    times the others', a few MB per rank) travels, the plane yielding to the all-reduces or
    not. Yielding, the plane held its rounds at least once and posted none while an
    all-reduce was in flight; not yielding, it did post beside them (so the count can tell).
    Either way the same records arrive with the same bytes, and every step's all-reduce is
    timed."""
    runs = {}
    for ddp in ("yield", "flight"):
        # Rounds of 128 KiB per pair either way (a yielding delivery's), so that the
        # delivery has many rounds to post beside the steps.
        job = ("epochs=3", f"ddp={ddp}", "scale=64", "width=512", "round_bytes=131072", "first_steps=4")
        logs = run_job(tmp_path / ddp, 4, f"mode={mode}", *options, *job)
        trainers = logs[1:] if mode == "store" else logs
        check_served(trainers, range(3), len(trainers))
        runs[ddp] = trainers
        for log in trainers:
            for e in range(3):
                batches = -(-len(log["epochs"][str(e)]["served"]) // 16)
                steps = batches + 4
                assert log["figures"][str(e + 1)]["allreduce_steps"] == steps, "every step timed"
    figures = {
        ddp: [log["figures"][str(e)] for log in trainers for e in range(1, 4)]
        for ddp, trainers in runs.items()
    }
    assert all(f["delivery_posts"] > 0 for f in figures["yield"] + figures["flight"])
    assert sum(f["yields"] for f in figures["yield"]) > 0, "yielding never held a round"
    assert sum(f["yield_seconds"] for f in figures["yield"]) > 0.0
    assert all(f["posts_during_allreduce"] == 0 for f in figures["yield"]), "a round met an all-reduce"
    assert all(f["yields"] == 0 for f in figures["flight"])
    assert sum(f["posts_during_allreduce"] for f in figures["flight"]) > 0, (
        "without yielding no round met an all-reduce: the test cannot tell the two apart"
    )
    keys = ("records_received", "record_bytes_received", "bytes_received", "held_records", "held_bytes")
    for yielding, flying in zip(runs["yield"], runs["flight"]):
        for e in ("1", "2"):
            assert yielding["epochs"][e]["served"] == flying["epochs"][e]["served"]
            assert yielding["epochs"][e]["batch"] == flying["epochs"][e]["batch"], f"epoch {e}: other bytes"
            y, f = yielding["figures"][e], flying["figures"][e]
            assert [y[k] for k in keys] == [f[k] for k in keys], f"epoch {e}"


@pytest.mark.parametrize("mode", ["peer", "store"])
def test_a_killed_rank_s_job_resumes_from_its_last_state(tmp_path, mode):
    store_dir = tmp_path / "stores"
    options = [f"mode={mode}", "epochs=4", "save_each=1", "resume=1", "kill_at=2", f"store_dir={store_dir}"]
    if mode == "store":
        options.append("alpha=0.5")
    logs = run_job(tmp_path / "run", 4, *options, restarts=1)
    trainers = logs[1:] if mode == "store" else logs
    check_served(trainers, range(4), len(trainers))
    for log in trainers:
        resumed = log["figures"]["2"]
        assert resumed["kind"] == "catch-up", "the restarted job caught up from what the ranks kept"
        assert resumed["source_records"] == 0
        if mode == "peer":
            # The stores in store_dir kept every rank's records: nothing had to move.
            assert resumed["records_received"] == 0


def test_a_job_resumes_on_another_number_of_ranks(tmp_path):
    store_dir = tmp_path / "stores"
    common = ["policy=partial-local", "fraction=0.3", "save_each=1", "resume=1", f"store_dir={store_dir}"]
    run_job(tmp_path / "run", 4, *common, "epochs=2")
    logs = run_job(tmp_path / "run", 3, *common, "epochs=4")
    check_served(logs, range(2, 4), 3)
    reads = sum(log["figures"]["2"]["source_records"] for log in logs)
    assert reads <= len(RECORDS) / 4, "only the fourth rank's records come from the source again"


def test_a_frozen_rank_is_named_by_the_ranks_that_wait_for_it(tmp_path):
    """Rank 2 freezes (SIGSTOP, its engine's threads too) at epoch 0; the ranks that wait for
    it name it within the stated bound, ``timeout + 2 * period`` after its last beat, and not
    before ``timeout - period`` after it froze (it beat at least once a period before)."""
    timeout = 5.0
    period = timeout / 10
    logs = run_job(tmp_path, 4, f"timeout={timeout:g}", "stall=2", "epochs=3", fails=True)
    stopped_at = float((tmp_path / "stopped_at").read_text())
    named = [log for log in logs if "timeout" in log]
    assert named, "the ranks waiting on the frozen one raised ShuffleTimeout"
    for log in named:
        message = log["timeout"]
        assert "rank 2 has not been heard from for" in message and "timeout 5 s" in message, message
        # Its last beat is at most the freeze: named within the bound of the freeze is within
        # the bound of the last beat.
        after = log["timeout_at"] - stopped_at
        assert timeout - period <= after <= timeout + 2 * period, (after, message)


@pytest.fixture
def one_rank_group():
    """A process group of this process alone (gloo), destroyed afterwards."""
    import socket

    import torch.distributed as dist

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    yield dist
    dist.destroy_process_group()


def test_bad_settings_are_one_line_errors(one_rank_group, tmp_path):
    from ubershuffle.torch import ShuffleGroup

    data = RECORDS[:20]
    cases = [
        (dict(mode="relay"), ValueError, 'mode must be "peer" or "store"'),
        (dict(mode="peer", alpha=0.5), ValueError, "alpha and extra_cache are the cache of mode"),
        (dict(mode="peer", extra_cache=0.2), ValueError, "alpha and extra_cache are the cache of mode"),
        (dict(mode="store"), ValueError, "needs at least two ranks"),
        (dict(timeout=0), ValueError, "timeout must be a positive number"),
        (dict(time_budget=0), ValueError, "time-budget must be a positive number"),
        (dict(policy="sideways"), ValueError, "policy"),
        (dict(first_epoch="shards"), ValueError, 'first_epoch must be "random" or "blocks", got .shards.'),
    ]
    for kwargs, error, text in cases:
        with pytest.raises(error, match=text) as caught:
            ShuffleGroup(data, **kwargs)
        assert "\n" not in str(caught.value), str(caught.value)
    with pytest.raises(TypeError, match="records must be"):
        ShuffleGroup(42)


def test_a_sharded_source_starts_peer_mode_in_blocks_unless_told(one_rank_group, tmp_path):
    import io
    import tarfile

    from ubershuffle.sources import webdataset
    from ubershuffle.torch import ShuffleGroup

    path = tmp_path / "train-000000.tar"
    with tarfile.open(path, "w") as tar:
        for k in range(6):
            info = tarfile.TarInfo(f"{k:04d}.jpg")
            info.size = len(RECORDS[k])
            tar.addfile(info, io.BytesIO(RECORDS[k]))
    shards = webdataset(str(path), index_dir=False)
    for given, used in ((None, "blocks"), ("random", "random"), ("blocks", "blocks")):
        with ShuffleGroup(shards, first_epoch=given, seed=1) as sg:
            assert sg.first_epoch == used and sg.sampler.state_dict()["first_epoch"] == used
    for given, used in ((None, "random"), ("blocks", "blocks")):  # records that are not shards
        with ShuffleGroup(RECORDS[:6], first_epoch=given, seed=1) as sg:
            assert sg.first_epoch == used and sg.sampler.state_dict()["first_epoch"] == used


def test_one_rank_holds_everything_and_reads_it_once(one_rank_group):
    from ubershuffle.torch import ShuffleGroup

    data = RECORDS[:50]
    with ShuffleGroup(data, seed=1) as sg:
        for epoch in range(3):
            sg.set_epoch(epoch)
            assert sorted(sg.sampler) == list(range(50))
            assert all(sg[i].tobytes() == data[i] for i in sg.sampler)
        assert sg.figures(0)["source_records"] == 50
        assert sg.figures(2)["source_records"] == 0 and sg.figures(2)["records_received"] == 0
        with pytest.raises(KeyError):
            sg.figures(9)
    with pytest.raises(RuntimeError, match="closed"):
        sg.set_epoch(3)
    # Nothing reads as if it were there after close(): every call raises.
    for call in (lambda: sg[0], lambda: 0 in sg, lambda: sg.dataset()):
        with pytest.raises(RuntimeError, match="is closed"):
            call()


def test_a_group_is_freed_with_its_last_reference_and_its_plane_closes(one_rank_group):
    # The engine's threads hold the source's reader while they run: nothing they hold refers
    # back to the group, so a group dropped without close() is freed (its plane closing then),
    # and no process group it names is kept alive until the interpreter's exit, where gloo's
    # threads would end in the wrong order.
    import gc
    import threading
    import weakref

    from ubershuffle.torch import ShuffleGroup

    sg = ShuffleGroup(RECORDS[:30], seed=1)
    sg.set_epoch(0)
    ref = weakref.ref(sg)
    del sg
    gc.collect()
    assert ref() is None, "the group is still referenced"
    for _ in range(100):
        if not any(t.name == "ubershuffle-watch" for t in threading.enumerate()):
            break
        time.sleep(0.05)
    assert not any(t.name == "ubershuffle-watch" for t in threading.enumerate()), "its plane did not close"


def test_the_dataset_yields_transformed_records_and_pickles_as_a_reader(one_rank_group):
    # Workers started by fork and by spawn read it in the torchrun jobs of test_torch_job.py
    # (forking this test process, whose threads are pytest's and torch's too, is not the job's
    # situation).
    import pickle

    from ubershuffle.torch import ShuffleGroup

    data = RECORDS[:40]
    with ShuffleGroup(data, seed=1) as sg:
        sg.set_epoch(0)
        dataset = sg.dataset(len)
        assert len(dataset) == 40 and dataset[5] == len(data[5])
        copy = pickle.loads(pickle.dumps(dataset))
        assert copy[7] == len(data[7]) and type(copy.records).__name__ == "Reader"
        assert pickle.loads(pickle.dumps(sg.dataset()))[9].tobytes() == data[9]


def test_yield_to_times_every_step_s_all_reduce_and_takes_one_ddp_model(one_rank_group):
    import torch
    from torch.nn.parallel import DistributedDataParallel

    from ubershuffle.torch import ShuffleGroup

    with ShuffleGroup(RECORDS[:40], seed=1) as sg:
        with pytest.raises(TypeError, match="needs a torch DistributedDataParallel model"):
            sg.yield_to(torch.nn.Linear(4, 4))
        model = sg.yield_to(DistributedDataParallel(torch.nn.Linear(4, 4)))
        with pytest.raises(RuntimeError, match="DDP takes one communication hook"):
            sg.yield_to(model)
        for epoch in range(2):
            sg.set_epoch(epoch)
            for _ in range(3 + epoch):
                model(torch.ones(2, 4)).sum().backward()
        sg.wait_delivery()
        sg.set_epoch(2)
        for epoch, steps in ((1, 3), (2, 4)):
            f = sg.figures(epoch)
            assert f["allreduce_steps"] == steps == len(f["allreduce_step_seconds"])
            assert f["allreduce_seconds"] == pytest.approx(sum(f["allreduce_step_seconds"]))
            assert len(f["allreduce_step_during_delivery"]) == steps
            # One rank moves nothing: no round was posted, none held.
            assert (f["delivery_posts"], f["yields"], f["yield_seconds"]) == (0, 0, 0.0)


def test_nccl_moves_the_records_as_cuda_tensors(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("NCCL needs a GPU per rank: this machine has none (the NCCL path is untested here)")
    logs = run_job(tmp_path, 2, "backend=nccl", "policy=partial-local", "fraction=0.3", "epochs=2")
    check_served(logs, range(2), 2)
