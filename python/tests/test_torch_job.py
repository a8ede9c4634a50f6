"""ShuffleGroup in the conditions of a real training job, under torchrun with gloo ranks:
epochs far longer than the timeout, a rank SIGKILLed mid-epoch (named by the others within the
stated bound; under ``torchrun --max-restarts 1`` an exact resume through StatefulDataLoader
with workers), a training and a validation group followed by the job's own ``new_group``, every
rank told of a differing setting or data set, and ``close()`` from another thread. Skipped when
torch is not installed."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="torch is not installed: the ShuffleGroup tests need it")

RANK_SCRIPT = pathlib.Path(__file__).with_name("torch_job_rank.py")
sys.path.insert(0, str(RANK_SCRIPT.parent))
import launch_ranks  # noqa: E402
from test_torch_plane import check_served  # noqa: E402


def torchrun(out: pathlib.Path, nproc: int, *options: str, restarts: int = 0) -> list:
    """The torchrun command of the rank script."""
    out.mkdir(parents=True, exist_ok=True)
    head = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}"]
    return [*head, f"--max-restarts={restarts}", str(RANK_SCRIPT), str(out), *options]


def finish(job: subprocess.Popen, out: pathlib.Path, nproc: int, timeout: float = 300) -> list:
    """Waits for a job that must succeed; returns every rank's log."""
    try:
        stdout, _ = job.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        job.kill()
        stdout, _ = job.communicate()
        pytest.fail("the job did not end in time:\n" + "\n".join(stdout.splitlines()[-60:]))
    if job.returncode != 0:
        # Enough lines to reach the failing rank's own traceback above the agent's summary.
        tail = "\n".join(stdout.splitlines()[-200:])
        pytest.fail(f"the job exited with {job.returncode}:\n{tail}")
    return [json.loads((out / f"rank-{r}.json").read_text()) for r in range(nproc)]


