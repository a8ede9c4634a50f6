"""Point-to-point messages over the plane's process group, every wait bounded.

All traffic of a :class:`~ubershuffle.torch.ShuffleGroup` goes through :class:`Link`: sends and
receives posted together (``isend``/``irecv``, so a rank's uplink and downlink run at once),
then waited on one by one against one deadline, so that a peer that died or hangs is named
(:class:`ShuffleTimeout`). With an NCCL group the buffers travel as CUDA tensors on the current
device (copied there and back); with gloo they are CPU tensors sharing memory with numpy.
"""

from __future__ import annotations

import datetime
import time
import warnings
from collections.abc import Mapping

import numpy as np
import torch
import torch.distributed as dist

# Sent buffers are only read: a read-only view (the store's records) goes as it is, without
# torch's warning about tensors over non-writable memory (for this module's calls only).
warnings.filterwarnings("ignore", message="The given NumPy array is not writable", module=__name__)

DATA_TAG = 0
"""The tag of records and packets."""
CONTROL_TAG = 1
"""The tag of a training rank's requests to the store."""
CHUNK_BYTES = 1 << 20
"""Bytes per chunk of :meth:`Link.scatter_gather`'s pipeline."""


class ShuffleTimeout(TimeoutError):
    """A rank waited longer than the group's ``timeout`` for a peer: the message names both
    and what was awaited. The plane's group is left unusable: end the process (torchrun
    restarts the job from its last saved state)."""


class ShuffleError(RuntimeError):
    """A peer failed or closed its connection, or sent what the plan does not allow."""


