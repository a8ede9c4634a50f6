"""``ShuffleGroup``: the job's own process group carries the records, each epoch's delivery
overlapped with the epoch before it."""

from __future__ import annotations

import collections
import contextlib
import functools
import hashlib
import os
import tempfile
import threading
import time
import weakref
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from .. import _native
from ..sampler import CodedShuffleSampler
from ..sources import as_source
from ..store import RecordStore
from ._background import Background, Reader
from ._dataset import RecordDataset
from ._gradients import YIELD_ROUND_BYTES, GradientGate
from ._link import CONTROL_TAG, ShuffleError
from ._protocol import CONTROL_LEN, FULFIL, STEP, STOP, WHOLE, offsets_digest, state_bytes
from ._rendezvous import listen_host, meet
from ._serve import StoreSide
from ._setup import check_contents, check_settings, content_digest, device_of, link_over, new_group
from ._watch import ShuffleTimeout, log

CHUNK_BYTES = 1 << 20
"""Bytes of a data message of the engine (peer mode) at the most; ``round_bytes`` caps it too,
and a yielding delivery's are 128 KiB."""
_planes_made: collections.Counter = collections.Counter()
"""Planes this process made, by the global ranks of their group: every rank of a group makes
its planes in the same order, so the count names a plane the same on every rank."""


def _plane_prefix(ranks: list) -> str:
    """The job's key-value store's prefix of the next plane over ``ranks`` (global ranks), new at
    every attempt of a torchrun job."""
    which = hashlib.blake2b(repr(list(ranks)).encode(), digest_size=6).hexdigest()
    n = _planes_made[which]
    _planes_made[which] += 1
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return f"ubershuffle/attempt-{attempt}/plane-{which}-{n}"


def _watch_failures(plane: Any) -> None:
    """Logs ``plane``'s first failure as it happens (a rank that is not waiting on the dead peer
    raises it at its next call); returns once the plane closes."""
    failure = plane.next_failure()
    if failure is not None:
        log.error("ubershuffle: %s: %s", *failure)


ROUNDS_AHEAD = 2
"""Rounds of a coded delivery whose receives a training rank posts ahead. Few: the store's
rounds posted ahead queue in a rank's downlink in front of the relay's bytes, which then wait
for them: on shaped links, deliveries with 4 and 16 rounds ahead took longer than with 2."""
CLOSE_WAIT = 10.0
"""Seconds :meth:`ShuffleGroup.close` lets a delivery in flight run on, and then waits for the
other ranks to close too (at the end of a job they close together), at the most."""
_UNGATED = contextlib.nullcontext()
"""The gate of a transfer that does not yield (a catch-up, records sent whole by the store)."""
STALL_SECONDS = 3.0
"""Seconds without a completed operation after which :meth:`ShuffleGroup.close` abandons a
delivery in flight (a peer stopped or is not closing)."""


