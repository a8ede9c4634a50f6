"""``Exchange``: the coded data plane of a training job. Each rank keeps a local record store
(its cache of fixed-size records) and, each epoch, receives exactly the records of its new
batch that it lacks, by the coded delivery the master plans (the runtime's epoch loop over the
workspace's TCP transport), each checked against the master's checksum.

The master holds the whole data set: ``ubershuffle serve --records FILE --record-size B ...``
in a process of its own, or :meth:`Exchange.host` on a background thread of any process (rank
0, say). Its chain (``workers``, ``alpha``, ``policy``, ``fraction``, ``seed``) is the one of
:class:`ubershuffle.CodedShuffleSampler` for the same values, so the sampler of rank
``exchange.rank`` serves exactly the indices of each delivered batch.
"""

from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _native

TOKEN_VAR = "UBERSHUFFLE_TOKEN"


class RankLost(RuntimeError):
    """Another rank left the exchange (killed, or slower than the timeout): ``ranks`` names
    them. The master goes on without them (and takes a restarted process back at an epoch
    boundary); the batches after a loss are those of the remaining ranks."""

    def __init__(self, ranks: list[int]) -> None:
        self.ranks = list(ranks)
        names = ", ".join(str(r) for r in self.ranks)
        super().__init__(f"rank {names} left the exchange: the master goes on without it")


class ExchangeClosed(RuntimeError):
    """The exchange has ended: the connection failed (the message says why), or it was
    closed."""


class ExchangeFinished(ExchangeClosed):
    """The master delivered its last epoch and said stop."""


def _token(token: str | None) -> str:
    token = os.environ.get(TOKEN_VAR) if token is None else token
    if not token:
        raise ValueError(f"no token: pass token= or set {TOKEN_VAR} (the cluster's shared secret)")
    return token


class RecordStore:
    """A rank's records, row ``i`` holding record ``i``: a ``(points, record_size)`` uint8
    array, in memory, or with ``directory`` a memory-mapped file there (sparse: only the rows
    received take space, so the data set may exceed memory), kept across restarts with the
    mask of the rows it holds."""

    def __init__(self, points: int, record_size: int, directory: str | os.PathLike | None = None) -> None:
        self.points, self.record_size = int(points), int(record_size)
        self.directory = None if directory is None else pathlib.Path(directory)
        if self.directory is None:
            self.array = np.zeros((self.points, self.record_size), dtype=np.uint8)
            self.present = np.zeros(self.points, dtype=np.bool_)
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        self.array = self._mapped("records.u8", (self.points, self.record_size), np.uint8)
        self.present = self._mapped("present.u8", (self.points,), np.bool_)

    def _mapped(self, name: str, shape: tuple, dtype: Any) -> np.ndarray:
        assert self.directory is not None
        path = self.directory / name
        size = int(np.prod(shape)) * np.dtype(dtype).itemsize
        if path.exists() and path.stat().st_size != size:
            raise ValueError(
                f"{path} holds {path.stat().st_size} bytes, a store of shape {shape} needs {size}"
            )
        mode = "r+" if path.exists() else "w+"
        return np.memmap(path, dtype=dtype, mode=mode, shape=shape)

    def records(self, ids: np.ndarray) -> np.ndarray:
        """The records ``ids`` (a view when they are consecutive, else a copy); every one must
        be held."""
        ids = np.asarray(ids, dtype=np.int64)
        missing = ids[~self.present[ids]] if len(ids) else ids
        if len(missing):
            raise KeyError(f"the store does not hold record {int(missing[0])} ({len(missing)} missing)")
        if len(ids) and np.all(np.diff(ids) == 1):
            return self.array[ids[0] : ids[-1] + 1]
        return self.array[ids]

    def flush(self) -> None:
        """Writes a memory-mapped store to its files (a no-op in memory)."""
        for a in (self.array, self.present):
            if isinstance(a, np.memmap):
                a.flush()


@dataclass(frozen=True)
class EpochFigures:
    """What one epoch cost this rank: payload bytes received (broadcasts it took part in
    included), the plan's packets it needed (``coded_packets`` XORs of several records, the
    rest single records), the records new to it, and seconds receiving, decoding (and
    checking), and filling the store."""

    bytes_received: int
    packets: int
    coded_packets: int
    uncoded_packets: int
    new_records: int
    receive_seconds: float
    decode_seconds: float
    fill_seconds: float


