"""``Exchange``: the records of a training job delivered each epoch by a store outside the job,
without torch. The store (``ubershuffle serve`` in a process of its own, or
:meth:`Exchange.host` on a background thread of any process) holds the data set and is the
data plane's engine in store mode, the one :class:`ubershuffle.torch.ShuffleGroup` runs: each
epoch it plans a coded delivery of what every training rank lacks and sends each packet only to
the ranks that decode it (whole to one, in pieces relayed among several), on sealed
connections of the plane's own. A training rank (:meth:`Exchange.connect`) keeps its records in
a :class:`ubershuffle.RecordStore` (its cache, in shared memory or in ``store_dir``) and its
sampler (:attr:`Exchange.sampler`, the store's chain), and receives the next epoch while it
trains on this one.

The ranks meet at the store's address with the job's token (``token=``, or
``UBERSHUFFLE_TOKEN_FILE`` / ``UBERSHUFFLE_TOKEN``): a rank without it is refused with one line
and served nothing. A job's attempt is its ranks together: when one fails (killed, frozen past
``timeout``), the others raise the engine's error naming it, and the store waits for the next
attempt, as torchrun restarts every rank of a job. A restarted rank that kept its ``store_dir``
is sent only what it lacks, and the store reads each record from the source once per job.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _native
from ._net import listen_host, token_key
from .sampler import CodedShuffleSampler
from .sources import as_source
from .store import RecordStore, store_bytes_bound

TOKEN_VAR = "UBERSHUFFLE_TOKEN"
LINK_MARGIN = 60.0
"""Seconds beyond ``timeout`` the ranks of an attempt have to link up."""

ExchangeClosed = _native.ShuffleError
"""What the exchange raises when it ends other than by finishing: the engine's errors
(``ShuffleTimeout``, ``PeerFailed``, ``PeerClosed``, ``ShuffleClosed``), one line each, naming
the rank at fault."""


class ExchangeFinished(RuntimeError):
    """The store's last epoch was delivered: there is no next one."""


def _key(token: str | None) -> bytes:
    key = token_key(token)
    if key is None:
        raise ValueError(
            f"no token: pass token= or set {TOKEN_VAR} or UBERSHUFFLE_TOKEN_FILE (the job's shared secret)"
        )
    return key


@dataclass(frozen=True)
class EpochFigures:
    """What one epoch cost this rank: payload bytes received (its part from the store and the
    pieces relayed to it), the plan's packets it needed (``coded_packets`` XORs of several
    records' pieces, ``uncoded_packets`` single pieces), the bytes of those packets beyond their
    records' data (``padding_bytes``: records of uneven size travel in fixed-size segments),
    the records new to it, seconds from asking to having the epoch (``receive_seconds``) and
    decoding, and how long :meth:`Exchange.next_epoch` waited (``wait_seconds``: near 0 when
    the epoch arrived while the rank trained on the one before)."""

    bytes_received: int
    packets: int
    coded_packets: int
    uncoded_packets: int
    padding_bytes: int
    new_records: int
    receive_seconds: float
    decode_seconds: float
    wait_seconds: float


@dataclass(frozen=True)
class EpochBatch:
    """One epoch's batch at this rank: ``ids`` (sorted), the ``new_ids`` among them that this
    rank did not cache the epoch before, the ``cache`` it keeps for the next epoch (the batch
    included), and the epoch's ``figures``. :attr:`records` are the batch's bytes from the
    store; :meth:`record` is a zero-copy view of one (``store[i]`` of any id of the batch, as
    well)."""

    epoch: int
    ids: np.ndarray
    new_ids: np.ndarray
    cache: np.ndarray
    figures: EpochFigures
    store: RecordStore

    @property
    def records(self) -> np.ndarray | list[np.ndarray]:
        """The batch's records: for a data set of one record size a ``(len(ids),
        record_size)`` uint8 array (a view when the ids are consecutive, else a copy),
        otherwise a list of zero-copy views (:meth:`RecordStore.records`)."""
        return self.store.records(self.ids)

    def record(self, k: int) -> np.ndarray:
        """A read-only view of the record of the ``k``-th id."""
        return self.store[int(self.ids[k])]

    def __len__(self) -> int:
        return len(self.ids)


