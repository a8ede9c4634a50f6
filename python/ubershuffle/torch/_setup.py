"""A ShuffleGroup's start: its process groups, its device, its liveness watch, and the checks
that every rank was given the same settings and the same data set before anything moves."""

from __future__ import annotations

import datetime
import hashlib
import os
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from ._link import Link
from ._watch import NO_WAIT_LIMIT, Watch

CONTENT_SAMPLE = 256
"""Records whose bytes every rank with a source hashes at start, chosen by the seed."""


def device_of(backend: str) -> torch.device:
    """Where the plane's buffers live: the rank's GPU for NCCL (torchrun's ``LOCAL_RANK``, else
    the current device), the CPU otherwise."""
    if backend != "nccl":
        return torch.device("cpu")
    local = os.environ.get("LOCAL_RANK")
    return torch.device("cuda", int(local) if local is not None else torch.cuda.current_device())


def new_group(ranks: list, backend: str | None, timeout: float | None) -> dist.ProcessGroup:
    """A process group over ``ranks`` (global ranks) made by those ranks only; ``timeout``:
    seconds its set-up may take (the plane's waits then pass their own limit; NCCL's watchdog
    gets none to speak of, :data:`NO_WAIT_LIMIT`)."""
    if timeout is None:
        return dist.new_group(ranks, backend=backend, use_local_synchronization=True)
    start = datetime.timedelta(seconds=timeout + 60)
    group = dist.new_group(
        ranks,
        backend=backend,
        timeout=NO_WAIT_LIMIT if backend == "nccl" else start,
        use_local_synchronization=True,
    )
    return group


def link_over(plane: dist.ProcessGroup, ranks: list, rank: int, timeout: float, device: torch.device) -> Link:
    """The link of this rank over ``plane``, with its liveness watch on the job's key-value
    store (keys of this plane and of this attempt of a torchrun job)."""
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    name = dist.distributed_c10d._get_process_group_name(plane)
    store = dist.distributed_c10d._get_default_store()
    watch = Watch(store, f"ubershuffle/attempt-{attempt}/plane-{name}", len(ranks), rank, timeout)
    return Link(plane, ranks, rank, watch, device)


def _digest(value: Any) -> int:
    text = repr(value).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little") & (2**63 - 1)


def check_settings(link: Link, settings: dict) -> None:
    """Every rank's ``settings`` (name to value) compared with every other's; the first that
    differs is a one-line ``ValueError`` naming it, on every rank, before anything moves."""
    names = list(settings)
    mine = np.asarray([_digest(settings[n]) for n in names], dtype=np.int64)
    theirs = link.all_to_all({p: mine for p in range(len(link.ranks))}, "the group's settings")
    for p in sorted(theirs):
        other = theirs[p]
        if len(other) != len(mine):
            raise ValueError(f"rank {p} runs another version of ubershuffle than rank {link.rank}")
        for name, a, b in zip(names, mine, other):
            if a != b:
                raise ValueError(
                    f"rank {p}'s {name} differs from rank {link.rank}'s ({name}={settings[name]!r} here): "
                    "every rank of a ShuffleGroup must pass the same settings"
                )


def content_digest(source: Any, offsets: np.ndarray, seed: int) -> int:
    """A 63-bit digest of :data:`CONTENT_SAMPLE` records' bytes, chosen by ``seed`` (the same
    records on every rank); 0 without a source."""
    if source is None:
        return 0
    records = len(offsets) - 1
    rng = np.random.default_rng([int(seed) & (2**63 - 1), 0x5EED])
    ids = np.sort(rng.choice(records, size=min(CONTENT_SAMPLE, records), replace=False))
    h = hashlib.blake2b(digest_size=8)
    for i, record in source.read(ids):  # an object store's by several requests at once
        h.update(int(i).to_bytes(8, "little"))
        h.update(np.ascontiguousarray(record).tobytes())
    return (int.from_bytes(h.digest(), "little") & (2**63 - 1)) or 1


def check_contents(link: Link, source: Any, offsets: np.ndarray, seed: int) -> None:
    """The bytes of a sample of records compared between every two ranks that read the source:
    a rank whose data set differs in content (same sizes or not) is told, on every rank. With
    one reader (the store of store mode) there is nothing to compare, and nothing is read: the
    store then reads each record from its source at most once, when a delivery first needs it."""
    readers = link.all_to_all(
        {p: np.asarray([source is not None], dtype=np.int64) for p in range(len(link.ranks))},
        "who reads the source",
    )
    if sum(int(v[0]) for v in readers.values()) + (source is not None) < 2:
        return
    mine = np.asarray([content_digest(source, offsets, seed)], dtype=np.int64)
    theirs = link.all_to_all({p: mine for p in range(len(link.ranks))}, "a sample of the records' bytes")
    for p in sorted(theirs):
        other = int(theirs[p][0])
        if other and int(mine[0]) and other != int(mine[0]):
            raise ValueError(
                f"rank {p}'s records differ in content from rank {link.rank}'s (a sample of "
                f"{CONTENT_SAMPLE} records chosen by the seed): every rank must read the same data set"
            )
