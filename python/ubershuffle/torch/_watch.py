"""Liveness: every rank of a ShuffleGroup beats, and watches the others' beats, through the
job's key-value store (torchrun's TCPStore), so that a wait on a peer lasts as long as the peer
is alive, however long it trains, and ends naming the peer once it dies.

The decisions are the Rust side's (:class:`ubershuffle._native.LivenessCore`): a rank is alive
while its heartbeat counter changes; silent for ``timeout`` seconds, it died or froze. This
module only writes this rank's counter and reads the others', every ``period`` seconds (a tenth
of ``timeout``, within 50 ms and 30 s), on a daemon thread. A rank that dies is named by every
rank that watches it within ``timeout + 2 * period`` seconds of its last beat (a watcher reads
the last beat up to a period after it was written, and asks for a verdict every
:data:`SLICE_SECONDS`; the second period is a margin for a busy machine): at once by the ones
waiting on it (their waits raise), and in the log of the others (their next call raises).
A rank whose plane fails gives up (:meth:`Watch.give_up`): it writes why beside its beat and
ends its beat as a close does, so that the ranks waiting on it raise :class:`PeerFailed` within
a period, naming the first failure, rather than whatever their broken connection says.

Cost: each rank writes one key and looks up every rank's key twice per period (a ``check``,
then one ``multi_get``), so the store answers ``2 * world * world`` lookups per period: at 1000
ranks and the default timeout (300 s, a period of 30 s) about 67 000 a second.

Waits themselves run on a thread of their own (:class:`Waiter`): gloo cannot time a wait out
and go on (a timed-out wait closes the connection), so a rank never times a wait out; it
watches its peer's liveness while another thread waits.
"""

from __future__ import annotations

import datetime
import logging
import os
import queue
import threading
import time
from typing import Any

from .. import _native

log = logging.getLogger("ubershuffle.torch")

NO_WAIT_LIMIT = datetime.timedelta(days=365)
"""The plane's own limit on a wait: none to speak of, since the ranks' liveness bounds every
wait and a 2-hour epoch must not end one."""


SLICE_SECONDS = 0.05
"""How often the watch asks whether a rank it watches has been silent too long (it reads the
beats every period)."""
REASON_CHARS = 2000
"""At most this much of a rank's reason for giving up goes into the job's store."""


ShuffleTimeout = _native.ShuffleTimeout
ShuffleError = _native.ShuffleError
PeerClosed = _native.PeerClosed
PeerFailed = _native.PeerFailed
ShuffleClosed = _native.ShuffleClosed
"""The plane's errors are the engine's (``ubershuffle._native``), raised by both of its paths."""


