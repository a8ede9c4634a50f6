"""Point-to-point messages over the plane's process group, every wait watched.

All traffic of a :class:`~ubershuffle.torch.ShuffleGroup` goes through :class:`Link`: sends and
receives posted together (one ``batch_isend_irecv``, so a rank's uplink and downlink run at
once, and NCCL progresses them together), then waited on by a thread of the link's own while
the posting thread watches the peers' heartbeats (:mod:`._watch`): a wait lasts as long as its
peers are alive and ends naming the one that died (:class:`ShuffleTimeout`) or closed. With an
NCCL group the buffers travel as CUDA tensors on the rank's device (copied there and back); with
gloo they are CPU tensors sharing memory with numpy.
"""

from __future__ import annotations

import collections
import threading
import time
import warnings
from collections.abc import Mapping

import numpy as np
import torch
import torch.distributed as dist

from ._watch import ShuffleClosed, ShuffleError, ShuffleTimeout, Waiter, Watch

# Sent buffers are only read: a read-only view (the store's records) goes as it is, without
# torch's warning about tensors over non-writable memory (for this module's calls only).
warnings.filterwarnings("ignore", message="The given NumPy array is not writable", module=__name__)

DATA_TAG = 0
"""The tag of records and packets."""
CONTROL_TAG = 1
"""The tag of a training rank's requests to the store."""
SLICE_SECONDS = 0.05
"""How often a waiting rank looks at its peers' liveness and its own closing."""

__all__ = ["CONTROL_TAG", "DATA_TAG", "Link", "ShuffleClosed", "ShuffleError", "ShuffleTimeout"]


