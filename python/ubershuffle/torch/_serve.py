"""The store's side of store mode: it answers the training ranks' requests."""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

import numpy as np
import torch

from .. import _native
from ._link import CONTROL_TAG, ShuffleError
from ._protocol import CODED, CONTROL_LEN, FULFIL, STOP, WHOLE, state_from
from ._watch import PeerClosed, ShuffleClosed, log

ROUNDS_IN_FLIGHT = 2
"""Rounds of a coded delivery the store has posted at once (as many as a training rank posts
receives ahead: :data:`ubershuffle.torch._group.ROUNDS_AHEAD`)."""


class Ahead:
    """The store's plan of the next step's coded delivery, made on a thread while the step
    before it travels and the training ranks train (the planner runs without the GIL), so that
    their request finds it ready. ``now`` is a sampler core of the store's own that nothing else
    moves; the plan is used only if the request comes for ``epoch`` from the same chain."""

    def __init__(self, epoch: int, now: Any, store: Any, segment_bytes: int, round_bytes: int) -> None:
        self.epoch = epoch
        self.digest = int(now.digest())
        self.sender: Any = None
        self.error: BaseException | None = None
        self.seconds = 0.0
        """The planner's own wall time."""
        self.thread = threading.Thread(
            target=self._run,
            args=(now, store, segment_bytes, round_bytes),
            name=f"ubershuffle-plan-{epoch}",
            daemon=True,
        )
        self.thread.start()

    def _run(self, now: Any, store: Any, segment_bytes: int, round_bytes: int) -> None:
        start = time.perf_counter()
        try:
            self.sender = _native.CodedSendCore(now, store, segment_bytes, round_bytes)
        except BaseException as e:  # noqa: BLE001 (the step plans again, and raises there)
            self.error = e
        self.seconds = time.perf_counter() - start

    def take(self, epoch: int, now: Any) -> Any:
        """The plan if it is the one ``epoch`` needs from ``now`` (waiting for it), else
        ``None``."""
        self.thread.join()
        if self.error is not None or epoch != self.epoch or int(now.digest()) != self.digest:
            return None
        return self.sender


