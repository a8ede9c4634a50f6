"""``Exchange``: the coded data plane of a training job. Each rank keeps its records in a
:class:`ubershuffle.RecordStore` (its cache, records of any size, in shared memory or in
``store_dir``) and, each epoch, receives exactly the records of its new batch that it lacks, by
the coded delivery the master plans (the runtime's epoch loop over the workspace's TCP
transport, planned and coded on fixed-size segments of the records), each checked against the
master's checksum.

The master holds the whole data set: ``ubershuffle serve`` in a process of its own (``--records
FILE --record-size B``, ``--records FILE --index FILE`` or ``--records-dir DIR``), or
:meth:`Exchange.host` on a background thread of any process (rank 0, say), which takes what
:func:`ubershuffle.sources.as_source` takes. Its chain (``workers``, ``extra_cache`` or ``alpha``,
``policy``, ``fraction``, ``seed``) is the one of :class:`ubershuffle.CodedShuffleSampler` for the same
values, so the sampler of rank ``exchange.rank`` serves exactly the indices of each delivered
batch, also after a rank is lost (the master keeps every rank's place in the chain).

The next epoch's delivery runs while the rank trains on this one: the worker thread writes its
records into the store and acknowledges an epoch to the master as soon as :meth:`Exchange.next_epoch`
returns it. The store holds the cache the master says the rank keeps, plus the records of the
epoch in flight: when the rank takes an epoch, the worker thread drops the records it no longer
keeps, before anything of the next epoch arrives.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _native
from .sources import as_source
from .store import RecordStore

TOKEN_VAR = "UBERSHUFFLE_TOKEN"


class RankLost(RuntimeError):
    """Another rank left the exchange (killed, or slower than the timeout): ``ranks`` names
    them. The master goes on with the rest, each keeping its own batch (the sampler's): the
    lost ranks' batches are not delivered, so their records go untrained, until a restarted
    process takes a lost place (at an epoch boundary) and gets that rank's batch from then on.
    Call :meth:`Exchange.next_epoch` again for the epoch."""

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


@dataclass(frozen=True)
class EpochFigures:
    """What one epoch cost this rank: payload bytes received (broadcasts it took part in
    included), the plan's packets it needed (``coded_packets`` XORs of several records' pieces,
    the rest single pieces), the bytes of those packets beyond their records' data
    (``padding_bytes``: records of uneven size travel in fixed-size segments; 0 for records of
    one size), the records new to it, seconds receiving and decoding (and checking), and how
    long :meth:`Exchange.next_epoch` waited for the epoch (``wait_seconds``: near 0 when the
    epoch arrived while the rank trained on the one before)."""

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
    """One epoch's batch at this rank: ``ids`` (sorted), the ``new_ids`` among them that
    arrived this epoch, the ``cache`` kept for the next epoch (the batch included), and the
    epoch's ``figures``. :attr:`records` are the batch's bytes from the store; :meth:`record`
    is a zero-copy view of one (``store[i]`` of any id of the batch, as well)."""

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


class Exchange:
    """One rank of the coded exchange. Build it with :meth:`connect`; then each
    :meth:`next_epoch` (or iterating the exchange) returns the next :class:`EpochBatch`, its
    new records written into :attr:`store` and checked. Epoch 0's batch is in the starting
    cache: :meth:`local_batch` with the sampler's ``batch()``.

    :meth:`next_epoch` hands over an epoch the worker thread has already written into the
    store and lets the master deliver the next one while the rank trains on it; the master
    waits for the rank's next call, so its timeout must exceed one epoch of training. Taking
    an epoch drops from the store the records the rank no longer keeps (the new batch stays):
    records of the epoch before are not to be read once :meth:`next_epoch` is called (a
    DataLoader iterates one epoch at a time).
    """

    def __init__(self, core: Any, store: RecordStore, joined: dict) -> None:
        self._core = core
        self.store = store
        """The rank's :class:`ubershuffle.RecordStore`: ``store[i]`` is record ``i``'s bytes
        (a read-only view) while the rank holds it, in this process and in DataLoader worker
        processes (forked or spawned, persistent or not)."""
        self.rank: int = int(joined["rank"])
        """This rank's place in the chain (pass it to the sampler as ``rank``)."""
        self.world: int = int(joined["world"])
        """Ranks in the exchange (the sampler's ``num_replicas``)."""
        self.cache_capacity: int = int(joined["cache_capacity"])
        self._group = list(range(self.world))

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
        and this rank's starting cache has arrived in its store (in shared memory, or in
        ``store_dir``, kept across restarts: records it holds already are reused), and returns
        the exchange."""
        core = _native.ExchangeCore(str(address), _token(token), float(timeout), float(join_timeout))
        event = core.next_event(float(join_timeout) + float(timeout))
        if event["kind"] != "joined":
            core.close()
            raise ExchangeClosed(_ended_message(event, "joining the master"))
        try:
            store = RecordStore(event["offsets"], store_dir)
            core.attach(store._core)
        except BaseException:
            core.close()
            raise
        exchange = cls(core, store, event)
        while True:
            event = exchange._event(2 * float(timeout))
            if event["kind"] == "ready":
                return exchange
            if event["kind"] != "records":
                exchange.close()
                raise ExchangeClosed(_ended_message(event, "receiving the starting cache"))

    def _event(self, timeout: float | None) -> dict:
        return self._core.next_event(timeout)

    def next_epoch(self, timeout: float | None = None) -> EpochBatch:
        """Waits (without the GIL; ``timeout`` seconds, ``None``: as long as the master is
        heard from) for the next epoch's delivery and returns its batch. Raises
        :class:`RankLost` when the master announces that ranks left, :class:`ExchangeClosed`
        after the last epoch, when the connection fails or once :meth:`close` was called (from
        any thread), ``TimeoutError`` past ``timeout``."""
        started = time.perf_counter()
        while True:
            event = self._event(timeout)
            kind = event["kind"]
            if kind == "epoch":
                return self._batch(event, time.perf_counter() - started)
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

    def _batch(self, event: dict, waited: float) -> EpochBatch:
        figures = EpochFigures(
            bytes_received=int(event["bytes_received"]),
            packets=int(event["packets"]),
            coded_packets=int(event["coded_packets"]),
            uncoded_packets=int(event["uncoded_packets"]),
            padding_bytes=int(event["padding_bytes"]),
            new_records=len(event["new_ids"]),
            receive_seconds=float(event["receive_seconds"]),
            decode_seconds=float(event["decode_seconds"]),
            wait_seconds=waited,
        )
        return EpochBatch(
            int(event["epoch"]), event["batch"], event["new_ids"], event["cache"], figures, self.store
        )

    def local_batch(self, ids: Any, epoch: int = 0) -> EpochBatch:
        """A batch served from the store alone (epoch 0's, from the starting cache; or an
        epoch replayed after a resume): every id must be held (``KeyError`` otherwise)."""
        ids = np.sort(np.asarray(ids, dtype=np.int64))
        self.store.check_held(ids)
        empty = np.zeros(0, dtype=np.int64)
        figures = EpochFigures(0, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0)
        return EpochBatch(int(epoch), ids, empty, empty, figures, self.store)

    def __iter__(self) -> Exchange:
        return self

    def __next__(self) -> EpochBatch:
        try:
            return self.next_epoch()
        except ExchangeFinished:
            raise StopIteration from None

    def close(self) -> None:
        """Leaves the exchange (the master sees this rank gone); safe from any thread, also
        while another waits in :meth:`next_epoch` (which then raises :class:`ExchangeClosed`).
        A store kept in ``store_dir`` is flushed; a temporary one stays readable until the
        exchange is garbage collected."""
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
        join_timeout: float = 60.0,
        checkpoint: str | os.PathLike | None = None,
        resume: bool = False,
    ) -> Host:
        """Serves ``records`` (anything :func:`ubershuffle.sources.as_source` takes: a 2-D uint8
        array, a folder, a list of paths, a sequence of bytes-like objects, a blob with its
        offsets, an ``s3://`` prefix, a list of ``s3://`` URLs; read once into a temporary
        :class:`ubershuffle.RecordStore`) to ``workers`` ranks on a background thread of this
        process, ``epochs`` epochs of coded delivery (``ubershuffle serve`` in-process); returns
        the :class:`Host`, whose ``address`` the ranks connect to. The cache is
        :class:`CodedShuffleSampler`'s: ``extra_cache`` (the share of the records outside a
        rank's batch that it also caches; holds on every number of ranks) or the papers'
        ``alpha`` (the cached share of all records, the batch included), one of them; the
        ranks' samplers take the same value.

        Raises ``ValueError`` (``TypeError`` for records of no kind it takes) at once, before
        anything listens, for settings that do not fit the records (a cache smaller than a
        batch, more workers than records), an unknown scheme or a checkpoint of another run;
        what goes wrong while serving is raised by :meth:`Host.join`."""
        if alpha is None and extra_cache is None:
            raise ValueError(
                "pass extra_cache= (or the papers' alpha=): what each rank caches besides its batch"
            )
        source = as_source(records)
        alpha = _native.master_alpha(
            len(source),
            int(workers),
            None if alpha is None else float(alpha),
            None if extra_cache is None else float(extra_cache),
        )
        token = _token(token)
        store = RecordStore(source.offsets)
        try:
            source.load(store, np.arange(len(source)))
            core = _native.HostCore(
                store._core,
                int(workers),
                float(alpha),
                str(policy),
                None if fraction is None else float(fraction),
                str(scheme),
                int(seed),
                int(epochs),
                str(listen),
                token,
                float(timeout),
                float(join_timeout),
                None if checkpoint is None else os.fspath(checkpoint),
                bool(resume),
            )
        except BaseException:
            store.close()
            raise
        return Host(core, store)


def _ended_message(event: dict, doing: str) -> str:
    if event.get("kind") == "ended":
        error = event.get("error")
        return f"{doing}: {error}" if error else "the master finished its epochs"
    if event.get("kind") == "timeout":
        return f"{doing}: timed out"
    return f"{doing}: unexpected {event.get('kind')}"


class Host:
    """A master serving on a background thread (:meth:`Exchange.host`), from a temporary
    record store of the whole data set (removed when the host is garbage collected)."""

    def __init__(self, core: Any, store: RecordStore) -> None:
        self._core = core
        self._store = store
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