class Link:
    """This rank's messages to and from the other ranks of ``group`` (``ranks``: the group's
    global ranks in group-rank order)."""

    def __init__(
        self, group: dist.ProcessGroup, ranks: list, rank: int, timeout: float, device: torch.device
    ) -> None:
        self.group = group
        self.ranks = list(ranks)
        self.rank = rank
        self.timeout = float(timeout)
        self.device = device
        self.bytes_sent = 0
        """Payload bytes this link has sent."""
        self.bytes_received = 0
        """Payload bytes this link has received."""
        self.seconds: dict = {}
        """Seconds spent, by what (``gloo_wait_seconds``: waiting on posted operations;
        ``scatter_seconds`` and ``relay_seconds``: the two halves of :meth:`scatter_gather`,
        copies included), summed over the link's life; a delivery reports the difference."""

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
        posted = []
        for peer, array in sends.items():
            if len(array):
                self.bytes_sent += int(array.nbytes)
                work = dist.isend(self._wire(array), dst=self.ranks[peer], group=self.group, tag=tag)
                posted.append((peer, "sending", work, None))
        buffers = {}
        for peer, (count, dtype) in recvs.items():
            buffer = torch.empty(int(count), dtype=dtype, device=self.device)
            buffers[peer] = buffer
            if count:
                work = dist.irecv(buffer, src=self.ranks[peer], group=self.group, tag=tag)
                posted.append((peer, "receiving", work, buffer))
        self.wait(posted, what)
        got = {peer: b.cpu().numpy() for peer, b in buffers.items()}
        self.bytes_received += sum(int(a.nbytes) for a in got.values())
        return got

    def wait(self, posted: list, what: str) -> None:
        """Waits on each posted operation until one deadline; a failure names the peer."""
        start = time.perf_counter()
        try:
            self._wait(posted, what)
        finally:
            self.tally("gloo_wait_seconds", time.perf_counter() - start)

    def seconds_since(self, before: dict) -> dict:
        """What :attr:`seconds` gained since ``before`` (a copy taken earlier), every key
        present."""
        keys = ("gloo_wait_seconds", "scatter_seconds", "relay_seconds")
        return {k: self.seconds.get(k, 0.0) - before.get(k, 0.0) for k in keys}

    def _wait(self, posted: list, what: str) -> None:
        deadline = time.monotonic() + self.timeout
        for peer, doing, work, _ in posted:
            left = max(deadline - time.monotonic(), 0.001)
            try:
                work.wait(timeout=datetime.timedelta(seconds=left))
            except RuntimeError as e:
                text = str(e)
                if "imed out" in text or time.monotonic() >= deadline:
                    raise ShuffleTimeout(
                        f"rank {self.rank} waited {self.timeout:g} s for rank {peer} ({doing} {what})"
                    ) from None
                first = text.strip().splitlines()[0] if text.strip() else type(e).__name__
                raise ShuffleError(f"rank {self.rank}, {doing} {what} with rank {peer}: {first}") from None

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

    def scatter_gather(
        self,
        source: int,
        receivers: list,
        data: np.ndarray | None,
        nbytes: int,
        what: str,
        chunk_bytes: int = CHUNK_BYTES,
    ) -> np.ndarray | None:
        """The UberShuffle paper's pseudo-broadcast (Section 3.1, Van de Geijn's): ``source``
        cuts ``data`` (``nbytes``) into one piece per receiver and sends piece ``i`` to
        ``receivers[i]``; the receivers then give each other their pieces. The source's uplink
        carries the data once, each receiver's about once. Returns the whole data at a
        receiver, ``None`` at the source.

        Pipelined: the data goes in chunks of about ``chunk_bytes``, the source sending every
        chunk's pieces at once (its uplink never idles) while the receivers relay the chunks
        they have, each in ``m - 1`` shifts: at shift ``s`` receiver ``i`` sends its piece to
        receiver ``i + s`` and receives from ``i - s``, so every link carries one piece at a
        time (sending to every other receiver at once makes ``m - 1`` flows converge on each
        downlink). Pieces land in place: no copies at either end."""
        m = len(receivers)
        chunks = max(1, -(-nbytes // max(int(chunk_bytes), 1)))
        per_chunk = -(-nbytes // chunks)

        def pieces(c: int) -> list:
            lo, hi = min(c * per_chunk, nbytes), min((c + 1) * per_chunk, nbytes)
            p = -(-(hi - lo) // m) if m else 0
            return [(min(lo + i * p, hi), min(lo + (i + 1) * p, hi)) for i in range(m)]

        start = time.perf_counter()
        group = self.group
        if self.rank == source:
            assert data is not None and len(data) == nbytes
            wire = self._wire(data)
            posted = []
            for c in range(chunks):
                for r, (a, b) in zip(receivers, pieces(c)):
                    if b > a:
                        self.bytes_sent += b - a
                        work = dist.isend(wire[a:b], dst=self.ranks[r], group=group, tag=DATA_TAG)
                        posted.append((r, "sending", work, None))
            self.wait(posted, what)
            self.tally("scatter_seconds", time.perf_counter() - start)
            return None
        me = receivers.index(self.rank)
        buffer = torch.empty(nbytes, dtype=torch.uint8, device=self.device)
        incoming = []
        for c in range(chunks):
            a, b = pieces(c)[me]
            work = None
            if b > a:
                work = dist.irecv(buffer[a:b], src=self.ranks[source], group=group, tag=DATA_TAG)
            incoming.append(work)
        scatter = relay = 0.0
        for c in range(chunks):
            t = time.perf_counter()
            bounds = pieces(c)
            a, b = bounds[me]
            if incoming[c] is not None:
                self.wait([(source, "receiving", incoming[c], None)], f"{what} from the store")
                self.bytes_received += b - a
            t2 = time.perf_counter()
            scatter += t2 - t
            for shift in range(1, m):
                to, frm = (me + shift) % m, (me - shift) % m
                posted = []
                if b > a:
                    self.bytes_sent += b - a
                    peer = receivers[to]
                    work = dist.isend(buffer[a:b], dst=self.ranks[peer], group=group, tag=DATA_TAG)
                    posted.append((peer, "sending", work, None))
                lo, hi = bounds[frm]
                if hi > lo:
                    self.bytes_received += hi - lo
                    peer = receivers[frm]
                    work = dist.irecv(buffer[lo:hi], src=self.ranks[peer], group=group, tag=DATA_TAG)
                    posted.append((peer, "receiving", work, None))
                self.wait(posted, f"{what} from the other ranks")
            relay += time.perf_counter() - t2
        self.tally("scatter_seconds", scatter)
        self.tally("relay_seconds", relay)
        return buffer.cpu().numpy()
