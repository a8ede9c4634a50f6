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
    shell = (
        f"mount -t tmpfs -o size={TMPFS_BYTES} tmpfs /dev/shm && "
        f'exec "{sys.executable}" -c "$0"'
    )
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