def start(cmd: list, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def store_folders_of(pids: set) -> list:
    """The temporary store folders in /dev/shm that a process of ``pids`` made (their
    ``owner`` file names it)."""
    shm = pathlib.Path("/dev/shm")
    found = []
    for folder in shm.glob("ubershuffle-store-*") if shm.is_dir() else []:
        try:
            owner = int((folder / "owner").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if owner in pids:
            found.append(folder)
    return found


def test_epochs_four_times_the_timeout_run_to_the_end_in_both_modes(tmp_path):
    # timeout=5; the last rank trains 20 s per epoch, the others 1 s: the others' set_epoch
    # waits on it (and the store for its requests) about 18 s, with every beat alive, and
    # nothing times out. The two jobs run at once.
    timeout = 5.0
    options = ["scenario=long", f"timeout={timeout}", "train=20", "epochs=3"]
    peer = start(torchrun(tmp_path / "peer", 4, *options))
    store = start(torchrun(tmp_path / "store", 4, *options, "mode=store", "spawn=1"))
    for job, name, trainers in ((peer, "peer", slice(0, 4)), (store, "store", slice(1, 4))):
        logs = finish(job, tmp_path / name, 4)
        check_served(logs[trainers], range(3), len(logs[trainers]))
        # Epoch 2's delivery could start only once the slow rank asked for it: a wait longer
        # than the timeout (about 18 s on an idle machine, less when the fast ranks' own epochs
        # run slow on a loaded one: 9.6 s once), and nothing timed out.
        for log in logs[trainers][:-1]:
            waited = log["figures"]["2"]["exposed_seconds"]
            assert waited > timeout, f"the wait on the slow rank lasted {waited:.1f} s"
        if name == "store":
            waits = [f["request_wait_seconds"] for f in logs[0]["served"]]
            assert max(waits) > 2 * timeout, f"the store waited at most {max(waits):.1f} s"


@pytest.mark.parametrize("mode", ["peer", "store"])
def test_a_rank_killed_mid_epoch_resumes_exactly_through_stateful_dataloader(tmp_path, mode):
    pytest.importorskip("torchdata", reason="torchdata (StatefulDataLoader) is not installed")
    options = ["scenario=resume", f"mode={mode}", "epochs=3", "kill_epoch=1", "victim=2"]
    logs = finish(start(torchrun(tmp_path, 4, *options, restarts=1)), tmp_path, 4)
    trainers = logs[1:] if mode == "store" else logs
    # The killed epoch: what was trained before the kill and after the resume, each index
    # exactly once across the ranks, the right bytes.
    check_served(trainers, range(3), len(trainers))
    assert all(log["resumed_at"] == [1, 32] for log in trainers), [log.get("resumed_at") for log in trainers]


def run_unsupervised(out: pathlib.Path, nproc: int, *options: str) -> None:
    """The rank script as nproc processes with torchrun's environment but no agent to stop
    the others when one dies (:mod:`launch_ranks`). Returns when every rank has ended."""
    launch_ranks.launch(out, nproc, str(RANK_SCRIPT), list(options))


def check_named(out: pathlib.Path, victim: int, timeout: float) -> None:
    """Every rank but ``victim`` named it, first, in what the plane raised or logged, within
    the stated bound: ``timeout + 2 * period`` after its last heartbeat (``period`` a tenth of
    the timeout). The victim noted its last beat as it was killed (beats through the job's
    store), or the kill itself (the engine beats on its connections at least once a period
    before: within ``timeout + period`` of the kill is within the bound of its last beat). No
    process of the job left a store folder in /dev/shm, the killed one included (checked with
    no restart to sweep it)."""
    import ast

    kind, last_beat = ast.literal_eval((out / "last_beat").read_text())
    period = timeout / 10
    bound = timeout + (2 * period if kind == "beat" else period)
    pids = {int((out / f"pid-{r}").read_text()) for r in range(4)}
    assert not store_folders_of(pids), "a rank's temporary store was left in /dev/shm"
    for r in range(4):
        if r == victim:
            continue
        log = json.loads((out / f"rank-{r}.json").read_text())
        heard = [x for x in (log.get("logged"), log.get("raised")) if x]
        assert heard, f"rank {r} never named the dead rank"
        when, message = min(heard)
        assert message.startswith(("ShuffleTimeout", "ShuffleError", "PeerFailed", "ubershuffle:")), message
        assert f"rank {victim}" in message, message
        assert when - last_beat <= bound, (when - last_beat, message)


@pytest.mark.parametrize("mode", ["peer", "store"])
def test_a_rank_killed_mid_epoch_is_named_by_every_other_within_the_bound(tmp_path, mode):
    timeout, victim = 4.0, 2
    options = ["scenario=die", f"mode={mode}", f"timeout={timeout}", "train=6"]
    run_unsupervised(tmp_path, 4, *options, f"victim={victim}")
    check_named(tmp_path, victim, timeout)


@pytest.mark.parametrize("mode", ["peer", "store"])
def test_a_delivery_posted_to_a_rank_killed_before_it_names_the_rank(tmp_path, mode):
    # Epochs of 1 s: the next epochs' deliveries are posted to the dead rank before its
    # heartbeat is overdue, on connections gloo already saw close. gloo raises as they are
    # posted, naming an address; the plane names the rank.
    timeout, victim = 4.0, 2
    options = ["scenario=die", f"mode={mode}", f"timeout={timeout}", "train=1", "epochs=12"]
    run_unsupervised(tmp_path, 4, *options, f"victim={victim}")
    check_named(tmp_path, victim, timeout)


@pytest.mark.parametrize("mode", ["peer", "store"])
def test_a_train_and_a_validation_group_then_the_job_s_new_group(tmp_path, mode):
    logs = finish(start(torchrun(tmp_path, 4, "scenario=groups", f"mode={mode}")), tmp_path, 4)
    for log in logs:
        assert log["new_group_sum"] == 4 and log["library_group_sum"] == 16
        assert log["serve_errors"] == []
    trainers = logs[1:] if mode == "store" else logs
    for name, records in (("train", 400), ("valid", 150)):
        for epoch in ("0", "1"):
            check_served(
                [{"epochs": {epoch: log[name][epoch]}} for log in trainers], [epoch], len(trainers), records
            )


@pytest.mark.parametrize(
    ("mode", "what", "text"),
    [
        ("peer", "seed", "seed differs"),
        ("store", "seed", "seed differs"),
        ("peer", "content", "differ in content"),
    ],
)
def test_every_rank_is_told_of_a_differing_setting_or_data_set(tmp_path, mode, what, text):
    job = start(torchrun(tmp_path, 3, "scenario=mismatch", f"mode={mode}", f"what={what}"))
    logs = finish(job, tmp_path, 3)
    for log in logs:
        assert log["error"] is not None and text in log["error"], log["error"]
        assert "\n" not in log["error"]


def test_close_from_another_thread_ends_the_wait_and_every_read_after_raises(tmp_path):
    logs = finish(start(torchrun(tmp_path, 2, "scenario=close", "timeout=30")), tmp_path, 2)
    first, second = logs
    assert first["set_epoch"].startswith("ShuffleClosed"), first["set_epoch"]
    assert "is closed" in first["getitem"] and "is closed" in first["contains"]
    assert "closed its ShuffleGroup" in second["second_rank"], second["second_rank"]
    # A delivery no one asked for, waiting on a stopped rank: close() abandons it once it stalls
    # (STALL_SECONDS, 3 s), not waiting for it to end.
    assert first["in_flight"], "the delivery had ended before close(): nothing was tested"
    assert first["close_seconds"] < 5.0
    assert "closed its ShuffleGroup" in second["after_stop"], second["after_stop"]
