"""Compressed shards (MDS shards that ``streaming.MDSWriter`` wrote with ``compression``, LitData
chunks that ``litdata.optimize`` wrote with whole-chunk ``compression``): a shard is one
compressed stream of the uncompressed shard's bytes, so it is read whole, by one ranged GET (or
one read of the file), decompressed as it comes, and its decompressed size checked against the
data set's ``index.json`` before any of its records is handed on.

The index reads a compressed shard only as far as what it needs lies: the offsets table at its
start (the compressed bytes that decompress to it, read in growing pieces), and, where a column
other than the record's varies in size, each sample's sizes, which lie all through the shard.

The codecs are Streaming's and LitData's names: ``zstd`` (read with the ``zstandard`` package,
the reference library's Python binding, imported only when a zstd shard is met), ``gz`` and
``bz2`` (Python's ``zlib`` and ``bz2``); a level after a colon (``zstd:7``) changes nothing
here."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from . import _s3

CODECS = ("zstd", "gz", "bz2")
"""The compressions read."""
FIRST_PIECE = 4096
"""Compressed bytes read at first (an offsets table's usually come out of fewer); each further
read of one shard is twice the one before, up to :data:`~ubershuffle._s3.PIECE_BYTES`."""


def codec_of(compression: str) -> str:
    """The codec of a ``compression`` as the writers name it (``zstd:7`` is ``zstd``); a
    one-line ``ValueError`` for one not read."""
    codec = compression.split(":")[0]
    if codec not in CODECS:
        raise ValueError(f"compression {compression!r} is not read (only {', '.join(CODECS)})")
    return codec


def decompressor(codec: str) -> Any:
    """A new decompressor of ``codec``'s stream: ``decompress(data)`` gives what ``data``
    decompresses to, ``eof`` says whether the stream has ended."""
    if codec == "gz":
        import zlib

        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if codec == "bz2":
        import bz2

        return bz2.BZ2Decompressor()
    try:
        import zstandard
    except ImportError:
        raise ImportError("zstd-compressed shards are read with zstandard: pip install zstandard") from None
    return zstandard.ZstdDecompressor().decompressobj()


class Inflating:
    """The decompressed bytes of a compressed shard whose compressed bytes ``take`` gives, as a
    :meth:`take` of their own, decompressed only as far as they are asked for."""

    def __init__(self, take: Callable[[int], bytes], codec: str, url: str) -> None:
        self._take, self._codec, self._url = take, codec, url
        self._decompressor = decompressor(codec)
        self._out = bytearray()
        self._piece = FIRST_PIECE
        self.read = 0
        """Compressed bytes taken so far."""
        self.at = 0
        """Decompressed bytes given so far."""

    def take(self, n: int) -> bytes:
        """The next ``n`` decompressed bytes, fewer only at the stream's end; a stream cut
        short or corrupt is a one-line ``ValueError`` naming the shard and the offset."""
        while len(self._out) < n and not self._decompressor.eof:
            data = self._take(self._piece)
            self._piece = min(2 * self._piece, _s3.PIECE_BYTES)
            if not data:
                raise ValueError(
                    f"{self._url}: truncated: its {self._codec} stream ends unfinished at offset {self.read}"
                )
            try:
                self._out += self._decompressor.decompress(data)
            except Exception as e:  # zlib.error, OSError (bz2), zstandard.ZstdError
                raise ValueError(
                    f"{self._url}: corrupt {self._codec} data before offset {self.read + len(data)} "
                    f"({' '.join(str(e).split())})"
                ) from None
            self.read += len(data)
        out = bytes(self._out[:n])
        del self._out[:n]
        self.at += len(out)
        return out

    def finish(self, size: int) -> None:
        """Decompresses the rest of the stream; a one-line ``ValueError`` unless it ends
        there, ``size`` bytes in all."""
        _s3.skip(self.take, size + 1 - self.at)
        if self.at != size or not self._decompressor.eof:
            raise ValueError(
                f"{self._url}: decompresses to {self.at} bytes or more, index.json says {size} (corrupt)"
            )


class Digests:
    """The bytes ``take`` gives, as a ``take`` of their own that digests them with each of the
    algorithms of ``wanted`` (``{"sha1": hex}``: those ``hashlib`` has; MDS writes none unless
    asked, ``hashes=[...]``)."""

    def __init__(self, take: Callable[[int], bytes], wanted: dict) -> None:
        import hashlib

        self._take, self._wanted = take, wanted
        self._digests = {name: hashlib.new(name) for name in wanted if name in hashlib.algorithms_available}

    def take(self, n: int) -> bytes:
        """The next ``n`` bytes, digested."""
        data = self._take(n)
        for digest in self._digests.values():
            digest.update(data)
        return data

    def finish(self, url: str) -> None:
        """Digests the rest of the bytes; a one-line ``ValueError`` unless every digest is the
        one wanted."""
        if not self._digests:
            return
        _s3.skip(self.take, 1 << 62)
        for name, digest in self._digests.items():
            got, want = digest.hexdigest(), self._wanted[name]
            if got != want:
                raise ValueError(f"{url}: its {name} is {got}, index.json says {want} (corrupt)")


class InflatedShard:
    """Shard ``k`` decompressed, as an index builder reads a shard (``urls``, ``sizes``,
    ``read_range``), forward only: ranges ascending, none before the end of the one before."""

    def __init__(self, shards: Any, k: int, codec: str, size: int, take: Callable[[int], bytes]) -> None:
        self.urls = shards.urls
        self.sizes = shards.sizes.copy()
        self.sizes[k] = size
        self.inflating = Inflating(take, codec, shards.urls[k])

    def read_range(self, k: int, first: int, end: int) -> bytes:
        """The decompressed bytes ``first..end``."""
        if first < self.inflating.at:
            raise ValueError(f"{self.urls[k]}: ranges out of order ({first} after {self.inflating.at})")
        _s3.skip(self.inflating.take, first - self.inflating.at)
        return self.inflating.take(end - first)


def compressed_build(build: Callable[[Any, int], dict], codecs: list[str], sizes: list[int]) -> Any:
    """A builder of compressed shard ``k``'s index: ``build``'s of the decompressed shard
    (``codecs[k]``, ``sizes[k]`` bytes), reading it only as far as ``build`` asks; its ``read``
    the compressed bytes read."""

    def build_compressed(shards: Any, k: int) -> dict:
        with shards.opened(k, 0, int(shards.sizes[k])) as take:
            view = InflatedShard(shards, k, codecs[k], sizes[k], take)
            index = build(view, k)
        index["read"] = view.inflating.read
        return index

    return build_compressed


class CompressedShards:
    """Where a compressed sharded source's records are: record ``i`` at byte ``starts[i]`` of
    shard ``shards[i]`` decompressed (``codecs``, ``raw_sizes``, ``hashes``: each shard's codec,
    decompressed size and the digests ``index.json`` gives of its compressed file, as
    ``{"sha1": hex}``). A run of records of one shard is one read of the whole shard."""

    def __init__(
        self,
        shards: Any,
        which: np.ndarray,
        starts: np.ndarray,
        codecs: list[str],
        raw_sizes: list[int],
        hashes: list[dict],
    ) -> None:
        self.shards = shards
        self.which = np.asarray(which, dtype=np.int64)
        self.starts = np.asarray(starts, dtype=np.int64)
        self.codecs, self.raw_sizes, self.hashes = codecs, raw_sizes, hashes
        self.store = shards.objects.store if shards.remote else None

    def _read_shard(self, run: list[int], sizes: np.ndarray, put: Callable[[list], None]) -> None:
        """Reads the records ``run`` (ascending, of one shard) from the whole shard, handed on
        (``put``) once the shard has decompressed to its size."""
        k = int(self.which[run[0]])
        url = self.shards.urls[k]
        held: list[list] = []
        with self.shards.opened(k, 0, int(self.shards.sizes[k])) as take:
            digests = Digests(take, self.hashes[k])
            inflating = Inflating(digests.take, self.codecs[k], url)
            spans = [(i, int(self.starts[i]), int(sizes[i])) for i in run]
            _s3.cut_records(inflating.take, 0, spans, held.append, f"{url}: its decompressed bytes")
            inflating.finish(self.raw_sizes[k])
            digests.finish(url)
        for piece in held:
            put(piece)

    def record(self, i: int, sizes: np.ndarray) -> np.ndarray:
        """Record ``i``, read now (its whole shard)."""
        out: list = []
        self._read_shard([int(i)], sizes, out.extend)
        return out[0][1]

    def read(self, ids: np.ndarray, sizes: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
        """``(i, record i)`` for every ``i`` of ``ids``, in order: each run of ascending records
        of one shard by one read of the shard, on :data:`~ubershuffle._s3.WORKERS` threads."""
        spans = ((i, self.which[i], self.starts[i], self.starts[i] + sizes[i]) for i in map(int, ids))
        runs = _s3.near_runs(spans, gap=float("inf"))
        yield from _s3._streamed(runs, lambda run, put: self._read_shard(run, sizes, put))