class StoreSide:
    """The store's loop, a part of :class:`ubershuffle.torch.ShuffleGroup`."""

    _link: Any
    _sampler: Any
    _store: Any
    _trainers: list
    _figures: dict
    _source: Any
    _source_reads: tuple = (0, 0)
    """Records and bytes read from the source since the request being served began."""
    is_store: bool
    rank: int
    segment_bytes: int
    _round_bytes: int
    _ahead: Ahead | None = None

    def serve(self) -> list:
        """The store's loop (store mode, at ``source_rank``): serves the training ranks'
        requests, in whatever order they come, until they all :meth:`close` (or this group is
        closed from another thread); returns the figures of every epoch served. It waits for
        requests as long as the training ranks are alive, however long an epoch trains, and
        raises :class:`ShuffleTimeout` naming a training rank that died or froze."""
        with self._busy:
            self._check_open()
            if not self.is_store:
                raise RuntimeError("serve() runs at the store rank (source_rank) of mode='store'")
            served: list = []
            try:
                self._serve_loop(served)
            except (ShuffleClosed, PeerClosed) as e:
                # Closed here, or a training rank closed: the job is over.
                log.info("ubershuffle: the store of rank %d stops serving: %s", self.rank, e)
            finally:
                if self._ahead is not None:
                    self._ahead.thread.join()
                    self._ahead = None
                self.close()
            return served

    def _serve_loop(self, served: list) -> None:
        while True:
            asked = time.perf_counter()
            requests = self._requests()
            request_wait = time.perf_counter() - asked
            ops = {int(v[0]) for v in requests.values()}
            epochs = {int(v[1]) for v in requests.values()}
            if ops == {STOP}:
                return
            if len(ops) != 1 or len(epochs) != 1:
                raise ShuffleError(
                    f"the training ranks disagree: requests {sorted(ops)} for epochs {sorted(epochs)}"
                )
            op, epoch = ops.pop(), epochs.pop()
            self._source_reads = (0, 0)
            start, cpu = time.perf_counter(), time.process_time()
            sent0 = self._link.bytes_sent
            timers = dict(self._link.seconds)
            figures = (
                self._serve_catch_up(epoch, requests) if op == FULFIL else self._serve_step(epoch, requests)
            )
            figures.update(
                epoch=epoch,
                transfer_seconds=time.perf_counter() - start,
                cpu_seconds=time.process_time() - cpu,
                bytes_sent=self._link.bytes_sent - sent0,
                source_records=self._source_reads[0],
                source_bytes=self._source_reads[1],
                request_wait_seconds=request_wait,
                **self._link.seconds_since(timers),
            )
            self._figures[epoch] = figures
            served.append(figures)

    def _ensure_held(self, ids: Any) -> None:
        """Reads from the source the records of ``ids`` that the store does not hold yet, just
        before a delivery sends them: the store reads lazily, only what its deliveries need
        (with ``store_dir`` it fills its store on disk as it goes, and a restarted store reads
        only what it lacks). Counted in the served epoch's ``source_records`` and
        ``source_bytes``."""
        missing = self._store.missing(ids)
        if not len(missing):
            return
        if self._source is None:
            raise ShuffleError(f"the store (rank {self.rank}) has no source to read records from")
        read = self._source.load(self._store, missing)
        records, nbytes = self._source_reads
        self._source_reads = (records + len(missing), nbytes + int(read))

    def _requests(self) -> dict:
        """Every training rank's next request, received in whatever order they come (all
        posted at once)."""
        return self._link.exchange(
            {},
            {r: (CONTROL_LEN, torch.int64) for r in self._trainers},
            "the training ranks' requests",
            CONTROL_TAG,
        )

    def _check_digests(self, requests: dict, epoch: int) -> None:
        mine = int(self._sampler._core.digest()) & (2**63 - 1)
        for r, values in requests.items():
            if int(values[2]) != mine:
                raise ShuffleError(
                    f"rank {r}'s epoch chain differs from the store's at epoch {epoch} "
                    "(the same seed, policy, fraction, extra_cache or alpha and scheme on every rank?)"
                )

    def _send_rounds(self, sender: Any, epoch: int, planning: float, plan_ahead: float) -> dict:
        """The store's side of a coded step: each training rank its part of the plan and its
        routes, then the rounds, each training rank's message sent to it alone. Up to
        :data:`ROUNDS_IN_FLIGHT` rounds are posted at once, and the next is encoded while they
        travel, so that the uplink does not idle between rounds."""
        link = self._link
        parts = {r: sender.part_for(place) for place, r in enumerate(self._trainers)}
        plan_seconds = time.perf_counter() - planning
        self._ensure_held(sender.records())
        link.exchange(
            {r: np.asarray([CODED, len(p)], dtype=np.int64) for r, p in parts.items()},
            {},
            f"the answer for epoch {epoch}",
        )
        link.exchange(parts, {}, f"the plan of epoch {epoch}")
        encode_seconds = scatter = 0.0
        in_flight: collections.deque = collections.deque()
        store_bytes, relay_bytes = [], []
        for k in range(sender.rounds):
            encoding = time.perf_counter()
            sizes = sender.round_sizes(k)
            data = np.empty(int(sum(sizes)), dtype=np.uint8)
            sender.encode_into(k, data)
            encode_seconds += time.perf_counter() - encoding
            store_bytes.append([int(x) for x in sizes])
            relay_bytes.append(sender.relay_matrix(k))
            ends = np.cumsum(sizes)
            messages = {r: data[e - n : e] for r, n, e in zip(self._trainers, sizes, ends)}
            in_flight.append(link.isends(messages, f"round {k} of epoch {epoch}"))
            scatter += link.drain(in_flight, ROUNDS_IN_FLIGHT - 1, f"round {k} of epoch {epoch}")
        scatter += link.drain(in_flight, 0, f"the last rounds of epoch {epoch}")
        link.tally("scatter_seconds", scatter)
        figures = dict(sender.figures())
        figures.update(
            plan_seconds=plan_seconds,
            plan_ahead_seconds=plan_ahead,
            encode_seconds=encode_seconds,
            part_bytes=sum(len(p) for p in parts.values()),
            round_store_bytes=store_bytes,
            round_relay_bytes=relay_bytes,
        )
        return figures

    def _serve_catch_up(self, epoch: int, requests: dict) -> dict:
        link = self._link
        first = self._trainers[0]
        state_len = int(requests[first][3])
        if state_len:
            state = link.exchange({}, {first: (state_len, torch.uint8)}, "the sampler's state")[first]
            self._sampler.load_state_dict(state_from(state.tobytes()))
        if self._ahead is not None:
            self._ahead.thread.join()
            self._ahead = None
        self._sampler.set_epoch(epoch)
        self._check_digests(requests, epoch)
        core = self._sampler._core
        if not core.is_remainder:
            # The live chain: every path that moves it (a step, a catch-up) joins this first.
            # Planned while this catch-up's records travel.
            self._ahead = Ahead(epoch + 1, core, self._store._core, self.segment_bytes, self._round_bytes)
        targets = core.targets()
        missing = {}
        for place, r in enumerate(self._trainers):
            held = link.exchange({}, {r: (int(requests[r][4]), torch.int64)}, "what it holds")[r]
            missing[place] = np.setdiff1d(targets[place], held)
        figures = self._run_transfer(self._from_store(missing), f"catching up to epoch {epoch}")
        figures.update(kind="catch-up")
        return figures

    def _serve_step(self, epoch: int, requests: dict) -> dict:
        now = self._sampler._core
        if now.epoch + 1 != epoch:
            raise ShuffleError(
                f"the training ranks ask for epoch {epoch}, the store stands at epoch {now.epoch}"
            )
        self._check_digests(requests, epoch - 1)
        link = self._link
        nxt = now.stepped()
        # After a change of world size the next epoch starts a new chain: nothing is cached
        # for it, so its records are sent whole.
        planning = time.perf_counter()
        ahead, self._ahead = self._ahead, None
        sender = None
        plan_ahead = 0.0
        if not now.is_remainder:
            sender = ahead.take(epoch, now) if ahead is not None else None
            if sender is None:
                sender = _native.CodedSendCore(now, self._store._core, self.segment_bytes, self._round_bytes)
            else:
                plan_ahead = ahead.seconds
        if not nxt.is_remainder:
            # nxt is the store's own copy of the chain at ``epoch``: nothing else moves it. The
            # step after this one is planned while this one's records travel and the ranks
            # train, so that its request finds the plan made.
            self._ahead = Ahead(epoch + 1, nxt, self._store._core, self.segment_bytes, self._round_bytes)
        if sender is None:
            for r in self._trainers:
                link.send_ints(r, [WHOLE, 0], f"the answer for epoch {epoch}")
            was, will = now.targets(), nxt.targets()
            missing = {place: np.setdiff1d(will[place], was[place]) for place in range(len(self._trainers))}
            figures = self._run_transfer(self._from_store(missing), f"epoch {epoch}'s delivery")
        else:
            figures = self._send_rounds(sender, epoch, planning, plan_ahead)
        self._sampler.set_epoch(epoch)
        figures.update(kind="step")
        return figures