class Link:
    """This rank's messages to and from the other ranks of ``group`` (``ranks``: the group's
    global ranks in group-rank order)."""

    def __init__(
        self, group: dist.ProcessGroup, ranks: list, rank: int, watch: Watch, device: torch.device
    ) -> None:
        self.group = group
        self.ranks = list(ranks)
        self.rank = rank
        self.watch = watch
        self.device = device
        self._waiter = Waiter()
        self.progress = time.monotonic()
        """When an operation of this link last completed (its monotonic clock)."""
        self.cancel = threading.Event()
        """Set by :meth:`ShuffleGroup.close`: every wait in flight ends (raising
        :class:`ShuffleClosed`) and the link counts as broken if one did."""
        self.broken: BaseException | None = None
        """Why the link cannot be used any more (a wait abandoned on a dead peer or a close)."""
        self.bytes_sent = 0
        """Payload bytes this link has sent."""
        self.bytes_received = 0
        """Payload bytes this link has received."""
        self.seconds: dict = {}
        """Seconds spent, by what (``gloo_wait_seconds``: waiting on posted operations;
        ``scatter_seconds``: waiting for the store's messages; ``relay_seconds``: waiting for
        the relay among the training ranks), summed over the link's life; a delivery reports
        the difference."""

    def tally(self, key: str, seconds: float) -> None:
        """Adds ``seconds`` to ``self.seconds[key]``."""
        self.seconds[key] = self.seconds.get(key, 0.0) + seconds

    def _wire(self, array: np.ndarray) -> torch.Tensor:
        tensor = torch.from_numpy(np.ascontiguousarray(array))
        return tensor if self.device.type == "cpu" else tensor.to(self.device)

    def exchange(self, sends: Mapping, recvs: Mapping, what: str, tag: int = DATA_TAG) -> dict:
        """Sends ``sends[peer]`` (uint8 or int64 numpy arrays) and receives ``recvs[peer]``
        (``(nbytes_or_count, dtype)``) from every peer named, all at once; returns the received
        numpy arrays by peer. Empty messages are skipped on both ends."""
        buffers, posted = self.post_exchange(sends, recvs, what, tag)
        self.wait(posted, what)
        return self.received(buffers)

    def post_exchange(self, sends: Mapping, recvs: Mapping, what: str, tag: int = DATA_TAG) -> tuple:
        """:meth:`exchange`'s posts without its wait: ``(buffers, posted)``, ``posted`` for
        :meth:`wait`, then ``buffers`` for :meth:`received`."""
        ops, posted = [], []
        for peer, array in sends.items():
            if len(array):
                self.bytes_sent += int(array.nbytes)
                ops.append(
                    dist.P2POp(dist.isend, self._wire(array), group=self.group, tag=tag, group_peer=peer)
                )
                posted.append((peer, "sending"))
        buffers = {}
        for peer, (count, dtype) in recvs.items():
            buffer = torch.empty(int(count), dtype=dtype, device=self.device)
            buffers[peer] = buffer
            if count:
                ops.append(dist.P2POp(dist.irecv, buffer, group=self.group, tag=tag, group_peer=peer))
                posted.append((peer, "receiving"))
        return buffers, self.post(ops, posted, what)

    def received(self, buffers: Mapping) -> dict:
        """The numpy arrays of receives posted by :meth:`post_exchange` and waited on."""
        got = {peer: b.cpu().numpy() for peer, b in buffers.items()}
        self.bytes_received += sum(int(a.nbytes) for a in got.values())
        return got

    def run(self, ops: list, posted: list, what: str) -> None:
        """Posts ``ops`` (``dist.P2POp``s) together and waits for them; ``posted`` names each
        op's peer and what it does (``(peer, "sending")``)."""
        if not ops:
            return
        self.wait(self.post(ops, posted, what), what)

    def wait(self, posted: list, what: str, peers: list | None = None) -> None:
        """Waits for the posted operations (``((peer, doing), work)``) while their peers (or
        ``peers``) live; a failure names the peer. Nothing posted: nothing to wait for."""
        if not posted:
            return
        start = time.perf_counter()
        try:
            self._wait(posted, what, peers)
        finally:
            self.tally("gloo_wait_seconds", time.perf_counter() - start)

    def seconds_since(self, before: dict) -> dict:
        """What :attr:`seconds` gained since ``before`` (a copy taken earlier), every key
        present."""
        keys = ("gloo_wait_seconds", "scatter_seconds", "relay_seconds")
        return {k: self.seconds.get(k, 0.0) - before.get(k, 0.0) for k in keys}

    def check_usable(self, what: str) -> None:
        """Raises if the link is broken, a rank it watches died, or this rank is closing."""
        if self.broken is not None:
            raise ShuffleError(f"rank {self.rank} cannot go on {what}: {self.broken}") from None
        if self.watch.failure is not None:
            raise self._break(self.watch.failure)
        self._check([], what)

    def _check(self, peers: list, what: str) -> None:
        if self.cancel.is_set():
            # Whatever this rank was doing with its peers is abandoned half-way: the link can
            # no longer be trusted to be in step with them.
            self.broken = ShuffleClosed(f"rank {self.rank}'s ShuffleGroup was closed while it was {what}")
            raise self.broken
        self.watch.check(peers, what)

    def barrier(self, what: str, limit: float) -> None:
        """Waits until every rank of the group reached its barrier (gloo's, posted as one
        asynchronous collective and watched like any other wait), at most ``limit`` seconds
        (then :class:`ShuffleTimeout`, the link left broken)."""
        self.check_usable(what)
        others = [p for p in range(len(self.ranks)) if p != self.rank]
        try:
            work = dist.barrier(group=self.group, async_op=True)
        except Exception as e:  # noqa: BLE001 (a connection broke before: name who broke it)
            self._failed(e, None, "in a barrier", what, others)
        self._wait([((None, "in a barrier"), work)], what, others, time.monotonic() + limit)

    def _wait(
        self, posted: list, what: str, peers: list | None = None, deadline: float | None = None
    ) -> None:
        job = self._waiter.submit([work for _, work in posted])
        if peers is None:
            peers = sorted({peer for (peer, _), _ in posted})
        while not job.done.wait(SLICE_SECONDS):
            try:
                self._check(peers, what)
                if deadline is not None and time.monotonic() > deadline:
                    raise ShuffleTimeout(f"rank {self.rank} gave up {what}: the other ranks did not come")
            except BaseException as e:
                self._break(e)  # the waiter stays on the dead peer's operation
                raise
        self.progress = time.monotonic()
        if job.error is not None:
            i, e = job.error
            (peer, doing), _ = posted[i]
            self._failed(e, peer, doing, what, peers)

    def _failed(self, error: BaseException, peer: int | None, doing: str, what: str, peers: list) -> None:
        """Raises for an operation with ``peer`` (``None``: one of ``peers``, which is not
        known) that gloo failed, ``doing`` what for ``what``; the link is left broken.

        A peer that closed its group (and so its connections) is named as such. A failed
        connection to one known peer is named with it at once. With several peers and no
        knowing which one broke (gloo raises when an operation is posted on a connection that
        broke before, naming an address, not a rank), the rank waits for the liveness watch to
        name the one that died, within ``timeout + 2 * period`` of its last beat, as every other
        wait does; if none did, the error names them all."""
        try:
            self.watch.refresh()
            self.watch.check(peers, what)
            if peer is None and len(peers) > 1:
                deadline = time.monotonic() + self.watch.timeout + 2 * self.watch.period
                while time.monotonic() < deadline:
                    time.sleep(SLICE_SECONDS)
                    self._check(peers, what)
        except (ShuffleError, ShuffleTimeout) as e:
            self._break(e)
            raise
        except Exception:  # noqa: BLE001 (the job's store is gone too: report gloo's error)
            pass
        text = str(error).strip()
        first = text.splitlines()[0] if text else type(error).__name__
        if peer is None and len(peers) == 1:
            peer = peers[0]
        if peer is not None:
            party = f" with rank {peer}"
        else:
            party = " with one of ranks " + ", ".join(map(str, peers)) if peers else ""
        raise self._break(ShuffleError(f"rank {self.rank}, {doing} {what}{party}: {first}")) from None

    def _break(self, error: BaseException) -> BaseException:
        """Marks the link broken by ``error`` (which the caller raises) and, unless this rank
        closed it, tells the other ranks why (:meth:`Watch.give_up`); returns ``error``."""
        self.broken = error
        if not isinstance(error, ShuffleClosed):
            self.watch.give_up(error)
        return error

    def close(self) -> None:
        """Ends the link's waiting thread (after the jobs queued; one stuck on an abandoned
        operation stays, a daemon)."""
        self._waiter.close()
        if self.broken is None:
            self._waiter.join(1.0)

    def send_ints(self, peer: int, values: list, what: str, tag: int = DATA_TAG) -> None:
        """Sends a few int64 values to ``peer``."""
        self.exchange({peer: np.asarray(values, dtype=np.int64)}, {}, what, tag)

    def recv_ints(self, peer: int, count: int, what: str, tag: int = DATA_TAG) -> np.ndarray:
        """Receives ``count`` int64 values from ``peer``."""
        return self.exchange({}, {peer: (count, torch.int64)}, what, tag)[peer]

    def all_to_all(self, arrays: Mapping, what: str) -> dict:
        """Sends ``arrays[peer]`` (int64) to every other rank, each first told the length;
        returns what every other rank sent."""
        peers = [p for p in range(len(self.ranks)) if p != self.rank]
        lengths = self.exchange(
            {p: np.asarray([len(arrays[p])], dtype=np.int64) for p in peers},
            {p: (1, torch.int64) for p in peers},
            f"{what} (lengths)",
        )
        return self.exchange(
            {p: np.asarray(arrays[p], dtype=np.int64) for p in peers},
            {p: (int(lengths[p][0]), torch.int64) for p in peers},
            what,
        )

    def post(self, ops: list, posted: list, what: str) -> list:
        """Posts ``ops`` (``dist.P2POp``s) together without waiting; returns what
        :meth:`wait` takes (``posted`` names each op's peer and what it does)."""
        if not ops:
            return []
        self.check_usable(what)
        try:
            works = dist.batch_isend_irecv(ops)
        except Exception as e:  # noqa: BLE001 (a connection broke before: name who broke it)
            peers = sorted({peer for peer, _ in posted})
            doing = posted[0][1] if len({d for _, d in posted}) == 1 else "exchanging"
            self._failed(e, None, doing, what, peers)
        return list(zip(posted, works))

    def drain(self, posted: collections.deque, keep: int, what: str) -> float:
        """Waits for the oldest of ``posted`` (each what :meth:`post` returned) until at most
        ``keep`` remain; returns the seconds it waited."""
        start = time.perf_counter()
        while len(posted) > keep:
            self.wait(posted.popleft(), what)
        return time.perf_counter() - start

    def irecv(self, peer: int, nbytes: int, what: str) -> tuple:
        """Posts the receive of ``nbytes`` from ``peer``: ``(buffer, posted)``, ``posted`` for
        :meth:`wait` (empty when nothing comes)."""
        buffer = torch.empty(int(nbytes), dtype=torch.uint8, device=self.device)
        if not nbytes:
            return buffer, []
        self.bytes_received += int(nbytes)
        op = dist.P2POp(dist.irecv, buffer, group=self.group, tag=DATA_TAG, group_peer=peer)
        return buffer, self.post([op], [(peer, "receiving")], what)

    def irecvs(self, sizes: Mapping, what: str) -> tuple:
        """Posts the receives of ``sizes[peer]`` bytes from each peer (none where 0) into one
        buffer, the peers' bytes in the order given: ``(buffer, posted)``."""
        total = int(sum(sizes.values()))
        buffer = torch.empty(total, dtype=torch.uint8, device=self.device)
        ops, posted, at = [], [], 0
        for peer, n in sizes.items():
            if n:
                view = buffer[at : at + n]
                ops.append(dist.P2POp(dist.irecv, view, group=self.group, tag=DATA_TAG, group_peer=peer))
                posted.append((peer, "receiving"))
            at += int(n)
        self.bytes_received += total
        return buffer, self.post(ops, posted, what)

    def isends(self, messages: Mapping, what: str) -> list:
        """Posts the sends of ``messages[peer]`` (uint8 numpy arrays; empty ones skipped)."""
        ops, posted = [], []
        for peer, array in messages.items():
            if len(array):
                self.bytes_sent += int(array.nbytes)
                ops.append(
                    dist.P2POp(dist.isend, self._wire(array), group=self.group, tag=DATA_TAG, group_peer=peer)
                )
                posted.append((peer, "sending"))
        return self.post(ops, posted, what)