class Watch:
    """This rank's heartbeat and its view of every rank's (see the module's docs).

    ``store`` is the job's key-value store; ``prefix`` names this group's keys, the same on
    every rank and new at every attempt of a torchrun job."""

    def __init__(self, store: Any, prefix: str, world: int, rank: int, timeout: float) -> None:
        self.rank = rank
        self.timeout = float(timeout)
        self._store = store
        self._keys = [f"{prefix}/beat/{r}" for r in range(world)]
        self._why = [f"{prefix}/why/{r}" for r in range(world)]
        self._core = _native.LivenessCore(world, self.timeout, time.monotonic())
        self.period: float = self._core.period
        """Seconds between two heartbeats."""
        self._lock = threading.Lock()
        self._count = 0
        self.failure: BaseException | None = None
        """The first peer seen dead or closed while this rank was not waiting on it."""
        self._stop = threading.Event()
        self._store.set(self._keys[rank], _native.LivenessCore.beat_value(0))
        self.last_beat = time.time()
        """When (wall clock) this rank last wrote its heartbeat; written under :attr:`lock`."""
        self._thread = threading.Thread(target=self._run, name="ubershuffle-heartbeat", daemon=True)
        self._thread.start()

    @property
    def lock(self) -> threading.Lock:
        """Held while this rank writes its heartbeat (a test holds it to know its last beat)."""
        return self._lock

    def _run(self) -> None:
        pid = os.getpid()
        due = time.monotonic() + self.period
        while not self._stop.wait(SLICE_SECONDS):
            if os.getpid() != pid:
                return  # a forked copy (a DataLoader worker) does not beat for the rank
            now = time.monotonic()
            if now >= due:
                due = max(due + self.period, now)
                try:
                    self._beat()
                except Exception as e:  # noqa: BLE001 (the store went away: the job is ending)
                    if not self._stop.is_set():
                        log.warning("ubershuffle: rank %d cannot reach the job's store: %s", self.rank, e)
                    return
            with self._lock:
                others = [r for r in range(len(self._keys)) if r != self.rank]
                verdict = self._core.silent(others, time.monotonic())
            if verdict is not None and self.failure is None:
                self.failure = ShuffleTimeout(self._silent(verdict, "watching it"))
                log.error("ubershuffle: %s", self.failure)

    def _beat(self) -> None:
        """Writes this rank's next heartbeat and reads every rank's."""
        self._count += 1
        with self._lock:
            if self._stop.is_set():
                return  # closed or given up meanwhile: its last word stays
            self._store.set(self._keys[self.rank], _native.LivenessCore.beat_value(self._count))
            self.last_beat = time.time()
        self.refresh()

    def refresh(self) -> None:
        """Reads every rank's heartbeat now (the thread does it every period; a rank whose
        peer broke its connection does it at once, to learn whether the peer closed)."""
        with self._lock:
            present = self._store.check(self._keys)
            values = self._store.multi_get(self._keys) if present else self._each()
            self._core.observe(values, time.monotonic())

    def _each(self) -> list:
        return [self._store.get(k) if self._store.check([k]) else None for k in self._keys]

    def _silent(self, verdict: tuple, what: str) -> str:
        _, peer, seconds = verdict
        return (
            f"rank {peer} has not been heard from for {seconds:.1f} s (it died or froze; "
            f"timeout {self.timeout:g} s): rank {self.rank} was {what}"
        )

    def check(self, peers: list, what: str) -> None:
        """Raises if one of ``peers`` closed its group or died; ``what`` says what this rank
        was doing."""
        with self._lock:
            verdict = self._core.verdict(list(peers), time.monotonic())
        if verdict is None:
            return
        if verdict[0] == "closed":
            peer = verdict[1]
            why = self._reason(peer)
            if why is not None:
                raise PeerFailed(f"rank {peer} stopped while rank {self.rank} was {what}, because {why}")
            raise PeerClosed(f"rank {peer} closed its ShuffleGroup while rank {self.rank} was {what}")
        raise ShuffleTimeout(self._silent(verdict, what))

    def _reason(self, peer: int) -> str | None:
        """Why ``peer`` gave up (:meth:`give_up`), or ``None`` (it closed, or the job's store
        cannot say); one line of at most :data:`REASON_CHARS`, whatever the peer wrote."""
        try:
            key = self._why[peer]
            if not self._store.check([key]):
                return None
            text = self._store.get(key)[: 4 * REASON_CHARS].decode("utf-8", "replace")
        except Exception:  # noqa: BLE001 (the job's store is gone: the close is all there is to say)
            return None
        return " ".join(text.split())[:REASON_CHARS]

    def give_up(self, error: BaseException) -> None:
        """Tells the other ranks that this one stopped, and why (``error``, which this rank
        raises): its heartbeat ends as at :meth:`close`, so that a rank waiting on it raises
        :class:`PeerFailed` within a beat, naming the first failure, rather than whatever
        its broken connection says. Once is enough: later calls do nothing."""
        if self._stop.is_set():
            return
        self._stop.set()
        reason = " ".join(str(error).split())[:REASON_CHARS] or type(error).__name__
        try:
            with self._lock:
                self._store.set(self._why[self.rank], reason)
                self._store.set(self._keys[self.rank], "closed")
        except Exception:  # noqa: BLE001 (the job's store is gone: nobody is left to tell)
            pass

    def close(self) -> None:
        """Stops the heartbeat (its thread ends before this returns, so no call of it into
        the job's store outlives the group) and tells the other ranks that this one closed."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(5.0)
        try:
            with self._lock:
                self._store.set(self._keys[self.rank], "closed")
        except Exception:  # noqa: BLE001 (the job's store is gone: nobody is left to tell)
            pass


class Job:
    """Posted operations that :class:`Waiter` waits on; ``done`` is set when all completed or
    one failed (``error``: its place and the exception)."""

    def __init__(self, works: list) -> None:
        self.works = works
        self.done = threading.Event()
        self.error: tuple | None = None


class Waiter:
    """Waits on posted operations on a daemon thread of its own, one job at a time, so that
    the thread that posted them can watch its peers meanwhile (see the module's docs)."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="ubershuffle-wait", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            for i, work in enumerate(job.works):
                try:
                    work.wait(timeout=NO_WAIT_LIMIT)
                except BaseException as e:  # noqa: BLE001 (raised again by the poster)
                    job.error = (i, e)
                    break
            job.done.set()

    def submit(self, works: list) -> Job:
        """Queues ``works`` to be waited on; returns their job."""
        job = Job(works)
        self._jobs.put(job)
        return job

    def close(self) -> None:
        """Ends the thread once the jobs queued before are done (a job stuck on a dead peer
        keeps it: it is a daemon)."""
        self._jobs.put(None)

    def join(self, seconds: float) -> None:
        """Waits at most ``seconds`` for the thread to end."""
        self._thread.join(seconds)