@dataclass(frozen=True)
class EpochBatch:
    """One epoch's batch at this rank: ``ids`` (sorted), the ``new_ids`` among them that
    arrived this epoch, the ``cache`` kept for the next epoch, and the epoch's ``figures``.
    :attr:`records` are the batch's bytes from the store (a view when the ids are
    consecutive); :meth:`record` is a zero-copy view of one."""

    epoch: int
    ids: np.ndarray
    new_ids: np.ndarray
    cache: np.ndarray
    figures: EpochFigures
    store: RecordStore

    @property
    def records(self) -> np.ndarray:
        """The batch's records, ``(len(ids), record_size)`` uint8."""
        return self.store.records(self.ids)

    def record(self, k: int) -> np.ndarray:
        """A view of the store's row of the ``k``-th id."""
        return self.store.array[int(self.ids[k])]

    def __len__(self) -> int:
        return len(self.ids)


class Exchange:
    """One rank of the coded exchange. Build it with :meth:`connect`; then each
    :meth:`next_epoch` (or iterating the exchange) returns the next :class:`EpochBatch`, its
    new records written into :attr:`store` and checked. Epoch 0's batch is in the starting
    cache: :meth:`local_batch` with the sampler's ``batch()``.

    The master acknowledges an epoch once this rank has taken it, and meanwhile delivers the
    next one: the timeout (the master's) must exceed one epoch of training.
    """

    def __init__(self, core: Any, store: RecordStore, joined: dict) -> None:
        self._core = core
        self.store = store
        self.rank: int = int(joined["rank"])
        """This rank's place in the chain (pass it to the sampler as ``rank``)."""
        self.world: int = int(joined["world"])
        """Ranks in the exchange (the sampler's ``num_replicas``)."""
        self.cache_capacity: int = int(joined["cache_capacity"])
        self._group = list(range(self.world))
        self._closed = False

    @classmethod
    def connect(
        cls,
        address: str,
        *,
        token: str | None = None,
        store_dir: str | os.PathLike | None = None,
        timeout: float = 10.0,
        join_timeout: float = 60.0,
    ) -> Exchange:
        """Joins the master at ``address`` (``HOST:PORT``) with the cluster's ``token``
        (default: ``$UBERSHUFFLE_TOKEN``), waits (without the GIL) until every rank has joined
        and this rank's starting cache has arrived in its store (in memory, or memory-mapped in
        ``store_dir``), and returns the exchange."""
        core = _native.ExchangeCore(str(address), _token(token), float(timeout), float(join_timeout))
        event = core.next_event(None, None, float(join_timeout) + float(timeout))
        if event["kind"] != "joined":
            core.close()
            raise ExchangeClosed(_ended_message(event, "joining the master"))
        store = RecordStore(event["points"], event["record_size"], store_dir)
        exchange = cls(core, store, event)
        while True:
            event = exchange._event(2 * float(timeout))
            if event["kind"] == "ready":
                return exchange
            if event["kind"] != "records":
                exchange.close()
                raise ExchangeClosed(_ended_message(event, "receiving the starting cache"))

    def _event(self, timeout: float | None) -> dict:
        if self._closed:
            raise ExchangeClosed("the exchange was closed")
        return self._core.next_event(self.store.array, self.store.present, timeout)

    def next_epoch(self, timeout: float | None = None) -> EpochBatch:
        """Waits (without the GIL; ``timeout`` seconds, ``None``: as long as the master is
        heard from) for the next epoch's delivery and returns its batch. Raises
        :class:`RankLost` when the master announces that ranks left, :class:`ExchangeClosed`
        after the last epoch or when the connection fails, ``TimeoutError`` past ``timeout``."""
        while True:
            event = self._event(timeout)
            kind = event["kind"]
            if kind == "epoch":
                return self._batch(event)
            if kind == "members":
                group = [int(w) for w in event["workers"]]
                lost = [w for w in self._group if w not in group]
                self._group = group
                if lost:
                    raise RankLost(lost)
            elif kind == "records":
                continue  # a starting cache sent again (after the master's resume)
            elif kind == "timeout":
                raise TimeoutError(f"no epoch arrived within {timeout} s")
            elif kind == "ended":
                if event.get("error") is None:
                    raise ExchangeFinished("the master finished its epochs")
                raise ExchangeClosed(_ended_message(event, "waiting for the next epoch"))

    def _batch(self, event: dict) -> EpochBatch:
        self.store.flush()
        figures = EpochFigures(
            bytes_received=int(event["bytes_received"]),
            packets=int(event["packets"]),
            coded_packets=int(event["coded_packets"]),
            uncoded_packets=int(event["uncoded_packets"]),
            new_records=len(event["new_ids"]),
            receive_seconds=float(event["receive_seconds"]),
            decode_seconds=float(event["decode_seconds"]),
            fill_seconds=float(event["fill_seconds"]),
        )
        return EpochBatch(
            int(event["epoch"]), event["batch"], event["new_ids"], event["cache"], figures, self.store
        )

    def local_batch(self, ids: Any, epoch: int = 0) -> EpochBatch:
        """A batch served from the store alone (epoch 0's, from the starting cache; or an
        epoch replayed after a resume): every id must be held (``KeyError`` otherwise)."""
        ids = np.sort(np.asarray(ids, dtype=np.int64))
        self.store.records(ids)  # checks they are held
        empty = np.zeros(0, dtype=np.int64)
        figures = EpochFigures(0, 0, 0, 0, 0, 0.0, 0.0, 0.0)
        return EpochBatch(int(epoch), ids, empty, empty, figures, self.store)

    def __iter__(self) -> Exchange:
        return self

    def __next__(self) -> EpochBatch:
        try:
            return self.next_epoch()
        except ExchangeFinished:
            raise StopIteration from None

    def close(self) -> None:
        """Leaves the exchange (the master sees this rank gone) and flushes the store."""
        if not self._closed:
            self._closed = True
            self._core.close()
            self.store.flush()

    def __enter__(self) -> Exchange:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def host(
        records: np.ndarray,
        *,
        workers: int,
        alpha: float,
        epochs: int,
        policy: str = "global",
        fraction: float | None = None,
        scheme: str = "auto",
        seed: int = 0,
        listen: str = "127.0.0.1:0",
        token: str | None = None,
        timeout: float = 10.0,
        join_timeout: float = 60.0,
        checkpoint: str | os.PathLike | None = None,
        resume: bool = False,
    ) -> Host:
        """Serves ``records`` (a ``(points, record_size)`` uint8 array, copied) to ``workers``
        ranks on a background thread of this process, ``epochs`` epochs of coded delivery
        (``ubershuffle serve`` in-process); returns the :class:`Host`, whose ``address`` the
        ranks connect to.

        Raises ``ValueError`` at once, before anything listens, for settings that do not fit
        the records (a cache smaller than a batch, more workers than records), an unknown
        scheme or a checkpoint of another run; what goes wrong while serving is raised by
        :meth:`Host.join`."""
        records = np.ascontiguousarray(records, dtype=np.uint8)
        if records.ndim != 2 or records.shape[0] == 0 or records.shape[1] == 0:
            raise ValueError(
                f"records must be a non-empty (points, record_size) uint8 array, got {records.shape}"
            )
        core = _native.HostCore(
            records,
            int(workers),
            float(alpha),
            str(policy),
            None if fraction is None else float(fraction),
            str(scheme),
            int(seed),
            int(epochs),
            str(listen),
            _token(token),
            float(timeout),
            float(join_timeout),
            None if checkpoint is None else os.fspath(checkpoint),
            bool(resume),
        )
        return Host(core)


