"""The plane yields to DDP's gradients: a communication hook reports each step's all-reduce
to the engine (from its first bucket's call to its last bucket's completion, and its bytes on
the wire), and the engine grants and sends no record that would meet one (its rule:
``ubershuffle_plane``'s ``Pace``: not while an all-reduce is in flight, and not in the last
moments before the next is due, what it would let through then still landing when it begins,
at the link's rate as the all-reduces measure it). The engine holds its senders back itself,
through the credit each receiver grants, since TCP pushes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class GradientGate:
    """Between DDP's hook and the engine: the hook reports each step's all-reduce (from its
    first bucket's call to its last bucket's completion) to the ``plane`` attached."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_flight = 0
        self._step = False
        self._step_bytes = 0.0
        self._plane: Any = None

    def attach(self, plane: Any) -> None:
        """Reports every step's all-reduce to ``plane`` (a ``PlaneCore``)."""
        self._plane = plane

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
        with self._lock:
            self._step_bytes += wire_bytes
            if self._in_flight == 0 and not self._step:
                self._step = True
                if self._plane is not None:
                    self._plane.allreduce_began()
            self._in_flight += 1

    def _leave(self, last: bool) -> None:
        with self._lock:
            self._in_flight -= 1
            if last and self._step:
                self._step = False
                if self._plane is not None:
                    self._plane.allreduce_ended(self._step_bytes)
                self._step_bytes = 0.0