class _Opened:
    """A training rank's sampler and record store, made on the engine's hooks thread once the
    store's index comes."""

    def __init__(self, about: dict, place: int, directory: str | os.PathLike | None) -> None:
        self.about, self.place, self.directory = about, place, directory
        self.sampler: CodedShuffleSampler | None = None
        self.store: RecordStore | None = None

    def open(self, offsets: np.ndarray) -> Any:
        trainers = int(self.about["trainers"])
        self.sampler = CodedShuffleSampler(
            len(offsets) - 1, num_replicas=trainers, rank=self.place, **self.about["chain"]
        )
        target = self.sampler._core.targets()[self.place]
        batch = -(-(len(offsets) - 1) // trainers)
        bound = store_bytes_bound(offsets, target, batch, 1.0)
        self.store = RecordStore(offsets, self.directory, expect_bytes=bound)
        return self.store._core

    def state(self) -> bytes:
        assert self.sampler is not None
        return json.dumps({"epoch": self.sampler.epoch}).encode()


class Exchange:
    """One training rank of a job served by a store outside it. Build it with
    :meth:`connect`; then each :meth:`next_epoch` (or iterating the exchange) returns the next
    :class:`EpochBatch`, epochs ``epoch``, ``epoch + 1``, ... up to the store's last, its
    records in :attr:`store`.

    :meth:`next_epoch` hands over an epoch and lets the store deliver the next one while the
    rank trains on it. Taking an epoch drops from the store the records the rank no longer
    keeps (the new batch stays): records of the epoch before are not to be read once
    :meth:`next_epoch` is called (a DataLoader iterates one epoch at a time).
    """

    def __init__(self, core: Any, opened: _Opened, about: dict, place: int, epoch: int) -> None:
        self._core = core
        assert opened.sampler is not None and opened.store is not None
        self.sampler: CodedShuffleSampler = opened.sampler
        """This rank's sampler, on the store's chain (``set_epoch`` is :meth:`next_epoch`'s)."""
        self.store: RecordStore = opened.store
        """The rank's :class:`ubershuffle.RecordStore`: ``store[i]`` is record ``i``'s bytes
        (a read-only view) while the rank holds it, in this process and in DataLoader worker
        processes (forked or spawned, persistent or not)."""
        self.rank: int = place
        """This rank's place among the training ranks (the sampler's ``rank``)."""
        self.world: int = int(about["trainers"])
        """Training ranks of the job (the sampler's ``num_replicas``)."""
        self.epochs: int = int(about["epochs"])
        """The store's last epoch."""
        self.cache_capacity: int = len(self.sampler._core.targets()[place])
        """Records this rank caches."""
        self._next = int(epoch)
        self._cache: np.ndarray | None = None

    @classmethod
    def connect(
        cls,
        address: str,
        *,
        rank: int | None = None,
        world: int | None = None,
        token: str | None = None,
        store_dir: str | os.PathLike | None = None,
        join_timeout: float = 60.0,
        epoch: int = 0,
    ) -> Exchange:
        """Joins the store at ``address`` (``HOST:PORT``) with the job's ``token`` (default:
        ``$UBERSHUFFLE_TOKEN_FILE`` or ``$UBERSHUFFLE_TOKEN``) as training rank ``rank`` of
        ``world`` (torch's ``RANK`` and ``WORLD_SIZE`` under torchrun; ``None``: the store's
        first free place, of as many as it serves), waits (without the GIL, at most
        ``join_timeout`` seconds) for the job's other ranks, links up with them and returns the
        exchange, whose first :meth:`next_epoch` is ``epoch`` (a restarted job's, from its
        saved state). The records live in shared memory, or in ``store_dir``, kept across
        restarts: records held there already are not sent again."""
        key = _key(token)
        listener = _native.PlaneListener(listen_host())
        plane_rank, addresses, job, about_bytes = _native.join_store(
            listener, str(address), key, rank, world, float(join_timeout)
        )
        about = json.loads(bytes(about_bytes).decode())
        place = plane_rank
        directory = None if store_dir is None else os.path.join(os.fspath(store_dir), f"rank-{place}")
        opened = _Opened(about, place, directory)
        timeout = float(about["timeout"])
        core = _native.PlaneCore(
            listener,
            plane_rank,
            addresses,
            key,
            job,
            timeout + LINK_MARGIN,
            timeout,
            [tuple(s) for s in about["settings"]],
            None,
            open_store=opened.open,
            state=opened.state,
            store_rank=len(addresses) - 1,
            chunk_bytes=int(about["chunk_bytes"]),
            segment_bytes=int(about["segment_bytes"]),
            round_bytes=int(about["round_bytes"]),
            yield_to_gradients=False,
            plane="Exchange",
        )
        try:
            core.wait_agreed()
        except BaseException:
            core.close()
            raise
        return cls(core, opened, about, place, epoch)

    def next_epoch(self) -> EpochBatch:
        """Waits (without the GIL, as long as the store and the ranks it waits on are alive)
        for the next epoch's records and returns its batch. Raises :class:`ExchangeFinished`
        after the store's last epoch, and the engine's one-line error (an
        :data:`ExchangeClosed`) when a rank or the store failed or :meth:`close` was called
        (from any thread)."""
        epoch = self._next
        if epoch > self.epochs:
            raise ExchangeFinished(f"the store's last epoch is {self.epochs}")
        before = self.store.held() if self._cache is None else self._cache
        self.sampler.set_epoch(epoch)
        started = time.perf_counter()
        f = self._core.set_epoch(self.sampler._core)
        waited = time.perf_counter() - started
        self._next = epoch + 1
        ids = np.sort(np.asarray(self.sampler.batch(), dtype=np.int64))
        cache = np.asarray(self.sampler._core.targets()[self.rank], dtype=np.int64)
        self._cache = cache
        figures = EpochFigures(
            bytes_received=int(f.get("bytes_received", 0)),
            packets=int(f.get("packets", 0)),
            coded_packets=int(f.get("coded_packets", 0)),
            uncoded_packets=int(f.get("packets", 0)) - int(f.get("coded_packets", 0)),
            padding_bytes=int(f.get("padding_bytes", 0)),
            new_records=int(f.get("records_received", 0)),
            receive_seconds=float(f.get("transfer_seconds", 0.0)),
            decode_seconds=float(f.get("decode_seconds", 0.0)),
            wait_seconds=waited,
        )
        new_ids = np.setdiff1d(ids, before, assume_unique=True)
        return EpochBatch(epoch, ids, new_ids, cache, figures, self.store)

    def __iter__(self) -> Exchange:
        return self

    def __next__(self) -> EpochBatch:
        try:
            return self.next_epoch()
        except ExchangeFinished:
            raise StopIteration from None

    def close(self) -> None:
        """Leaves the job (the store and the other ranks see this rank close); safe from any
        thread, also while another waits in :meth:`next_epoch` (which then raises
        ``ShuffleClosed``). A store kept in ``store_dir`` is flushed; a temporary one stays
        readable until the exchange is garbage collected."""
        self._core.close()
        if not self.store.temporary:
            self.store.flush()

    def __enter__(self) -> Exchange:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def host(
        records: Any,
        *,
        workers: int,
        epochs: int,
        alpha: float | None = None,
        extra_cache: float | None = None,
        policy: str = "global",
        fraction: float | None = None,
        scheme: str = "auto",
        seed: int = 0,
        listen: str = "127.0.0.1:0",
        token: str | None = None,
        timeout: float = 10.0,
        join_timeout: float | None = 60.0,
        store_dir: str | os.PathLike | None = None,
        segment_bytes: int | None = None,
        round_bytes: int = 16 << 20,
        link_gbps: float = 10.0,
    ) -> Host:
        """Serves ``records`` (anything :func:`ubershuffle.sources.as_source` takes: a 2-D uint8
        array, a folder, a list of paths, a sequence of bytes-like objects, a blob with its
        offsets, an ``s3://`` prefix, a list of ``s3://`` URLs) to ``workers`` training ranks on
        a background thread of this process (``ubershuffle serve`` in-process), epochs ``0`` to
        ``epochs``; returns the :class:`Host`, whose ``address`` the ranks join at. The store
        reads a record from the source when a delivery first sends it and keeps it (in
        ``store_dir`` across restarts of the host).

        The chain (``extra_cache`` or the papers' ``alpha``, one of them; ``policy``,
        ``fraction``, ``scheme``, ``seed``) is :class:`ubershuffle.CodedShuffleSampler`'s; the
        ranks' samplers (:attr:`Exchange.sampler`) take it from the store. ``timeout`` is how
        long a silent rank may be waited on; ``join_timeout`` how long the store waits for an
        attempt's ranks (``None``: for ever); ``segment_bytes``, ``round_bytes`` and
        ``link_gbps`` shape the coded delivery as :class:`ubershuffle.torch.ShuffleGroup`'s do.

        Raises ``ValueError`` (``TypeError`` for records of no kind it takes) at once, before
        anything listens, for settings that do not fit the records (a cache smaller than a
        batch, more workers than records) or an unknown scheme; what goes wrong while serving
        is raised by :meth:`Host.join`."""
        if alpha is None and extra_cache is None:
            raise ValueError(
                "pass extra_cache= (or the papers' alpha=): what each rank caches besides its batch"
            )
        if not (isinstance(epochs, int) and epochs >= 0):
            raise ValueError(f"epochs must be a non-negative int, got {epochs!r}")
        if not (isinstance(workers, int) and workers >= 1):
            raise ValueError(f"workers must be a positive int, got {workers!r}")
        key = _key(token)
        source = as_source(records)
        chain = dict(
            seed=int(seed),
            policy=policy,
            fraction=fraction,
            alpha=alpha,
            extra_cache=extra_cache,
            scheme=scheme,
        )
        # Checks the chain against the records (a one-line ValueError), and restores it.
        sampler = CodedShuffleSampler(len(source), num_replicas=int(workers), rank=0, **chain)
        chunk_bytes = min(1 << 20, int(round_bytes))
        about = {
            "trainers": int(workers),
            "epochs": int(epochs),
            "chain": chain,
            "timeout": float(timeout),
            "chunk_bytes": chunk_bytes,
            "segment_bytes": int(segment_bytes or 0),
            "round_bytes": int(round_bytes),
        }
        about_bytes = json.dumps(about, sort_keys=True).encode()
        settings = [("exchange", hashlib.blake2b(about_bytes, digest_size=8).hexdigest())]
        about["settings"] = settings
        about_bytes = json.dumps(about, sort_keys=True).encode()
        store = RecordStore(source.offsets, store_dir)
        hooks: dict = {"restore": functools.partial(_restore, sampler)}
        reader = source._reader()
        if reader is not None:
            hooks["reader"] = reader
        else:
            hooks["load"] = functools.partial(source.load, store)
        try:
            core = _native.OutsideStore(
                store._core,
                str(listen),
                key,
                int(workers),
                settings,
                about_bytes,
                epochs=int(epochs) + 1,
                timeout=float(timeout),
                join_timeout=None if join_timeout is None else float(join_timeout),
                link_timeout=float(timeout) + LINK_MARGIN,
                chunk_bytes=chunk_bytes,
                segment_bytes=int(segment_bytes or 0),
                round_bytes=int(round_bytes),
                link_rate=float(link_gbps) * 1e9 / 8,
                **hooks,
            )
        except BaseException:
            store.close()
            raise
        return Host(core, store)


def _restore(sampler: CodedShuffleSampler, state: bytes, epoch: int) -> Any:
    """The store's chain at ``epoch`` (its own settings: a rank on another chain is named at
    its first stream)."""
    del state
    sampler.set_epoch(int(epoch))
    return sampler._core


class Host:
    """A store outside the job serving on a background thread (:meth:`Exchange.host`)."""

    def __init__(self, core: Any, store: RecordStore) -> None:
        self._core = core
        self._store = store
        self.address: str = core.address
        """``HOST:PORT`` the ranks join at."""

    @property
    def running(self) -> bool:
        """Whether the store still serves."""
        return bool(self._core.running())

    def attempts(self) -> list[dict]:
        """Every attempt of the job so far: its number, how it ended (``"finished"``,
        ``"closed"`` before the last epoch, or ``"failed"``), its ``error``, and the store's
        figures of every epoch it served in it (``bytes_sent``, ``packets``, ``made_by``,
        ...)."""
        return list(self._core.attempts())

    def epochs(self) -> list[dict]:
        """The store's figures of every epoch it served, attempt after attempt."""
        return [e for a in self.attempts() for e in a["epochs"]]

    def join(self, timeout: float | None = None) -> list[dict]:
        """Waits for the store to finish (``TimeoutError`` past ``timeout`` seconds) and returns
        :meth:`epochs`; raises ``RuntimeError`` with the store's error."""
        outcome = self._core.join(timeout)
        if outcome is None:
            raise TimeoutError(f"the store is still serving after {timeout} s")
        ok, error = outcome
        if not ok:
            raise RuntimeError(error)
        return self.epochs()

    def stop(self) -> None:
        """Meets no further attempt (one under way runs to its end)."""
        self._core.stop()