def _ended_message(event: dict, doing: str) -> str:
    if event.get("kind") == "ended":
        error = event.get("error")
        return f"{doing}: {error}" if error else "the master finished its epochs"
    if event.get("kind") == "timeout":
        return f"{doing}: timed out"
    return f"{doing}: unexpected {event.get('kind')}"


class Host:
    """A master serving on a background thread (:meth:`Exchange.host`)."""

    def __init__(self, core: Any) -> None:
        self._core = core
        self.address: str = core.address
        """``HOST:PORT`` the ranks connect to."""

    @property
    def running(self) -> bool:
        """Whether the master is still serving."""
        return bool(self._core.running())

    def epochs(self) -> list[dict]:
        """Every finished epoch's figures at the master (``ubershuffle run --json``'s epoch
        fields: ``transmissions``, ``uncoded_transmissions``, ``payload_bytes``, phases, ...)."""
        return list(self._core.epochs())

    def join(self, timeout: float | None = None) -> list[dict]:
        """Waits for the master to finish (``TimeoutError`` past ``timeout`` seconds) and
        returns :meth:`epochs`; raises ``RuntimeError`` with the master's error."""
        outcome = self._core.join(timeout)
        if outcome is None:
            raise TimeoutError(f"the master is still serving after {timeout} s")
        ok, error, _lost = outcome
        if not ok:
            raise RuntimeError(error)
        return self.epochs()

    def lost_workers(self) -> list[int]:
        """The ranks the finished master lost (empty while it runs)."""
        outcome = self._core.join(0.0)
        return [] if outcome is None else list(outcome[2])
