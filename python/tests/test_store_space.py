"""The record store when space runs out or its process is killed: a store larger than its file
system fails with one line (at creation when told its size, and at the write that does not
fit: never SIGBUS), and a temporary store leaves nothing behind, SIGKILL included.

The space tests make a small tmpfs of their own in a private mount namespace (``unshare -m``,
as root) and skip, saying why, where that is not possible."""

from __future__ import annotations

import multiprocessing
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from ubershuffle.store import RecordStore

TMPFS_BYTES = 4 << 20


def in_small_tmpfs(script: str) -> subprocess.CompletedProcess:
    """Runs ``script`` (Python) in a new mount namespace whose ``/dev/shm`` is a tmpfs of
    ``TMPFS_BYTES`` (the machine's is untouched); skips when not root or ``unshare`` is missing."""
    if os.geteuid() != 0:
        pytest.skip("a tmpfs of the test's own needs root (mount in a private mount namespace)")
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is missing: no private mount namespace for a small tmpfs")
    shell = f'mount -t tmpfs -o size={TMPFS_BYTES} tmpfs /dev/shm && exec "{sys.executable}" -c "$0"'
    return subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", shell, textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )


def test_a_store_larger_than_its_file_system_fails_at_creation_in_one_line():
    done = in_small_tmpfs(
        f"""
        import numpy as np
        from ubershuffle.store import RecordStore
        offsets = np.arange(0, {4 * TMPFS_BYTES} + 1, 65536)
        try:
            RecordStore(offsets, "/dev/shm/kept", expect_bytes=int(offsets[-1]))
        except OSError as e:
            print(e)
        RecordStore(offsets, "/dev/shm/fits", expect_bytes=1 << 20).close()
        print("fits")
        """
    )
    assert done.returncode == 0, done.stderr
    message, fits = done.stdout.strip().splitlines()
    assert "/dev/shm/kept" in message and str(4 * TMPFS_BYTES) in message, message
    assert "bytes free" in message and "store_dir=" in message, message
    assert fits == "fits"


@pytest.mark.parametrize("directory", ["None", "'/dev/shm/kept'"])
def test_writing_past_the_space_is_an_error_not_sigbus(directory):
    done = in_small_tmpfs(
        f"""
        import numpy as np
        from ubershuffle.store import RecordStore
        size = 65536
        offsets = np.arange(0, {4 * TMPFS_BYTES} + 1, size)
        store = RecordStore(offsets, {directory})
        written = 0
        try:
            for i in range(len(offsets) - 1):
                store.put(i, bytes([i % 251 + 1]) * size)
                written += 1
        except OSError as e:
            print(written, e)
        assert all(store[i].tobytes() == bytes([i % 251 + 1]) * size for i in range(written))
        """
    )
    # SIGBUS would end the process with a negative code (a signal), not an exception.
    assert done.returncode == 0, f"return code {done.returncode}: {done.stderr}"
    written, message = done.stdout.strip().split(" ", 1)
    assert 0 < int(written) < TMPFS_BYTES // 65536, done.stdout
    assert "\n" not in message and "bytes free" in message and "store_dir=" in message, message


def _owner(ready, go) -> None:
    """Makes a temporary store, puts a record, hands the pickled store to the parent, waits."""
    import pickle

    store = RecordStore(np.array([0, 5, 12], dtype=np.int64))
    store.put(1, b"seven!!")
    ready.put((str(store.directory), pickle.dumps(store)))
    go.wait(30)
    store.put(0, b"five!")
    time.sleep(60)


def _read(blob: bytes, ids: list, out) -> None:
    import pickle

    store = pickle.loads(blob)
    out.put([store[i].tobytes() if i in store else None for i in ids])


@pytest.mark.skipif(not pathlib.Path("/proc/self/fd").is_dir(), reason="needs Linux's /proc")
def test_a_killed_owner_leaves_no_folder_and_a_spawned_reader_reads_while_it_lives():
    ctx = multiprocessing.get_context("spawn")
    ready, go, out = ctx.Queue(), ctx.Event(), ctx.Queue()
    owner = ctx.Process(target=_owner, args=(ready, go))
    owner.start()
    try:
        directory, blob = ready.get(timeout=60)
        assert not pathlib.Path(directory).exists(), "the folder is gone as soon as the files are mapped"
        reader = ctx.Process(target=_read, args=(blob, [0, 1], out))
        reader.start()
        assert out.get(timeout=60) == [None, b"seven!!"], "a spawned reader maps the owner's files"
        reader.join(30)
        go.set()
        deadline = time.monotonic() + 30
        while True:  # a record put later is seen by a new reader too
            reader = ctx.Process(target=_read, args=(blob, [0], out))
            reader.start()
            got = out.get(timeout=60)
            reader.join(30)
            if got == [b"five!"] or time.monotonic() > deadline:
                break
        assert got == [b"five!"]
    finally:
        os.kill(owner.pid, signal.SIGKILL)
        owner.join(30)
    assert owner.exitcode == -signal.SIGKILL
    assert not pathlib.Path(directory).exists(), "nothing is left after SIGKILL"
    reader = ctx.Process(target=_read, args=(blob, [1], out))
    reader.start()
    reader.join(60)
    assert reader.exitcode != 0, "the owner is gone: its store cannot be opened"


def test_a_folder_whose_owner_is_gone_is_removed_by_the_next_temporary_store():
    import ubershuffle.store as store_module

    base = pathlib.Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else None
    if base is None or not pathlib.Path("/proc/self/stat").exists():
        pytest.skip("needs a writable /dev/shm and /proc")
    # A folder left by a process that ended (its pid taken by no process, or by another one:
    # the start time differs), and one of a live process.
    dead = base / f"ubershuffle-store-test-dead-{os.getpid()}"
    live = base / f"ubershuffle-store-test-live-{os.getpid()}"
    for folder in (dead, live):
        folder.mkdir()
        (folder / "records.bin").write_bytes(b"x")
    (dead / "owner").write_text(f"{os.getpid()} 1")
    (live / "owner").write_text(f"{os.getpid()} {store_module._start_time(os.getpid())}")
    try:
        RecordStore(np.array([0, 1], dtype=np.int64)).close()
        assert not dead.exists(), "an orphaned temporary store is removed"
        assert live.exists(), "a live process's store is kept"
    finally:
        shutil.rmtree(dead, ignore_errors=True)
        shutil.rmtree(live, ignore_errors=True)
