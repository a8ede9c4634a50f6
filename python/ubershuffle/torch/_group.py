"""``ShuffleGroup``: the records a training job needs each epoch, moved between its ranks by
the data plane's engine (Rust, on sockets and threads of its own), each epoch's delivery in the
background of the epoch before. This module is the API; the protocol is the engine's."""

from __future__ import annotations

import functools
import logging
import os
import tempfile
import threading
import time
import weakref
from typing import Any

import numpy as np
import torch.distributed as dist

from .._native import ShuffleClosed
from ..sampler import CodedShuffleSampler
from ..sources import as_source
from ..store import RecordStore, store_bytes_bound
from ._dataset import RecordDataset
from ._engine import content_digest, start_plane
from ._gradients import GradientGate
from ._reader import Reader
from ._state import state_bytes, state_from

log = logging.getLogger("ubershuffle.torch")

CHUNK_BYTES = 1 << 20
"""Bytes of a data message of the engine at the most (``round_bytes`` caps it too; a yielding
delivery's are 128 KiB)."""


def _watch_failures(plane: Any) -> None:
    """Logs ``plane``'s first failure as it happens (a rank that is not waiting on the dead peer
    raises it at its next call); returns once the plane closes. A peer that closed is the end of
    a job (its last delivery, asked for by no one, stops), not an error."""
    failure = plane.next_failure()
    if failure is not None and failure[0] != "PeerClosed":
        log.error("ubershuffle: %s: %s", *failure)


