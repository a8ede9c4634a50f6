"""Store mode on data larger than memory, under torchrun with 4 gloo ranks: the store reads
the source lazily (only what each delivery needs; with ``store_dir`` a restarted store reads
only what it lacks), and on a /dev/shm 4x smaller than the data set the job runs with
``store_dir`` or, without it, fails at start with the one-line error, no process killed by a
signal. Skipped when torch is not installed; the small /dev/shm needs root and ``unshare``."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="torch is not installed: the ShuffleGroup tests need it")

from ubershuffle.sources import as_source  # noqa: E402
from ubershuffle.store import RecordStore  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import launch_ranks  # noqa: E402
import torch_plane_rank  # noqa: E402
from test_torch_plane import RANK_SCRIPT, check_served, run_job  # noqa: E402

LAUNCHER = pathlib.Path(launch_ranks.__file__)

SCALE = 16
"""Records SCALE times the other torch tests' (400 of them): a data set of a few MB."""
BIG = torch_plane_rank.records(400, 1, SCALE)
TOTAL = sum(len(r) for r in BIG)


SIZES = [len(r) for r in BIG]


def held_in(folder: pathlib.Path) -> list:
    """The records a store folder holds."""
    store = RecordStore(as_source(BIG).offsets, folder)
    try:
        return [int(i) for i in store.held()]
    finally:
        store.close()


def test_the_store_reads_lazily_and_a_restarted_store_reads_only_what_it_lacks(tmp_path):
    store_dir = tmp_path / "stores"
    common = ["mode=store", "alpha=0.4", f"scale={SCALE}", "save_each=1", "resume=1"]
    common.append(f"store_dir={store_dir}")
    first = run_job(tmp_path / "run", 4, *common, "epochs=2")
    check_served(first[1:], range(2), 3)
    read_first = held_in(store_dir / "rank-0")
    after_first = len(read_first)
    store = first[0]
    assert store["held_at_start"] == 0
    assert after_first > 0
    assert sum(f["source_records"] for f in store["served"]) == after_first, "each record read once"
    assert sum(f["source_bytes"] for f in store["served"]) == sum(SIZES[i] for i in read_first)
    # The store rank starts again (a restart: the same store_dir) and resumes at epoch 2.
    second = run_job(tmp_path / "run", 4, *common, "epochs=4")
    check_served(second[1:], range(2, 4), 3)
    store = second[0]
    assert store["held_at_start"] == after_first, "the store kept what it read"
    read_second = sorted(set(held_in(store_dir / "rank-0")) - set(read_first))
    reads = sum(f["source_records"] for f in store["served"])
    assert reads == len(read_second), "only records it did not hold"
    assert sum(f["source_bytes"] for f in store["served"]) == sum(SIZES[i] for i in read_second)


def in_small_shm(out: pathlib.Path, *options: str) -> tuple:
    """Runs the rank script as 4 ranks (store mode) in a mount namespace whose /dev/shm is a
    tmpfs a quarter of the data set's size, with no agent that would stop a rank when another
    ends (:mod:`launch_ranks`); returns (every rank's return code, their output, logs by
    rank)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("a small /dev/shm of the test's own needs root and unshare (a private mount namespace)")
    shm = TOTAL // 4 // 4096 * 4096
    args = [str(RANK_SCRIPT), "mode=store", "alpha=0.4", f"scale={SCALE}", *options]
    launcher = [sys.executable, str(LAUNCHER), str(out), "4", *args]
    shell = f'mount -t tmpfs -o size={shm} tmpfs /dev/shm && exec "$@"'
    done = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", shell, "sh", *launcher],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    codes = json.loads((out / "exits.json").read_text())
    logs = {int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in out.glob("rank-*.json")}
    return codes, launch_ranks.output_of(out, 4), logs


def test_a_data_set_4x_larger_than_dev_shm_runs_with_store_dir(tmp_path):
    codes, output, logs = in_small_shm(tmp_path / "run", "epochs=2", f"store_dir={tmp_path / 'stores'}")
    assert codes == [0, 0, 0, 0], output[-3000:]
    check_served([logs[r] for r in (1, 2, 3)], range(2), 3)


def test_without_store_dir_it_fails_at_start_in_one_line_and_no_process_is_killed(tmp_path):
    codes, output, logs = in_small_shm(tmp_path / "run", "epochs=2")
    # Every rank ended by itself, with the error's exit status: none by a signal (SIGBUS), none
    # left waiting on another.
    assert codes == [1, 1, 1, 1], (codes, output[-3000:])
    assert sorted(logs) == [0, 1, 2, 3], "every rank failed on its own, with the error"
    message = logs[0]["error"]
    assert "\n" not in message and "store_dir=" in message and "bytes free" in message, message
    assert str(TOTAL) in message, f"the store names the data set's size: {message}"
    for rank, log in logs.items():
        assert "store_dir=" in log["error"], f"rank {rank}: {log}"