class ShuffleGroup(StoreSide):
    """Records of any size, moved between the ranks of the job's own process group, each
    epoch's delivery in the background of the epoch before.

    ``records`` is the data set (see :func:`ubershuffle.sources.as_source`: a 2-D uint8 array,
    a folder of files, a list of paths, a sequence of bytes-like objects, a blob, or the same
    in object storage: ``"s3://bucket/prefix"``, a list of ``s3://`` URLs, a blob at an
    ``s3://`` URL, read by boto3 with the endpoint and credentials of the environment).
    ``mode``:

    - ``"peer"`` (the partial-local seed's system): every rank reads only its first batch from
      the source and holds its batch; each epoch the records that change rank go rank to rank
      (``policy``: ``"global"``, ``"partial-local"`` with ``fraction`` Q, ``"local"``, or a
      pliable ``scheme`` with ``candidates``). No rank holds the whole data set: a rank holds
      its batch plus the next epoch's arrivals, ``(1 + Q) N / M`` records under partial-local.
    - ``"store"``: rank ``source_rank`` of ``group`` serves (:meth:`serve`); it does not train.
      It reads from the source only the records a delivery sends, when it sends them, and
      keeps them (with ``store_dir`` on disk: a restarted store reads only what it lacks).
      Every other rank caches its batch and
      ``extra_cache`` of the records outside it (a share that holds on every number of ranks),
      or the papers' ``alpha`` of the data (its batch included, so at least one over the
      training ranks; :class:`ubershuffle.CodedShuffleSampler` says more), and receives each
      epoch's coded delivery (``scheme``, planned over fixed-size segments of the records),
      each packet only to the ranks that decode from it: to one rank from the store alone, to
      several by pseudo-broadcast among them (the store sends each receiver a piece, and they
      give each other their pieces). Those ranks train together on
      :attr:`train_group` (DDP's ``process_group``). The store plans each step beside the
      delivery of the step before; ``time_budget`` bounds a searching scheme's planner per
      step (seconds of work on two cores, counted in work units, so the plan depends on the
      seed only): 1 s by default, not the sampler's 10, because the plan is on a live job's
      path and on a shared machine its CPU is the trainers'.

    Ranks and the world come from ``group`` (default: the initialised default group, as
    torchrun makes it). A ``group`` smaller than the world suits a job whose ranks outside it
    make no group later together with those inside: torch names groups by a counter that the
    plane's groups advance on the ranks inside only. The records travel on a group of the
    plane's own over the same ranks, so DDP's collectives on ``group`` never interleave with
    them. A wait on a peer lasts as long as the peer is alive, however long it trains: every
    rank beats every ``period = timeout / 10`` seconds through the job's key-value store, and
    a rank silent for ``timeout`` seconds is named by every rank within
    ``timeout + 2 * period`` seconds of its last beat
    (:class:`ShuffleTimeout`: raised by the ranks waiting on it, logged by the others and raised
    at their next :meth:`set_epoch`). At start every rank checks that the others were given the
    same settings and the same records (a sample of 256 records' bytes), before anything moves.
    :meth:`close` is safe from any thread and releases the groups it made; every call after it
    raises.

    Per epoch: :meth:`set_epoch` returns once the epoch's records are local and starts the next
    epoch's delivery in the background; ``sg[i]`` is record ``i`` (a read-only uint8 view;
    ``KeyError`` when this rank does not hold it now), in this process or in DataLoader worker
    processes; :attr:`sampler` is this rank's :class:`ubershuffle.CodedShuffleSampler` on the
    same epoch chain; :meth:`figures` says what each epoch moved and waited. ``store_dir`` keeps
    the rank's records on disk (in ``store_dir/rank-R``) so a restarted rank reuses them;
    without it they live in shared memory. :meth:`state_dict` and :meth:`load_state_dict`
    resume exactly, also on another number of ranks.

    The next epoch's delivery shares the links with DDP's gradients. After :meth:`yield_to`
    with the model, the delivery yields to them: it posts no round while a step's all-reduce
    is in flight, nor one whose bytes would still be landing when the next is due
    (``yield_to_gradients``, on by default; every rank must pass the same). A peer-mode
    delivery then moves in rounds of at most 128 KiB per pair of ranks,
    which is what an all-reduce may still meet on the links; a store-mode one in its rounds,
    at most two posted ahead. If the compute windows are too short for the delivery, the next
    :meth:`set_epoch` waits for the rest (``exposed_seconds``).

    The process group trusts its network, as MPI does: what a peer sends is checked only for
    shape (sizes, plan, padding), not authenticated. :class:`ubershuffle.Exchange` is the sealed
    path.
    """

    def __init__(
        self,
        records: Any,
        *,
        mode: str = "peer",
        policy: str = "global",
        fraction: float | None = None,
        alpha: float | None = None,
        scheme: str = "auto",
        candidates: int | str | None = None,
        seed: int = 0,
        store_dir: str | os.PathLike | None = None,
        group: dist.ProcessGroup | None = None,
        source_rank: int = 0,
        timeout: float = 300.0,
        segment_bytes: int | None = None,
        round_bytes: int = 16 << 20,
        extra_cache: float | None = None,
        time_budget: float = 1.0,
        yield_to_gradients: bool = True,
    ) -> None:
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError(
                "torch.distributed is not initialised: call torch.distributed.init_process_group() "
                "first (torchrun sets the environment it reads)"
            )
        if mode not in ("peer", "store"):
            raise ValueError(f'mode must be "peer" or "store", got {mode!r}')
        if mode == "peer" and (alpha is not None or extra_cache is not None):
            raise ValueError(
                'alpha and extra_cache are the cache of mode="store"; a peer holds its batch (pass neither)'
            )
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if not (isinstance(round_bytes, int) and round_bytes > 0):
            raise ValueError(f"round_bytes must be a positive int, got {round_bytes!r}")
        self.mode = mode
        self.group = group if group is not None else dist.group.WORLD
        self._ranks = dist.get_process_group_ranks(self.group)
        self.rank: int = dist.get_rank(self.group)
        """This process's rank in ``group``."""
        self.world: int = dist.get_world_size(self.group)
        """Ranks in ``group``."""
        if mode == "store" and not (isinstance(source_rank, int) and 0 <= source_rank < self.world):
            raise ValueError(
                f"source_rank must be a rank of the group (0 to {self.world - 1}), got {source_rank!r}"
            )
        if mode == "store" and self.world < 2:
            raise ValueError('mode="store" needs at least two ranks: the store and one that trains')
        self.source_rank = source_rank if mode == "store" else None
        self.is_store = mode == "store" and self.rank == source_rank
        """Whether this rank is the store (it serves; it does not train)."""
        self.timeout = float(timeout)
        self._round_bytes = int(round_bytes)
        self._gate = GradientGate(yield_to_gradients)
        self._hooked = False
        self._closed = False
        self._close_lock = threading.Lock()
        self._busy = threading.RLock()
        """Held by every call that moves records; :meth:`close` takes it after cancelling."""
        self._made: list = []
        """The process groups this object made (released by :meth:`close`)."""
        self._source = None if records is None else as_source(records)
        self._background: Background | None = None
        self._plane = None
        """The engine (peer mode): its own sealed connections carry the records."""
        self._figures: dict = {}
        self._local: int | None = None
        chain = dict(
            seed=seed,
            policy=policy,
            fraction=fraction,
            alpha=alpha,
            extra_cache=extra_cache,
            scheme=scheme,
            candidates=candidates,
            time_budget=time_budget,
        )
        """What the sampler's epoch chain is made of (with the number of training ranks)."""
        settings = {
            "mode": mode,
            "source_rank": source_rank if mode == "store" else None,
            **chain,
            "segment_bytes": segment_bytes,
            "round_bytes": round_bytes,
            "yield_to_gradients": bool(yield_to_gradients),
        }
        if mode == "peer":
            self.train_group = self.group
            self._trainers = list(range(self.world))
            try:
                self._start_engine(chain, settings, store_dir, yield_to_gradients)
            except BaseException:
                self._closed = True
                self._release()
                raise
            return
        backend = dist.get_backend(self.group)
        plane = new_group(self._ranks, backend, self.timeout)
        self._made.append(plane)
        self._link = link_over(plane, self._ranks, self.rank, self.timeout, device_of(backend))
        try:
            self._trainers = [r for r in range(self.world) if r != self.source_rank]
            """The group ranks that train, in order (their sampler ranks are their places here)."""
            check_settings(self._link, settings)
            self.train_group: dist.ProcessGroup | None = self.group
            """The group the training ranks train on (DDP's ``process_group``): ``group`` in peer
            mode, a group of all ranks but the store in store mode (``None`` at the store)."""
            if mode == "store":
                # Every rank makes a group here, so that the job's group counter stays the same on
                # every rank and the groups made after this one (a validation set's, a library's)
                # match: the store makes one of itself alone.
                trainers = [self._ranks[r] for r in self._trainers]
                made = new_group([self._ranks[self.rank]] if self.is_store else trainers, None, None)
                self._made.append(made)
                self.train_group = None if self.is_store else made
            offsets = self._agree_on_index()
            check_contents(self._link, self._source, offsets, seed)
            self.segment_bytes = (
                int(segment_bytes) if segment_bytes else int(_native.default_segment_bytes(offsets))
            )
            """Bytes per segment of coded delivery (store mode)."""
            self._sampler = CodedShuffleSampler(
                len(offsets) - 1,
                num_replicas=len(self._trainers),
                rank=self._trainers.index(self.rank) if not self.is_store else 0,
                **chain,
            )
            self._store = self._open_store(
                offsets,
                None if store_dir is None else os.path.join(store_dir, f"rank-{self.rank}"),
                self._expect_bytes(offsets, policy, fraction),
            )
        except BaseException:
            # Nothing half-made is left: the heartbeat, the waiting thread, the groups, the store.
            self._closed = True
            self._release()
            raise

    # -- set-up ---------------------------------------------------------------------------

    def _start_engine(self, chain: dict, settings: dict, store_dir: Any, yield_to_gradients: bool) -> None:
        """Peer mode: the sampler, the record store, then the engine: the ranks meet through
        the job's key-value store (addresses and key), link up over sealed connections, and
        agree on the settings and the data set before anything moves."""
        if self._source is None:
            raise ValueError(f'mode="peer" needs the records on every rank (rank {self.rank} has none)')
        offsets = self._source.offsets
        self._sampler = CodedShuffleSampler(
            len(offsets) - 1, num_replicas=self.world, rank=self.rank, **chain
        )
        directory = None if store_dir is None else os.path.join(store_dir, f"rank-{self.rank}")
        expect = self._expect_bytes(offsets, chain["policy"], chain["fraction"])
        store_error = None
        try:
            self._store = RecordStore(offsets, directory, expect_bytes=expect)
        except OSError as e:
            # Every rank learns of it at the start-up agreement, and fails with it: meanwhile
            # the engine has a store of no records outside the full file system.
            store_error = str(e)
            self._store = RecordStore(offsets, tempfile.mkdtemp(prefix="ubershuffle-unused-"))
        listener = _native.PlaneListener(listen_host())
        prefix = _plane_prefix(self._ranks)
        job_store = dist.distributed_c10d._get_default_store()
        addresses, key = meet(job_store, prefix, self.rank, self.world, listener.address, self.timeout + 60)
        # No closure over self: the engine's threads hold these until it closes, and a cycle
        # through Rust would keep this object (and its process group) alive past the job.
        load = functools.partial(self._source.load, self._store)
        content = functools.partial(content_digest, self._source, offsets, chain["seed"])
        self._plane = _native.PlaneCore(
            listener,
            self.rank,
            addresses,
            key,
            prefix,
            self.timeout + 60,
            self.timeout,
            [(name, repr(value)) for name, value in settings.items()],
            self._store._core,
            load,
            content,
            store_error,
            min(CHUNK_BYTES, self._round_bytes),
            bool(yield_to_gradients),
        )
        self._watcher = threading.Thread(
            target=_watch_failures, args=(self._plane,), name="ubershuffle-watch", daemon=True
        )
        self._watcher.start()
        # A group dropped without close() closes its plane (whose threads hold no reference to
        # the group).
        weakref.finalize(self, self._plane.close)
        self._plane.wait_agreed()
        self._gate.attach(self._plane)

    def _agree_on_index(self) -> np.ndarray:
        """Every rank's offsets, checked equal (peer mode), or the store's, sent to the ranks
        that have no source (store mode)."""
        link = self._link
        if self.mode == "store":
            if self.is_store:
                if self._source is None:
                    raise ValueError(f"the store (rank {self.rank}) needs the records")
                offsets = self._source.offsets
                for r in self._trainers:
                    link.send_ints(r, [len(offsets)], "the data set's size")
                    link.exchange({r: offsets}, {}, "the data set's offsets")
                return offsets
            n = int(link.recv_ints(self.source_rank, 1, "the data set's size")[0])
            offsets = link.exchange({}, {self.source_rank: (n, torch.int64)}, "the data set's offsets")[
                self.source_rank
            ]
            if self._source is not None and not np.array_equal(self._source.offsets, offsets):
                raise ValueError(f"rank {self.rank}'s records differ from the store's (sizes or count)")
            return offsets
        if self._source is None:
            raise ValueError(f'mode="peer" needs the records on every rank (rank {self.rank} has none)')
        offsets = self._source.offsets
        mine = np.asarray([len(offsets), int(offsets[-1]), offsets_digest(offsets)], dtype=np.int64)
        theirs = link.all_to_all({p: mine for p in range(self.world)}, "the data set's fingerprint")
        for p, other in theirs.items():
            if not np.array_equal(other, mine):
                raise ValueError(f"rank {self.rank}'s records differ from rank {p}'s (sizes or count)")
        return offsets

    def _open_store(self, offsets: np.ndarray, directory: str | None, expect: int) -> RecordStore:
        """This rank's record store, its file system's free space checked for ``expect``
        bytes. Every rank learns whether every other rank's store fits, so a store with no room
        fails every rank at once with its one-line ``OSError`` (no rank is left waiting)."""
        store, error = None, ""
        try:
            store = RecordStore(offsets, directory, expect_bytes=expect)
        except OSError as e:
            error = str(e)
        mine = np.frombuffer(error.encode(), dtype=np.uint8).astype(np.int64)
        theirs = self._link.all_to_all({p: mine for p in range(self.world)}, "whether every store fits")
        theirs[self.rank] = mine
        for p in sorted(theirs):
            if len(theirs[p]):
                if store is not None:
                    store.close()
                text = theirs[p].astype(np.uint8).tobytes().decode(errors="replace")
                raise OSError(text if p == self.rank else f"rank {p}: {text}")
        assert store is not None
        return store

    def _expect_bytes(self, offsets: np.ndarray, policy: str, fraction: float | None) -> int:
        """An upper bound of the bytes this rank's record store will hold, checked against its
        file system's free space when the store is made: the store rank, the whole data set
        (it keeps every record it reads); a training rank, ``k`` records of the largest sizes
        plus two pages each (a record's first and last pages may be shared), ``k`` its cache
        (store mode; its batch in peer mode) plus one batch of arrivals (``ceil(N / M)``;
        ``fraction`` of it under partial-local, none under local). Never more than the whole
        file."""
        sizes = np.diff(offsets)
        page = 4096
        whole = -(-int(offsets[-1]) // page) * page
        if self.is_store:
            return int(offsets[-1])
        batch = -(-len(sizes) // len(self._trainers))
        arrivals = batch
        if self.mode == "peer" and policy == "local":
            arrivals = 0
        elif self.mode == "peer" and policy == "partial-local":
            arrivals = -(-batch * (1.0 if fraction is None else float(fraction)) // 1)
        count = min(len(sizes), len(self._target()) + int(arrivals))
        largest = np.partition(sizes, len(sizes) - count)[len(sizes) - count :] if count else sizes[:0]
        return int(min(whole, int(largest.sum()) + 2 * page * count))

    # -- what a training script calls -----------------------------------------------------

    @property
    def sampler(self) -> CodedShuffleSampler | None:
        """This rank's sampler (``None`` at the store)."""
        return None if self.is_store else self._sampler

    def __len__(self) -> int:
        """The number of records of the data set."""
        return len(self._store)

    def __getitem__(self, i: int) -> np.ndarray:
        """Record ``i``'s bytes (a read-only uint8 view); ``KeyError`` if not held now,
        ``RuntimeError`` once the group is closed."""
        self._check_open()
        return self._store[i]

    def __contains__(self, i: object) -> bool:
        """Whether record ``i`` is held now (``RuntimeError`` once the group is closed)."""
        self._check_open()
        return i in self._store

    def dataset(self, transform: Any = None) -> Any:
        """A ``torch.utils.data.Dataset`` over this group's records: item ``i`` is
        ``transform(sg[i])`` (``sg[i]`` itself without a transform), read in the DataLoader's
        worker processes too, whether they start by fork or spawn (a spawned worker maps the
        rank's store read-only; ``transform`` must then be picklable, as for any Dataset). Use
        it with :attr:`sampler`::

            loader = DataLoader(sg.dataset(decode), sampler=sg.sampler, batch_size=64, num_workers=4)
        """
        self._check_open()
        return RecordDataset(self, transform)

    def __reduce__(self) -> tuple:
        # DataLoader workers started by spawn get the store alone (read-only, same files).
        return (Reader, (self._store,))

    def held(self) -> np.ndarray:
        """The records this rank holds now, sorted (int64)."""
        return self._store.held()

    def yield_to(self, model: Any, hook: Any = None, state: Any = None) -> Any:
        """Makes the plane yield to ``model``'s gradients (a ``DistributedDataParallel``,
        usually on :attr:`train_group`) and returns ``model``. It registers a DDP communication
        hook that runs ``hook(state, bucket)`` (default: DDP's own all-reduce on the model's
        process group) and tells this rank's delivery thread when a step's all-reduce is on the
        wire: the delivery then posts no round that would meet one, so the next epoch's records
        travel in the compute windows between the all-reduces. With ``yield_to_gradients=False`` the
        hook only times the all-reduces. Either way :meth:`figures` then says what the
        gradients and the delivery cost each other (``allreduce_step_seconds``,
        ``yield_seconds``). DDP takes one hook: pass yours as ``hook`` rather than registering
        it. Call it on every training rank, once, before the first step."""
        self._check_open()
        if self.is_store:
            raise RuntimeError("the store rank does not train: call yield_to on the training ranks")
        if self._hooked:
            raise RuntimeError("yield_to was called already: DDP takes one communication hook")
        if not callable(getattr(model, "register_comm_hook", None)):
            raise TypeError(
                f"yield_to needs a torch DistributedDataParallel model, not {type(model).__name__}"
            )
        group = getattr(model, "process_group", None)
        if hook is None:
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            hook, state = default_hooks.allreduce_hook, group
        model.register_comm_hook(None, self._gate.wrap(hook, state, dist.get_world_size(group)))
        self._hooked = True
        return model

    def wait_delivery(self) -> None:
        """Waits until the next epoch's delivery, in the background since :meth:`set_epoch`,
        has arrived (its error, if any, is raised by the next :meth:`set_epoch`): the plane is
        then idle until that call. For measuring the epoch without the plane on the links;
        a training job has no need of it."""
        self._check_open()
        if self._plane is not None:
            self._plane.training_waits(True)
            try:
                self._plane.wait_idle()
            finally:
                self._plane.training_waits(False)
            return
        background = self._background
        if background is not None:
            self._gate.training_waits(True)
            try:
                background.thread.join()
            finally:
                self._gate.training_waits(False)

    def _delivery_in_flight(self) -> bool:
        """Whether a delivery is in flight now (for tests)."""
        if self._plane is not None:
            return not self._plane.is_idle()
        return self._background is not None and self._background.thread.is_alive()

    def figures(self, epoch: int) -> dict:
        """What epoch ``epoch``'s delivery moved and cost at this rank: ``bytes_sent``,
        ``bytes_received`` (payload on the plane's group), ``record_bytes_received`` (the bytes
        of the records it lacked and received), ``padding_bytes``, ``packets``,
        ``coded_packets``, ``records_received``, ``source_records`` and ``source_bytes`` (read
        from the source), ``transfer_seconds`` (the delivery, in the background or not),
        ``exposed_seconds`` (what :meth:`set_epoch` waited), ``held_records``, ``held_bytes``
        (what the rank holds for the epoch), ``peak_held_bytes`` (what it held when the
        delivery ended, before it let go of the records the epoch no longer needs: the most it
        holds) and ``kind`` (``"step"``: along the chain; ``"catch-up"``: a start, a resume, a jump).
        A delivery that ended at :meth:`close` is counted too.

        A store-mode step also says where its time went: at a training rank,
        ``answer_wait_seconds`` (from the request to the store's answer: the store's planning
        and its wait for every rank's request), ``scatter_seconds`` (waiting for the store's
        messages), ``relay_seconds`` (the relay among the ranks of packets several decode),
        ``decode_seconds``, ``gloo_wait_seconds`` (every wait on the plane's group),
        ``thread_cpu_seconds`` (the delivery thread's CPU), ``round_bytes_received`` (the
        rounds' payload, without the plan) and ``part_bytes`` (its part of the plan); at the
        store (:meth:`serve`'s figures),
        ``request_wait_seconds``, ``plan_seconds`` (what the delivery waited for its plan),
        ``plan_ahead_seconds`` (the planner's time when the store planned it ahead, while the
        ranks trained), ``encode_seconds``, ``scatter_seconds``, ``gloo_wait_seconds``,
        ``cpu_seconds`` (the store process's CPU), ``part_bytes`` (the parts of the plan it sent
        the training ranks, each its packets and their receivers), how the packets travelled
        (``unicast_packets`` and ``unicast_bytes``: to one rank; ``multicast_packets`` and
        ``multicast_bytes``: in pieces among the ranks that decode them; ``unneeded_packets``:
        not sent) and per round the bytes to each training rank (``round_store_bytes``) and of
        the relay from rank ``i`` to rank ``j`` (``round_relay_bytes``).

        After :meth:`yield_to`, a training rank's figures of epoch ``e`` also hold the gradient
        all-reduces of epoch ``e - 1``, the epoch this delivery ran behind:
        ``allreduce_step_seconds`` (per step, from its first bucket's hook call to its last
        bucket's completion), ``allreduce_step_during_delivery`` (whether the delivery was in
        flight when the step's all-reduce began), ``allreduce_steps``, ``allreduce_seconds``
        (their sum), ``yield_seconds`` (what the delivery waited for them) and ``yields``."""
        if epoch not in self._figures:
            raise KeyError(f"no figures for epoch {epoch} at rank {self.rank}")
        return dict(self._figures[epoch])

    def set_epoch(self, epoch: int) -> None:
        """Makes ``epoch``'s records local, then starts delivering the next epoch's in the
        background. Call it at the start of every epoch, as ``DistributedSampler.set_epoch``,
        on every training rank. It waits as long as the ranks it waits on are alive, and raises
        :class:`ShuffleTimeout` naming one that died or froze, or :class:`ShuffleError` when the
        group is closed meanwhile (from another thread)."""
        with self._busy:
            self._check_open()
            if self.is_store:
                raise RuntimeError("the store rank serves (call serve()); it has no epochs of its own")
            if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)):
                raise TypeError(f"epoch must be an int, got {type(epoch).__name__}")
            epoch = int(epoch)
            if self._plane is not None:
                self._set_epoch_engine(epoch)
                return
            self._link.check_usable(f"starting epoch {epoch}")
            start = time.perf_counter()
            figures: dict
            background = self._background
            if background is not None and background.epoch == epoch and self._local == epoch - 1:
                self._background = None
                self._gate.training_waits(True)
                try:
                    figures = background.join()
                finally:
                    self._gate.training_waits(False)
                self._sampler.set_epoch(epoch)
            else:
                self._drain()
                self._sampler.set_epoch(epoch)
                figures = self._catch_up(epoch)
            peak = self._store.held_bytes()
            self._store.retain(self._target())
            self._local = epoch
            figures["exposed_seconds"] = time.perf_counter() - start
            figures["held_records"] = len(self._store.held())
            figures["held_bytes"] = self._store.held_bytes()
            figures["peak_held_bytes"] = peak
            if self._hooked:
                figures.update(self._gate.take())
            self._figures[epoch] = figures
            # The delivery works from a copy of the chain: the training thread may use the
            # sampler meanwhile (a StatefulDataLoader loads its state into it).
            now = self._sampler._core.copy()
            self._background = Background(epoch + 1, lambda background: self._deliver_next(background, now))

    def _set_epoch_engine(self, epoch: int) -> None:
        """:meth:`set_epoch` on the engine: it waits (the GIL released) until the epoch's
        records are local, lets go of what the epoch no longer needs and starts the next
        epoch's delivery."""
        start = time.perf_counter()
        self._sampler.set_epoch(epoch)
        figures = self._plane.set_epoch(self._sampler._core)
        figures["exposed_seconds"] = time.perf_counter() - start
        self._local = epoch
        self._figures[epoch] = figures

    def state_dict(self) -> dict:
        """The sampler's state (epoch, position, chain): plain values and bytes.

        The position is what :attr:`sampler` has handed out. A plain ``DataLoader`` prefetches
        (``prefetch_factor`` batches per worker) ahead of what was trained, so its position
        runs ahead of training and a resume from it skips the prefetched samples. For an exact
        mid-epoch resume, save through torchdata's ``StatefulDataLoader`` (its ``state_dict``
        holds this sampler's state as of the batches it yielded) and this group's state at an
        epoch's start."""
        return {"version": 1, "mode": self.mode, "sampler": self._sampler.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Continues from ``state`` (also on another number of ranks: the sampler's rules);
        the next :meth:`set_epoch` brings this rank the records it lacks, from the ranks that
        hold them (a ``store_dir`` kept across the restart still holds its records) or the
        source."""
        with self._busy:
            self._check_open()
            if not isinstance(state, dict) or state.get("version") != 1 or "sampler" not in state:
                raise ValueError("state must be a dict from ShuffleGroup.state_dict()")
            if state.get("mode") != self.mode:
                raise ValueError(f"the state is of mode={state.get('mode')!r}, this group's is {self.mode!r}")
            if self.is_store:
                return  # the store takes the training ranks' state when they catch up
            self._drain()
            self._sampler.load_state_dict(state["sampler"])
            self._local = None

    def close(self) -> None:
        """Ends the plane, from any thread. A delivery in flight (of an epoch no one asked for
        yet) is let run while it makes progress, for at most :data:`CLOSE_WAIT` seconds, and
        abandoned once it stalls for :data:`STALL_SECONDS` (a peer that stopped) or runs out of
        time, as is a :meth:`set_epoch` in another thread (which then raises
        :class:`ShuffleClosed`). Then the store is told (store mode), the process groups this
        object made are released, and the record store is closed (a temporary one removed).
        Every call after it raises.

        Why the grace: at a job's end every rank closes while the last, unneeded delivery
        travels; letting it end keeps every rank's operations matched, so no process exits with
        an operation of the plane still posted (gloo cannot withdraw one)."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        if self._plane is not None:
            for epoch, figures in self._plane.close():
                self._figures.setdefault(epoch, figures)
            with self._busy:
                self._release()
            return
        link = self._link
        background = self._background
        if background is not None:
            deadline = time.monotonic() + CLOSE_WAIT
            self._gate.training_waits(True)
            while background.thread.is_alive():
                background.thread.join(0.05)
                now = time.monotonic()
                if now - link.progress > STALL_SECONDS or now > deadline:
                    break
        link.cancel.set()
        with self._busy:
            background, self._background = self._background, None
            if background is not None:
                background.thread.join()
                if background.error is None and background.figures:
                    # A delivery that ended is counted (figures(epoch) after close) though
                    # its epoch never starts, with the last epoch's all-reduces.
                    figures = dict(background.figures)
                    if self._hooked:
                        figures.update(self._gate.take())
                    self._figures.setdefault(background.epoch, figures)
            link.cancel.clear()
            self._release(tell_store=self.mode == "store" and not self.is_store)

    def _release(self, tell_store: bool = False) -> None:
        """Releases what this object made: the heartbeat (the other ranks read "closed"), the
        link's waiting thread, the process groups and the record store. When nothing was
        abandoned (a clean end), the store is first told that this rank stops
        (``tell_store``), then every rank waits for the others at a barrier (at most
        :data:`CLOSE_WAIT` seconds), so that no rank releases the groups while another still
        uses them (its last request, its last collective on ``train_group``)."""
        if self._plane is not None or not hasattr(self, "_link"):
            if self._plane is not None:
                self._plane.close()
            if hasattr(self, "_store"):
                self._store.close()
            return
        link = self._link
        try:
            if link.broken is None:
                if tell_store:
                    self._control(STOP, 0)
                link.barrier("closing its ShuffleGroup", CLOSE_WAIT)
        except (ShuffleError, ShuffleTimeout):
            pass  # a peer is gone, broke off or is not closing: it learns from the heartbeat
        link.watch.close()
        link.close()
        if link.broken is None:
            # A group with an operation still posted (abandoned on a dead peer) is left to the
            # process's end: destroying it under the thread that waits on it is unsafe.
            for group in reversed(self._made):
                dist.destroy_process_group(group)
        self._made = []
        if hasattr(self, "_store"):
            self._store.close()

    def __enter__(self) -> ShuffleGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        role = "store" if self.is_store else "rank"
        held = len(self.held())
        return f"ShuffleGroup(mode={self.mode!r}, {role} {self.rank} of {self.world}, {held} records held)"

    # -- the deliveries -------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"the ShuffleGroup of rank {self.rank} is closed")

    def _drain(self) -> None:
        """Waits for the delivery in flight (every rank runs it: it must finish)."""
        if self._background is not None:
            background, self._background = self._background, None
            # A delivery whose epoch never started keeps its figures (no exposed time).
            self._figures.setdefault(background.epoch, background.join())

    def _me(self) -> int:
        """This rank's place among the training ranks (the sampler's rank)."""
        return self._trainers.index(self.rank)

    def _target(self) -> np.ndarray:
        return self._sampler._core.targets()[self._me()]

    def _by_group_rank(self, lists: list, store: Any = None) -> list:
        """Per-training-rank lists placed at their group ranks (the store's entry ``store``)."""
        out: list = [store] * self.world
        for place, r in enumerate(self._trainers):
            out[r] = lists[place]
        return out

    def _from_store(self, missing: dict) -> Any:
        """The transfer in which the store sends training ranks the records they miss
        (``missing``: by training rank; a training rank knows only its own), the store reading
        first from the source what it does not hold. Only the store sends, so each pair's
        rounds are the same in every rank's view."""
        empty = np.zeros(0, dtype=np.int64)
        if self.is_store:
            self._ensure_held(np.concatenate([empty, *missing.values()]))
        holdings = self._by_group_rank([empty] * len(self._trainers))
        targets = self._by_group_rank([missing.get(place, empty) for place in range(len(self._trainers))])
        return _native.TransferCore(self._store._core, holdings, targets, self.rank, self._round_bytes)

    def _record_bytes(self, ids: Any) -> int:
        """The bytes of the records ``ids`` (their own sizes)."""
        ids = np.asarray(ids, dtype=np.int64)
        offsets = self._store.offsets
        return int((offsets[ids + 1] - offsets[ids]).sum())

    def _run_transfer(self, transfer: Any, what: str, gated: bool = False) -> dict:
        """Sends and receives a transfer's rounds, then reads from the source what no rank held.
        ``gated``: each round waits until no gradient all-reduce is in flight."""
        sent0, got0 = self._link.bytes_sent, self._link.bytes_received
        for k in range(transfer.rounds):
            sent, received = transfer.sizes(k)
            out = np.empty(int(sum(sent)), dtype=np.uint8)
            transfer.pack_into(k, out)
            ends = np.cumsum(sent)
            sends = {p: out[ends[p] - sent[p] : ends[p]] for p in range(self.world) if sent[p]}
            recvs = {p: (received[p], torch.uint8) for p in range(self.world) if received[p]}
            round_k = f"round {k} of {what}"
            gate = self._gate.posting(self._link.cancel, float(sum(received))) if gated else _UNGATED
            with gate:
                buffers, posted = self._link.post_exchange(sends, recvs, round_k)
            self._link.wait(posted, round_k)
            got = self._link.received(buffers)
            if got:
                transfer.unpack(k, np.concatenate([got[p] for p in sorted(got)]))
        source = transfer.source_ids()
        source_bytes = 0
        if len(source):
            if self._source is None:
                raise ShuffleError(
                    f"rank {self.rank} must read {len(source)} records from the source but has none"
                )
            source_bytes = self._source.load(self._store, source)
        f = transfer.figures()
        return {
            "bytes_sent": self._link.bytes_sent - sent0,
            "bytes_received": self._link.bytes_received - got0,
            "records_received": int(f["records_received"]),
            "record_bytes_received": int(f["bytes_received"]),
            "source_records": int(len(source)),
            "source_bytes": int(source_bytes),
            "padding_bytes": 0,
            "packets": int(f["records_sent"]) if self.is_store else int(f["records_received"]),
            "coded_packets": 0,
        }

    def _catch_up(self, epoch: int) -> dict:
        """Brings every rank its target of ``epoch`` from whatever it holds (a start, a resume,
        a jump): in peer mode from the ranks that hold each record, else from the source; in
        store mode from the store."""
        start = time.perf_counter()
        held = self._store.held()
        core = self._sampler._core
        if self.mode == "peer":
            holdings = self._link.all_to_all(
                {p: held for p in range(self.world)}, f"what each rank holds at epoch {epoch}"
            )
            holdings[self.rank] = held
            lists = [holdings[p] for p in range(self.world)]
            transfer = _native.TransferCore(
                self._store._core, lists, core.targets(), self.rank, self._round_bytes
            )
            figures = self._run_transfer(transfer, f"catching up to epoch {epoch}")
        else:
            state = state_bytes(self._sampler.state_dict()) if self._me() == 0 else b""
            self._control(FULFIL, epoch, len(state), len(held))
            store = self.source_rank
            if state:
                self._link.exchange({store: np.frombuffer(state, dtype=np.uint8)}, {}, "the sampler's state")
            self._link.exchange({store: held}, {}, "what this rank holds")
            missing = {self._me(): np.setdiff1d(self._target(), held)}
            figures = self._run_transfer(self._from_store(missing), f"catching up to epoch {epoch}")
        figures.update(kind="catch-up", transfer_seconds=time.perf_counter() - start)
        return figures

    def _deliver_next(self, background: Background, now: Any) -> None:
        """The delivery of epoch ``background.epoch`` from the current one (``now``, a copy of
        the sampler's core), in the background."""
        start = time.perf_counter()
        nxt = now.stepped()
        epoch = background.epoch
        self._gate.delivering(True)
        try:
            if self.mode == "peer":
                round_bytes = self._round_bytes
                if self._gate.enabled:
                    round_bytes = min(round_bytes, YIELD_ROUND_BYTES)
                transfer = _native.TransferCore(
                    self._store._core, now.targets(), nxt.targets(), self.rank, round_bytes
                )
                figures = self._run_transfer(transfer, f"epoch {epoch}'s delivery", gated=True)
            else:
                figures = self._receive_step(now, nxt, epoch)
        finally:
            self._gate.delivering(False)
        figures.update(kind="step", transfer_seconds=time.perf_counter() - start)
        background.figures = figures

    def _control(self, op: int, epoch: int, *extra: int, core: Any = None) -> None:
        """A training rank's request to the store (``core``: the chain it is made from, by
        default the sampler's)."""
        digest = int((core if core is not None else self._sampler._core).digest()) & (2**63 - 1)
        values = [op, epoch, digest, *extra] + [0] * (CONTROL_LEN - 3 - len(extra))
        self._link.send_ints(self.source_rank, values, "a request to the store", CONTROL_TAG)

    def _receive_step(self, now: Any, nxt: Any, epoch: int) -> dict:
        """A training rank's side of the store's delivery of ``epoch``: its part of the plan and
        its routes, then per round the store's message to this rank and, where the round has
        packets for several ranks, the relay among the training ranks: the round's receives,
        from the store and the other ranks, posted :data:`ROUNDS_AHEAD` rounds ahead, its own
        relay sends posted as soon as its store message lands, each round decoded as it
        completes. Python only posts and waits; gloo (or NCCL) moves the bytes."""
        link, store = self._link, self.source_rank
        sent0, got0 = link.bytes_sent, link.bytes_received
        timers = dict(link.seconds)
        cpu = time.thread_time()
        asked = time.perf_counter()
        self._control(STEP, epoch, core=now)
        kind, part_len = (int(v) for v in link.recv_ints(store, 2, f"the store's answer for epoch {epoch}"))
        answer_wait = time.perf_counter() - asked
        if kind == WHOLE:
            me = self._me()
            missing = {me: np.setdiff1d(nxt.targets()[me], now.targets()[me])}
            return self._run_transfer(self._from_store(missing), f"epoch {epoch}'s delivery")
        part = link.exchange({}, {store: (part_len, torch.uint8)}, f"the plan of epoch {epoch}")[store]
        decoding = time.perf_counter()
        receiver = _native.CodedRecvCore(now, nxt, part, self._store._core, self._me(), self.segment_bytes)
        decode = time.perf_counter() - decoding
        rounds = receiver.rounds
        what = f"epoch {epoch}'s delivery"
        trainers = self._trainers

        in_flight = 0  # bytes posted to receive and not landed

        def post(k: int) -> tuple:
            # Round k's receives: the store's message, and every other rank's relay; none
            # that would meet a gradient all-reduce (the store and the other ranks send only
            # to a posted receive).
            nonlocal in_flight
            sent, received = receiver.relay_sizes(k) if receiver.has_relay(k) else ([], [])
            incoming = receiver.store_len(k) + sum(received)
            with self._gate.posting(link.cancel, in_flight + incoming):
                store_part = link.irecv(store, receiver.store_len(k), f"round {k} of {what}")
                relay_part = link.irecvs(
                    {trainers[q]: n for q, n in enumerate(received)}, f"the relay of round {k} of {what}"
                )
            in_flight += incoming
            return store_part, relay_part, sent, incoming

        posted = collections.deque(post(k) for k in range(min(ROUNDS_AHEAD, rounds)))
        sending: collections.deque = collections.deque()
        scatter = relay = 0.0
        round_bytes = 0
        for k in range(rounds):
            waiting = time.perf_counter()
            (buffer, works), (from_peers_t, relay_works), sent, incoming = posted.popleft()
            link.wait(works, f"round {k} of {what} from the store")
            scatter += time.perf_counter() - waiting
            from_store = buffer.cpu().numpy()
            if sent:
                # The relay leaves this rank's uplink: not while its gradients are on the wire.
                out = np.empty(int(sum(sent)), dtype=np.uint8)
                receiver.pack_relay(k, from_store, out)
                ends = np.cumsum(sent)
                with self._gate.posting(link.cancel):
                    sending.append(
                        link.isends(
                            {trainers[q]: out[e - n : e] for q, (n, e) in enumerate(zip(sent, ends))},
                            f"the relay of round {k} of {what}",
                        )
                    )
            if k + ROUNDS_AHEAD < rounds:
                posted.append(post(k + ROUNDS_AHEAD))
            waiting = time.perf_counter()
            link.wait(relay_works, f"the relay of round {k} of {what}")
            relay += time.perf_counter() - waiting
            in_flight -= incoming
            relay += link.drain(sending, ROUNDS_AHEAD, f"the relay of round {k} of {what}")
            from_peers = from_peers_t.cpu().numpy()
            round_bytes += len(from_store) + len(from_peers)
            decoding = time.perf_counter()
            receiver.decode(k, from_store, from_peers)
            decode += time.perf_counter() - decoding
        relay += link.drain(sending, 0, f"the relay of {what}")
        link.tally("relay_seconds", relay)
        link.tally("scatter_seconds", scatter)
        decoding = time.perf_counter()
        done = receiver.finish()
        decode += time.perf_counter() - decoding
        new_records = done["new_records"]
        return {
            "answer_wait_seconds": answer_wait,
            "decode_seconds": decode,
            **link.seconds_since(timers),
            "thread_cpu_seconds": time.thread_time() - cpu,
            "bytes_sent": link.bytes_sent - sent0,
            "bytes_received": link.bytes_received - got0,
            "round_bytes_received": round_bytes,
            "part_bytes": int(part_len),
            "records_received": len(new_records),
            "record_bytes_received": self._record_bytes(new_records),
            "source_records": 0,
            "source_bytes": 0,
            "padding_bytes": int(done["padding_bytes"]),
            "packets": int(done["packets_needed"]),
            "coded_packets": int(done["coded_packets_needed"]),
        }
