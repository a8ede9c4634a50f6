"""The plane yields to DDP's gradients: a communication hook reports each step's all-reduce,
and the delivery thread asks before each round whether it may post (the rule is Rust's,
:class:`ubershuffle._native.PaceCore`: not while an all-reduce is in flight, and not in the last
moments before the next one is due, what it would post then still landing when it begins, at
the link's rate as the all-reduces measure it).

Why posting is the lever: gloo (and NCCL) move a point-to-point message only once its receiver
has posted the receive (gloo's sender waits for the receiver's "ready" notice), so a receiver
that posts nothing while its gradients travel stops the records coming to it within what it
had posted already. A rate share would need the links' rate, which the plane does not know, and
would slow the delivery in the compute windows too.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from .. import _native

YIELD_ROUND_BYTES = 128 << 10
"""Bytes per peer pair of a round of a peer-mode delivery while yielding: a round cannot be
withdrawn once posted, so it is what an all-reduce may meet on the links (a round of 128 KiB
to each of 3 peers takes 31 ms at 100 Mbit/s)."""
SLICE_SECONDS = 0.05
"""How often a waiting delivery looks again (and at its closing)."""


class GradientGate:
    """Between DDP's hook and the plane's delivery thread: the hook reports each step's
    all-reduce (from its first bucket's call to its last bucket's completion), the delivery
    posts each round through :meth:`posting`. With ``enabled`` false it only times the
    all-reduces (the switch's "off")."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = bool(enabled)
        self._cond = threading.Condition()
        self._pace = _native.PaceCore()
        self._in_flight = 0
        self._step_start: float | None = None
        self._delivering = False
        self._step_delivering = False
        self._step_bytes = 0.0
        self._steps: list = []
        """Per step since the last :meth:`take`: (wall start, seconds, a delivery in flight)."""
        self._waited = 0.0
        self._yields = 0
        self._posts = 0
        self._posts_during = 0
        self._plane: Any = None

    def attach(self, plane: Any) -> None:
        """Reports every step's all-reduce to ``plane`` (the engine, which holds its own
        deliveries and keeps their figures) rather than keeping them here."""
        self._plane = plane

    # -- the hook's side -------------------------------------------------------------------

    def wrap(self, hook: Callable, state: Any, world: int) -> Callable:
        """The DDP communication hook that runs ``hook(state, bucket)`` inside the gate, on a
        group of ``world`` ranks (a ring all-reduce sends and receives ``2 (world - 1) / world``
        of a bucket at each rank)."""
        share = 2.0 * (world - 1) / world if world > 1 else 0.0

        # No annotations: DDP checks them against its own types, and this module's are strings.
        def gated(_state, bucket):  # noqa: ANN001, ANN202
            buffer = bucket.buffer()
            self._enter(share * buffer.numel() * buffer.element_size())
            try:
                future = hook(state, bucket)
            except BaseException:
                self._leave(False)
                raise
            last = bool(bucket.is_last())

            def done(f: Any) -> Any:
                self._leave(last)
                return f.value()

            return future.then(done)

        return gated

    def _enter(self, wire_bytes: float) -> None:
        with self._cond:
            self._step_bytes += wire_bytes
            if self._in_flight == 0 and self._step_start is None:
                self._step_start = time.time()
                self._step_delivering = self._delivering
                self._pace.began(time.monotonic())
                if self._plane is not None:
                    self._plane.allreduce_began()
            self._in_flight += 1

    def _leave(self, last: bool) -> None:
        with self._cond:
            self._in_flight -= 1
            if last and self._step_start is not None:
                if self._plane is None:
                    self._steps.append(
                        (self._step_start, time.time() - self._step_start, self._step_delivering)
                    )
                self._step_start = None
                self._pace.ended(time.monotonic(), self._step_bytes)
                if self._plane is not None:
                    self._plane.allreduce_ended(self._step_bytes)
                self._step_bytes = 0.0
            if self._in_flight == 0:
                self._cond.notify_all()

    # -- the delivery thread's side --------------------------------------------------------

    def delivering(self, on: bool) -> None:
        """Marks whether a background delivery is in flight (for the steps' record)."""
        with self._cond:
            self._delivering = on

    def training_waits(self, on: bool) -> None:
        """Marks whether the training thread waits for the delivery (nothing is held then)."""
        with self._cond:
            self._pace.set_training_waits(on)
            self._cond.notify_all()

    @contextlib.contextmanager
    def posting(self, cancel: threading.Event, in_flight: float = 0.0) -> Iterator[None]:
        """Returns once the delivery may post, ``in_flight`` bytes then posted and not landed
        at this rank (at once when not ``enabled``), or when ``cancel`` is set (the caller's
        post then raises); then runs the block (the delivery's post) with the gate shut to the
        hook: no all-reduce begins between the verdict and the post, so a
        yielding delivery never posts while one is in flight. Counts the posts, and those
        made while an all-reduce was in flight (none when ``enabled``)."""
        with self._cond:
            self._hold(cancel, in_flight)
            self._posts += 1
            if self._in_flight:
                self._posts_during += 1
            yield

    def _hold(self, cancel: threading.Event, in_flight: float) -> None:
        """:meth:`posting`'s wait, the condition's lock held by the caller."""
        if not self.enabled:
            return
        if self._pace.hold(time.monotonic(), in_flight) == 0.0:
            return
        start = time.perf_counter()
        self._yields += 1
        while not cancel.is_set():
            hold = self._pace.hold(time.monotonic(), in_flight)
            if hold == 0.0:
                break
            self._cond.wait(SLICE_SECONDS if hold is None else min(hold, SLICE_SECONDS))
        self._waited += time.perf_counter() - start

    def take(self) -> dict:
        """The figures since the last call: ``allreduce_step_seconds`` (per step, its
        all-reduces from the first bucket's hook to the last bucket's completion),
        ``allreduce_step_during_delivery`` (whether a delivery was in flight when it began),
        ``allreduce_steps``, ``allreduce_seconds`` (their sum), ``yield_seconds`` (what the
        delivery thread waited at the gate), ``yields`` (how often it waited),
        ``delivery_posts`` (the posts of the delivery's rounds that passed the gate) and
        ``posts_during_allreduce`` (those made while an all-reduce was in flight: none when
        yielding)."""
        with self._cond:
            steps, self._steps = self._steps, []
            waited, self._waited = self._waited, 0.0
            yields, self._yields = self._yields, 0
            posts, self._posts = self._posts, 0
            during, self._posts_during = self._posts_during, 0
        return {
            "allreduce_step_seconds": [s for _, s, _ in steps],
            "allreduce_step_during_delivery": [d for _, _, d in steps],
            "allreduce_steps": len(steps),
            "allreduce_seconds": float(sum(s for _, s, _ in steps)),
            "yield_seconds": waited,
            "yields": yields,
            "delivery_posts": posts,
            "posts_during_allreduce": during,
        }