class _Opened:
    """What a store-mode training rank without a source makes once the store's index comes
    (on the engine's hooks thread): its sampler and its record store. It holds no reference to
    the group (the engine's threads hold it until the plane closes)."""

    def __init__(self, chain: dict, trainers: int, place: int, directory: str | None) -> None:
        self.chain, self.trainers, self.place, self.directory = chain, trainers, place, directory
        self.sampler: CodedShuffleSampler | None = None
        self.store: RecordStore | None = None

    def open(self, offsets: np.ndarray) -> Any:
        """The sampler and the store for the data set of ``offsets``; returns the store's core
        (an ``OSError`` when it does not fit)."""
        self.sampler = CodedShuffleSampler(
            len(offsets) - 1, num_replicas=self.trainers, rank=self.place, **self.chain
        )
        target = self.sampler._core.targets()[self.place]
        batch = -(-(len(offsets) - 1) // self.trainers)
        self.store = RecordStore(
            offsets, self.directory, expect_bytes=store_bytes_bound(offsets, target, batch, 1.0)
        )
        return self.store._core

    def state(self) -> bytes:
        """The sampler's state as bytes (for the store, at a catch-up)."""
        assert self.sampler is not None
        return state_bytes(self.sampler.state_dict())


class ShuffleGroup:
    """Records of any size, moved between the ranks of a training job, each epoch's delivery in
    the background of the epoch before.

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
      ``first_epoch`` says how epoch 0's batches are made (the sampler's setting): ``"random"``,
      a seeded balanced partition, or ``"blocks"``, the records in order cut into one run of
      consecutive records per rank. With a sharded source (:func:`ubershuffle.sources.webdataset`,
      ``mds``, ``litdata``, ``parquet``) peer mode uses ``"blocks"`` unless told otherwise: each
      rank then reads whole shards in epoch 0 (in object storage, a tar, MDS shard or LitData
      chunk by one ranged GET, a Parquet file by one a row group), so every byte of the data
      set leaves the object store about once in the job and nothing is read after epoch 0.
      Epoch 0 then trains each rank on whole shards of its own (in an order shuffled within
      its block); later epochs mix as the policy mixes from any start (``global``, the default,
      at once; ``partial-local`` a ``fraction`` an epoch; ``local`` never). Pass
      ``first_epoch="random"`` to mix epoch 0 too, at the price of every rank reading scattered
      records of every shard.
    - ``"store"``: rank ``source_rank`` of ``group`` serves (:meth:`serve`); it does not train.
      It reads from the source only the records a delivery sends, when it sends them, and
      keeps them (with ``store_dir`` on disk: a restarted store reads only what it lacks).
      Every other rank caches its batch and ``extra_cache`` of the records outside it (a share
      that holds on every number of ranks), or the papers' ``alpha`` of the data (its batch
      included, so at least one over the training ranks; :class:`ubershuffle.CodedShuffleSampler`
      says more), and receives each epoch's coded delivery (``scheme``, planned over fixed-size
      segments of the records), each packet only to the ranks that decode from it: to one rank
      from the store alone, to several by pseudo-broadcast among them (the store sends each
      receiver a piece, and they relay their pieces to each other). Those ranks train together
      on :attr:`train_group` (DDP's ``process_group``). The store plans each step ahead, while
      the step before travels and the ranks train, on a thread of lower priority than the
      sending; ``time_budget`` bounds a searching scheme's planner per step (seconds of work on
      two cores, counted in work units, so the plan depends on the seed only): 1 s by default,
      and never more than a quarter of the time the records the ranks lack take on the store's
      uplink of ``link_gbps`` Gbit/s (10 by default; set it to the network's): the most a plan
      can save.

    Ranks come from ``group`` (default: the initialised default group, as torchrun makes it).
    The records travel on the plane's own sealed connections, never through the process group
    (a job on NCCL moves its records on these sockets, never through a GPU): the ranks meet
    through the job's key-value store (torchrun's TCPStore), where each publishes the address
    it listens on (the interface ``UBERSHUFFLE_SOCKET_IFNAME`` or ``GLOO_SOCKET_IFNAME`` names,
    else this host name's address, as gloo chooses) and the first rank a random key for the
    job's connections (``UBERSHUFFLE_TOKEN_FILE`` or ``UBERSHUFFLE_TOKEN``, the same on every
    rank, replaces it where the key-value store's network is not trusted). A wait on a peer
    lasts as long as the peer is alive, however long it trains: every connection with nothing
    else to say carries a heartbeat every ``period = timeout / 10`` seconds, a rank silent for
    ``timeout`` seconds is named by every rank within ``timeout + 2 * period`` seconds of its
    last beat (:class:`ShuffleTimeout`), and a rank that dies is named at once (its
    connections end). Either way the ranks waiting on it raise, and the others log it (logger
    ``ubershuffle.torch``) and raise at their next call. At start every rank checks that the
    others were given the same settings and the same records (a sample of 256 records' bytes
    where two ranks or more read a source), before anything moves. :meth:`close` is safe from
    any thread and releases what it made; every call after it raises.

    Per epoch: :meth:`set_epoch` returns once the epoch's records are local and starts the next
    epoch's delivery in the background; ``sg[i]`` is record ``i`` (a read-only uint8 view;
    ``KeyError`` when this rank does not hold it now), in this process or in DataLoader worker
    processes; :attr:`sampler` is this rank's :class:`ubershuffle.CodedShuffleSampler` on the
    same epoch chain; :meth:`figures` says what each epoch moved and waited. ``store_dir`` keeps
    the rank's records on disk (in ``store_dir/rank-R``) so a restarted rank reuses them;
    without it they live in shared memory. :meth:`state_dict` and :meth:`load_state_dict`
    resume exactly, also on another number of ranks.

    The next epoch's delivery shares the links with DDP's gradients. After :meth:`yield_to`
    with the model, the delivery yields to them: a rank lets no records come to it, nor sends
    any, while a step's all-reduce is in flight, nor grants what would still be landing when
    the next is due (``yield_to_gradients``, on by default; every rank must pass the same).
    A yielding delivery moves in messages of 128 KiB, a few granted at a time, which is what an
    all-reduce may still meet on the links. If the compute windows are too short for the
    delivery, the next :meth:`set_epoch` waits for the rest (``exposed_seconds``).

    What a peer sends is checked for shape (sizes, plan, credit), and a peer without the job's
    key is refused; a rank holding the key is trusted for the bytes of the records it sends.
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
        link_gbps: float = 10.0,
        yield_to_gradients: bool = True,
        first_epoch: str | None = None,
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
        if not (isinstance(link_gbps, (int, float)) and 0 < link_gbps < float("inf")):
            raise ValueError(f"link_gbps must be a positive number of Gbit/s, got {link_gbps!r}")
        if not (isinstance(round_bytes, int) and round_bytes > 0):
            raise ValueError(f"round_bytes must be a positive int, got {round_bytes!r}")
        if first_epoch is not None and first_epoch not in ("random", "blocks"):
            raise ValueError(f'first_epoch must be "random" or "blocks", got {first_epoch!r}')
        if segment_bytes is not None and not (isinstance(segment_bytes, int) and segment_bytes > 0):
            raise ValueError(f"segment_bytes must be a positive int, got {segment_bytes!r}")
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
        self._trainers = [r for r in range(self.world) if r != self.source_rank]
        """The group ranks that train, in order (their sampler ranks are their places here)."""
        self._gate = GradientGate()
        self._hooked = False
        self._closed = False
        self._close_lock = threading.Lock()
        self._figures: dict = {}
        self._made: list = []
        """The process groups this object made (released by :meth:`close`)."""
        self._plane: Any = None
        self._source = None if records is None else as_source(records)
        if first_epoch is None:
            # Every peer rank has the source, so every rank decides the same (the start-up
            # agreement compares the value too).
            sharded = self._source is not None and self._source.sharded
            first_epoch = "blocks" if mode == "peer" and sharded else "random"
        self.first_epoch: str = first_epoch
        """How epoch 0's batches were made: ``"blocks"`` or ``"random"``."""
        self.train_group: dist.ProcessGroup | None = self.group
        """The group the training ranks train on (DDP's ``process_group``): ``group`` in peer
        mode, a group of all ranks but the store in store mode (``None`` at the store)."""
        if mode == "store":
            # Every rank makes a group here, so that the job's group counter stays the same on
            # every rank and the groups made after this one (a validation set's, a library's)
            # match: the store makes one of itself alone.
            trainers = [self._ranks[r] for r in self._trainers]
            made = dist.new_group(
                [self._ranks[self.rank]] if self.is_store else trainers, use_local_synchronization=True
            )
            self._made.append(made)
            self.train_group = None if self.is_store else made
        chain = dict(
            seed=seed,
            policy=policy,
            fraction=fraction,
            alpha=alpha,
            extra_cache=extra_cache,
            scheme=scheme,
            candidates=candidates,
            time_budget=time_budget,
            first_epoch=first_epoch,
        )
        """What the sampler's epoch chain is made of (with the number of training ranks)."""
        settings = {
            "mode": mode,
            "source_rank": self.source_rank,
            **chain,
            "segment_bytes": segment_bytes,
            "round_bytes": round_bytes,
            "link_gbps": float(link_gbps),
            "yield_to_gradients": bool(yield_to_gradients),
        }
        try:
            self._start(chain, settings, store_dir, segment_bytes, round_bytes, bool(yield_to_gradients))
        except BaseException:
            # Nothing half-made is left: the engine, its connections, the groups, the store.
            self._closed = True
            self._release()
            raise

    # -- set-up ---------------------------------------------------------------------------

    def _start(
        self,
        chain: dict,
        settings: dict,
        store_dir: Any,
        segment_bytes: int | None,
        round_bytes: int,
        yielding: bool,
    ) -> None:
        """The sampler and the record store where the data set's index is known, then the
        engine (which meets, links and agrees); a store-mode training rank without a source
        makes its sampler and store when the store's index comes."""
        if self.mode == "peer" and self._source is None:
            raise ValueError(f'mode="peer" needs the records on every rank (rank {self.rank} has none)')
        if self.is_store and self._source is None:
            raise ValueError(f"the store (rank {self.rank}) needs the records")
        directory = None if store_dir is None else os.path.join(store_dir, f"rank-{self.rank}")
        trainers = len(self._trainers)
        place = self._trainers.index(self.rank) if not self.is_store else 0
        opened = _Opened(chain, trainers, place, directory)
        hooks: dict = {}
        store_error = None
        if self._source is not None:
            offsets = self._source.offsets
            self._sampler = CodedShuffleSampler(len(offsets) - 1, num_replicas=trainers, rank=place, **chain)
            try:
                self._store = RecordStore(offsets, directory, expect_bytes=self._expect(offsets, chain))
            except OSError as e:
                # Every rank learns of it at the start-up agreement and fails with it: meanwhile
                # the engine has a store of no records outside the full file system.
                store_error = str(e)
                self._store = RecordStore(offsets, tempfile.mkdtemp(prefix="ubershuffle-unused-"))
            # No closure over self: the engine's threads hold these until it closes, and a
            # cycle through Rust would keep this object (and its process groups) alive.
            hooks["load"] = functools.partial(self._source.load, self._store)
            # A source Rust can read (files, a local blob) is read by the engine off the GIL.
            hooks["reader"] = self._source._reader()
            hooks["content"] = functools.partial(content_digest, self._source, offsets, chain["seed"])
        else:
            hooks["open_store"] = opened.open
        if self.mode == "store" and not self.is_store:
            hooks["state"] = (
                opened.state if self._source is None else functools.partial(_state_of, self._sampler)
            )
        if self.is_store:
            hooks["restore"] = functools.partial(_restore, self._sampler)
        self._plane = start_plane(
            self._ranks,
            self.rank,
            self.timeout,
            settings,
            self._store._core if self._source is not None else None,
            store_error=store_error,
            chunk_bytes=min(CHUNK_BYTES, round_bytes),
            yield_to_gradients=yielding,
            store_rank=self.source_rank,
            segment_bytes=segment_bytes or 0,
            round_bytes=round_bytes,
            link_rate=settings["link_gbps"] * 1e9 / 8,
            **hooks,
        )
        watcher = threading.Thread(
            target=_watch_failures, args=(self._plane,), name="ubershuffle-watch", daemon=True
        )
        watcher.start()
        # A group dropped without close() closes its plane (whose threads hold no reference to
        # the group).
        weakref.finalize(self, self._plane.close)
        self._plane.wait_agreed()
        if self._source is None:
            self._sampler, self._store = opened.sampler, opened.store
        self._gate.attach(self._plane)
        self.segment_bytes = segment_bytes
        """Bytes per segment of coded delivery (store mode; ``None``: the engine's default for
        the records)."""

    def _expect(self, offsets: np.ndarray, chain: dict) -> int:
        """What this rank's record store will hold at the most (checked against its file
        system's free space when it is made): the store, the whole data set; a training rank,
        its cache plus one batch of arrivals (a ``fraction`` of it under partial-local, none
        under local)."""
        if self.is_store:
            return int(offsets[-1])
        policy, fraction = chain["policy"], chain["fraction"]
        arrivals = 1.0
        if self.mode == "peer" and policy == "local":
            arrivals = 0.0
        elif self.mode == "peer" and policy == "partial-local":
            arrivals = 1.0 if fraction is None else float(fraction)
        batch = -(-(len(offsets) - 1) // len(self._trainers))
        return store_bytes_bound(offsets, self._target(), batch, arrivals)

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
        process group) and tells this rank's engine when a step's all-reduce is on the wire:
        the engine then lets through no records that would meet one, so the next epoch's
        records travel in the compute windows between the all-reduces. With
        ``yield_to_gradients=False`` the hook only times the all-reduces. Either way
        :meth:`figures` then says what the gradients and the delivery cost each other
        (``allreduce_step_seconds``, ``yield_seconds``). DDP takes one hook: pass yours as
        ``hook`` rather than registering it. Call it on every training rank, once, before the
        first step."""
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
        self._plane.training_waits(True)
        try:
            self._plane.wait_idle()
        finally:
            self._plane.training_waits(False)

    def figures(self, epoch: int) -> dict:
        """What epoch ``epoch``'s delivery moved and cost at this rank: ``bytes_sent`` and
        ``bytes_received`` (the bytes of the delivery's streams: records, coded packets,
        relayed pieces), ``record_bytes_received`` (the bytes of the records it lacked and
        received), ``records_received``, ``padding_bytes``, ``packets``, ``coded_packets``,
        ``source_records`` and ``source_bytes`` (read from the source), ``transfer_seconds``
        (the delivery, in the background or not), ``exposed_seconds`` (what :meth:`set_epoch`
        waited), ``held_records``, ``held_bytes`` (what the rank holds for the epoch),
        ``peak_held_bytes`` (what it held when the delivery ended, before it let go of the
        records the epoch no longer needs: the most it holds), ``control_bytes_sent`` and
        ``control_bytes_received`` (every message but records, so far) and ``kind``
        (``"step"``: along the chain; ``"catch-up"``: a start, a resume, a jump). A delivery
        that ended at :meth:`close` is counted too.

        A store-mode step also says, at a training rank, ``answer_wait_seconds`` (from its
        request to the store's answer), ``decode_seconds``, ``round_bytes_received`` (the
        rounds' bytes) and ``part_bytes`` (its part of the plan); at the store (:meth:`serve`'s
        figures), ``request_wait_seconds``, ``plan_seconds`` (what the delivery waited for its
        plan once every rank had asked), ``plan_ahead_seconds`` (the planner's own time, ahead
        of the requests), ``sent`` (``"whole"``: records unencoded, as a catch-up and an
        uncoded plan send them, ``records_sent`` of them, in one round of unicasts:
        ``round_store_bytes`` holds each training rank's bytes; ``"coded"``: the plan's
        packets) and,
        coded, ``encode_seconds``, ``part_bytes``, the plan's ``packets``,
        ``coded_packets``, ``uncoded_packets``, ``data_bytes``, ``padding_bytes``,
        ``segment_bytes`` and ``made_by``, how the packets travelled (``unicast_packets`` and
        ``unicast_bytes``: to one rank; ``multicast_packets`` and ``multicast_bytes``: in pieces
        among the ranks that decode them; ``unneeded_packets``: not sent) and per round the
        bytes to each training rank (``round_store_bytes``) and of the relay from rank ``i`` to
        rank ``j`` (``round_relay_bytes``).

        After :meth:`yield_to`, a training rank's figures of epoch ``e`` also hold the gradient
        all-reduces of epoch ``e - 1``, the epoch this delivery ran behind:
        ``allreduce_step_seconds`` (per step, from its first bucket's hook call to its last
        bucket's completion), ``allreduce_step_during_delivery`` (whether the delivery was in
        flight when the step's all-reduce began), ``allreduce_steps``, ``allreduce_seconds``
        (their sum), ``yield_seconds`` (what the delivery was held for them), ``yields`` (how
        often it was held), ``delivery_posts`` (its grants and sends) and
        ``posts_during_allreduce`` (those made while an all-reduce was in flight: none when
        yielding)."""
        if epoch not in self._figures:
            raise KeyError(f"no figures for epoch {epoch} at rank {self.rank}")
        return dict(self._figures[epoch])

    def set_epoch(self, epoch: int) -> None:
        """Makes ``epoch``'s records local, then starts delivering the next epoch's in the
        background. Call it at the start of every epoch, as ``DistributedSampler.set_epoch``,
        on every training rank. It waits as long as the ranks it waits on are alive, and raises
        :class:`ShuffleTimeout` naming one that died or froze, :class:`PeerClosed`,
        :class:`PeerFailed` or :class:`ShuffleError` when a peer closed, failed or broke off,
        or :class:`ShuffleClosed` when the group is closed meanwhile (from another thread)."""
        self._check_open()
        if self.is_store:
            raise RuntimeError("the store rank serves (call serve()); it has no epochs of its own")
        if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)):
            raise TypeError(f"epoch must be an int, got {type(epoch).__name__}")
        epoch = int(epoch)
        start = time.perf_counter()
        self._sampler.set_epoch(epoch)
        figures = self._plane.set_epoch(self._sampler._core)
        figures["exposed_seconds"] = time.perf_counter() - start
        self._figures[epoch] = figures

    def serve(self) -> list:
        """The store's loop (store mode, at ``source_rank``): serves the training ranks'
        requests until they all :meth:`close` (or this group is closed from another thread);
        returns the figures of every epoch served. It waits for requests as long as the
        training ranks are alive, however long an epoch trains, and raises
        :class:`ShuffleTimeout` naming a training rank that died or froze, or the error of one
        that failed."""
        self._check_open()
        if not self.is_store:
            raise RuntimeError("serve() runs at the store rank (source_rank) of mode='store'")
        try:
            served = self._plane.serve()
        finally:
            self.close()
        for figures in served:
            self._figures[int(figures["epoch"])] = figures
        return served

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
        self._check_open()
        if not isinstance(state, dict) or state.get("version") != 1 or "sampler" not in state:
            raise ValueError("state must be a dict from ShuffleGroup.state_dict()")
        if state.get("mode") != self.mode:
            raise ValueError(f"the state is of mode={state.get('mode')!r}, this group's is {self.mode!r}")
        if self.is_store:
            return  # the store takes the training ranks' state when they catch up
        self._sampler.load_state_dict(state["sampler"])

    def close(self) -> None:
        """Ends the plane, from any thread: every peer is told, a :meth:`set_epoch` waiting in
        another thread raises :class:`ShuffleClosed`, the connections end, the process groups
        this object made are released and the record store is closed (a temporary one
        removed). A delivery no one asked for is dropped (its figures are kept when it had
        ended). Every call after it raises."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._release()

    def _release(self) -> None:
        """Releases what this object made: the engine, the process groups, the record store."""
        if self._plane is not None:
            for epoch, figures in self._plane.close():
                self._figures.setdefault(epoch, figures)
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
        held = len(self.held()) if hasattr(self, "_store") else 0
        return f"ShuffleGroup(mode={self.mode!r}, {role} {self.rank} of {self.world}, {held} records held)"

    # -- internals ------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"the ShuffleGroup of rank {self.rank} is closed")

    def _target(self) -> np.ndarray:
        """This rank's target this epoch (its cache)."""
        return self._sampler._core.targets()[self._trainers.index(self.rank)]

    def _delivery_in_flight(self) -> bool:
        """Whether a delivery is in flight now (for tests)."""
        return not self._plane.is_idle()


def _state_of(sampler: CodedShuffleSampler) -> bytes:
    """The sampler's state as bytes."""
    return state_bytes(sampler.state_dict())


def _restore(sampler: CodedShuffleSampler, state: bytes, epoch: int) -> Any:
    """The store's chain: ``sampler`` loaded with a training rank's ``state`` and moved to
    ``epoch``; returns its core."""
    sampler.load_state_dict(state_from(state))
    sampler.set_epoch(epoch)
    return sampler._core


__all__ = ["ShuffleClosed", "ShuffleGroup"]
