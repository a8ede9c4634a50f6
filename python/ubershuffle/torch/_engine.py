"""A ShuffleGroup's start: the ranks meet through the job's key-value store (each publishes
the address its engine listens on, and they share a key: :mod:`._rendezvous`), link up over
sealed connections of their own, and agree on the settings and the data set before anything
moves (the engine does it: ``ubershuffle._native.PlaneCore``). Also what the engine asks of
the Python side: reading the source, the digest of a sample of the records' bytes, the record
store of a training rank that learns the index from the store, the sampler's state, and the
store's chain restored from it."""

from __future__ import annotations

import collections
import hashlib
import os
from typing import Any

import numpy as np
import torch.distributed as dist

from .. import _native
from ._rendezvous import listen_host, meet

CONTENT_SAMPLE = 256
"""Records whose bytes every rank with a source hashes at start, chosen by the seed (only
when two ranks or more read a source)."""
MEET_MARGIN = 60.0
"""Seconds beyond ``timeout`` the ranks have to meet and link up."""

_planes_made: collections.Counter = collections.Counter()
"""Planes this process made, by the global ranks of their group: every rank of a group makes
its planes in the same order, so the count names a plane the same on every rank."""


def plane_prefix(ranks: list) -> str:
    """The job's key-value store's prefix of the next plane over ``ranks`` (global ranks), new
    at every attempt of a torchrun job."""
    which = hashlib.blake2b(repr(list(ranks)).encode(), digest_size=6).hexdigest()
    n = _planes_made[which]
    _planes_made[which] += 1
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return f"ubershuffle/attempt-{attempt}/plane-{which}-{n}"


def content_digest(source: Any, offsets: np.ndarray, seed: int) -> int:
    """A 63-bit digest of :data:`CONTENT_SAMPLE` records' bytes, chosen by ``seed`` (the same
    records on every rank); for a sharded source in object storage, the digest of its listing
    (the shards' URLs, sizes and ETags) and index, so that no rank reads records to agree."""
    known = source._fingerprint()
    if known is not None:
        return known
    records = len(offsets) - 1
    rng = np.random.default_rng([int(seed) & (2**63 - 1), 0x5EED])
    ids = np.sort(rng.choice(records, size=min(CONTENT_SAMPLE, records), replace=False))
    h = hashlib.blake2b(digest_size=8)
    for i, record in source.read(ids):  # an object store's by several requests at once
        h.update(int(i).to_bytes(8, "little"))
        h.update(np.ascontiguousarray(record).tobytes())
    return (int.from_bytes(h.digest(), "little") & (2**63 - 1)) or 1


def start_plane(ranks: list, rank: int, timeout: float, settings: dict, store: Any, **hooks: Any) -> Any:
    """This rank's engine over the plane's ranks ``ranks`` (global ranks, by plane rank):
    met, linked and agreed (the first difference raises on every rank). ``store`` is this
    rank's ``StoreCore`` (``None`` until the store's index comes, store mode); ``hooks`` are
    ``PlaneCore``'s keyword arguments (the callables it calls back, and the store mode's)."""
    listener = _native.PlaneListener(listen_host())
    prefix = plane_prefix(ranks)
    job_store = dist.distributed_c10d._get_default_store()
    deadline = timeout + MEET_MARGIN
    addresses, key = meet(job_store, prefix, rank, len(ranks), listener.address, deadline)
    return _native.PlaneCore(
        listener,
        rank,
        addresses,
        key,
        prefix,
        deadline,
        timeout,
        [(name, repr(value)) for name, value in settings.items()],
        store,
        **hooks,
    )
