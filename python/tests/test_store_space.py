"""The record store when space runs out or its process is killed: a store larger than its file
system fails with one line (at creation when told its size, and at the write that does not
fit: never SIGBUS), and a temporary store leaves nothing behind, SIGKILL included.

The space tests make a small tmpfs of their own in a private mount namespace (``unshare -m``,
as root) and skip, saying why, where that is not possible."""

from __future__ import annotations

import json
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
RECORD = 65536
"""The bytes of a record of the space tests (16 pages); the stores hold 4 times the tmpfs."""

HINTS = {
    True: "store_dir= keeps the store on disk instead of in shared memory",
    False: "give store_dir= a folder on a file system with room",
}
"""What the one-line error says to do: for a temporary store, and for one in a folder."""


def no_space(folder: str, wanted: int, free: int, temporary: bool) -> str:
    """The one line of a store whose file system cannot hold ``wanted`` more bytes."""
    fit = f"{wanted} bytes of records do not fit: its file system has {free} bytes free"
    return f"{folder}: {fit}; {HINTS[temporary]}"


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
    """The line names the folder, the bytes wanted, the file system's free space as statvfs
    gives it, and what to do; a store that fits is made."""
    done = in_small_tmpfs(
        f"""
        import json, os
        import numpy as np
        from ubershuffle.store import RecordStore
        offsets = np.arange(0, {4 * TMPFS_BYTES} + 1, {RECORD})
        try:
            RecordStore(offsets, "/dev/shm/kept", expect_bytes=int(offsets[-1]))
        except OSError as e:
            st = os.statvfs("/dev/shm")
            print(json.dumps({{"error": str(e), "free": st.f_bavail * st.f_frsize}}))
        RecordStore(offsets, "/dev/shm/fits", expect_bytes=1 << 20).close()
        print(json.dumps("fits"))
        """
    )
    assert done.returncode == 0, done.stderr
    failed, fits = map(json.loads, done.stdout.strip().splitlines())
    assert 0 < failed["free"] <= TMPFS_BYTES, failed
    assert failed["error"] == no_space("/dev/shm/kept", 4 * TMPFS_BYTES, failed["free"], temporary=False)
    assert fits == "fits"


@pytest.mark.parametrize("directory", [None, "/dev/shm/kept"])
def test_writing_past_the_space_is_an_error_not_sigbus(directory):
    """Records are written until the first that does not fit (as many as the free space at the
    start holds, whole), which is a one-line OSError naming the free space then; what was
    written reads back."""
    done = in_small_tmpfs(
        f"""
        import json, os
        import numpy as np
        from ubershuffle.store import RecordStore
        def free():
            st = os.statvfs("/dev/shm")
            return st.f_bavail * st.f_frsize
        offsets = np.arange(0, {4 * TMPFS_BYTES} + 1, {RECORD})
        store = RecordStore(offsets, {directory!r})
        at_start, written = free(), 0
        try:
            for i in range(len(offsets) - 1):
                store.put(i, bytes([i % 251 + 1]) * {RECORD})
                written += 1
        except OSError as e:
            print(json.dumps({{"at_start": at_start, "written": written, "error": str(e), "free": free(),
                               "folder": str(store.directory)}}))
        assert all(store[i].tobytes() == bytes([i % 251 + 1]) * {RECORD} for i in range(written))
        """
    )
    # SIGBUS would end the process with a negative code (a signal), not an exception.
    assert done.returncode == 0, f"return code {done.returncode}: {done.stderr}"
    out = json.loads(done.stdout)
    assert out["written"] == out["at_start"] // RECORD and out["free"] < RECORD, out
    wanted = no_space(out["folder"], RECORD, out["free"], temporary=directory is None)
    assert out["error"] == wanted


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
    """Unpickles the store in ``blob`` and puts the records ``ids`` (``None`` for one not
    held), or the ``OSError`` that opening it raised, as text."""
    import pickle

    try:
        store = pickle.loads(blob)
    except OSError as e:
        out.put(f"OSError: {e}")
        return
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
    gone = out.get(timeout=60)
    reader.join(60)
    assert gone.startswith(
        f"OSError: the temporary store of process {owner.pid} cannot be opened (has it ended?): "
    )


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
