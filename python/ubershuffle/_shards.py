"""Sharded data sets as they are (WebDataset tar shards, MDS shards, LitData chunks; local or in
``s3://``): the shards' listing, an index of every record's shard, offset and size built from
headers alone and kept in a cache, and the :class:`~ubershuffle.sources.RecordSource` that reads
records by shard.

The index of a shard is built once and kept in ``index_dir`` (by default
``$UBERSHUFFLE_INDEX_DIR``, else ``$XDG_CACHE_HOME/ubershuffle/index``, else
``~/.cache/ubershuffle/index``; ``index_dir=False`` keeps none): a file per shard, named by a
hash of the shard's URL or absolute path, its size and its ETag (object storage) or
modification time in nanoseconds (a local file), so a restart lists the shards (a HeadObject or
a ``stat`` each) and reads nothing else, and a shard that changed is indexed again.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import json
import os
import pathlib
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _native, _s3
from ._compressed import CompressedShards, codec_of, compressed_build

INDEX_WINDOW = 4096
"""Bytes a ranged GET reads at a tar header of an object while indexing: the header and the
small members after it in one request (a label and the next member's header: WebDataset's
TarWriter gives every member a pax header, so a 1-byte label takes 2 KiB), a large member's
data skipped."""
INDEX_VERSION = 2
"""The cached index's layout (a new layout ignores the old files)."""
LITDATA_ARROW_MAGIC = b"LDARW01\0"
"""The end of a LitData chunk whose rows follow its items as an Arrow IPC file."""

_META = re.compile(r"__[^/]*__($|/)")
"""Members WebDataset skips (``__key__``-like metadata)."""
_KEY_EXT = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")
"""WebDataset's split of a member's name into the sample's key and the member's extension."""


def expand(urls: Any) -> list[str]:
    """``urls`` as a list: a list or tuple as given (paths made strings), a string with brace
    patterns expanded as WebDataset expands them (``train-{000000..000099}.tar``: a numeric
    range, zero-padded when an end is; ``{a,b}``: alternatives; several braces: the leftmost
    outermost)."""
    if isinstance(urls, (list, tuple)):
        return [os.fspath(u) for u in urls]
    if not isinstance(urls, (str, os.PathLike)):
        raise TypeError(
            f"shards must be a path or URL (a brace pattern) or a list of them, not {type(urls).__name__}"
        )
    pattern = os.fspath(urls)
    match = re.search(r"\{([^{}]*)\}", pattern)
    if match is None:
        return [pattern]
    head, tail, body = pattern[: match.start()], pattern[match.end() :], match.group(1)
    numeric = re.fullmatch(r"(\d+)\.\.(\d+)", body)
    if numeric:
        a, b = numeric.groups()
        padded = (len(a) > 1 and a[0] == "0") or (len(b) > 1 and b[0] == "0")
        width = max(len(a), len(b)) if padded else 0
        step = 1 if int(b) >= int(a) else -1
        choices = [str(n).zfill(width) for n in range(int(a), int(b) + step, step)]
    elif "," in body:
        choices = body.split(",")
    else:
        raise ValueError(f"{pattern!r}: a brace pattern is {{first..last}} or {{a,b,...}}")
    return [head + c + rest for c in choices for rest in expand(tail)]


def default_index_dir() -> pathlib.Path:
    """Where shard indexes are kept when no ``index_dir`` is given."""
    if os.environ.get("UBERSHUFFLE_INDEX_DIR"):
        return pathlib.Path(os.environ["UBERSHUFFLE_INDEX_DIR"])
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(cache, "ubershuffle", "index")


@dataclass
class Shards:
    """The shards of a data set: where they are, their sizes and stamps (an object's ETag, a
    file's modification time in nanoseconds)."""

    urls: list[str]
    """As given (``s3://`` URLs, or local paths)."""
    sizes: np.ndarray
    stamps: list[str]
    remote: bool
    objects: Any = None
    """``_s3.ObjectRecords`` of the shards (object storage): their client and its counts."""

    @classmethod
    def listed(cls, urls: list[str], store: Any = None) -> Shards:
        """Lists ``urls``: a HeadObject each (several at once), or a ``stat`` each."""
        if not urls:
            raise ValueError("no shards given")
        remote = [_s3.is_url(u) for u in urls]
        if any(remote) and not all(remote):
            raise ValueError("the shards mix s3:// URLs with local paths: give one kind")
        if all(remote):
            objects = _s3.ObjectRecords([_s3.split_url(u) for u in urls], [])
            if store is not None:
                objects.store = store  # the client that read index.json, and its counts
            heads = objects.store.heads(urls)
            objects.etags = [etag for _, etag in heads]
            sizes = np.array([size for size, _ in heads], dtype=np.int64)
            return cls(urls, sizes, list(objects.etags), True, objects)
        sizes, stamps = [], []
        for u in urls:
            try:
                st = os.stat(u)
            except OSError as e:
                raise ValueError(f"{u}: {e.strerror}") from None
            sizes.append(st.st_size)
            stamps.append(str(st.st_mtime_ns))
        return cls([os.path.abspath(u) for u in urls], np.array(sizes, dtype=np.int64), stamps, False)

    def cache_path(self, index_dir: pathlib.Path, kind: str, k: int) -> pathlib.Path:
        """Shard ``k``'s index file: named by its URL, size and stamp."""
        h = hashlib.blake2b(digest_size=12)
        h.update(f"{INDEX_VERSION}\0{kind}\0{self.urls[k]}\0{int(self.sizes[k])}\0{self.stamps[k]}".encode())
        return index_dir / f"{kind}-{h.hexdigest()}.json"

    def read_range(self, k: int, first: int, end: int) -> bytes:
        """Bytes ``first..end`` of shard ``k`` (a ranged GET, only if the object still has its
        ETag; a ``pread``)."""
        if self.remote:
            bucket, key = self.objects.bucket_keys[k]
            body, _ = self.objects.store.get(bucket, key, first, end, self.objects.etags[k])
            return body
        with open(self.urls[k], "rb") as f:
            return os.pread(f.fileno(), end - first, first)

    @contextlib.contextmanager
    def opened(self, k: int, first: int, end: int) -> Iterator[Callable[[int], bytes]]:
        """Bytes ``first..end`` of shard ``k`` by one read (a ranged GET, only if the object
        still has its ETag and size; an open file), as a function ``take(n)`` that gives the
        next ``n`` bytes as they come, fewer only at the range's end."""
        if self.remote:
            bucket, key = self.objects.bucket_keys[k]
            store = self.objects.store
            body, whole = store.open(bucket, key, first, end, self.objects.etags[k])
            try:
                if whole is not None and whole != int(self.sizes[k]):
                    raise ValueError(
                        f"{self.urls[k]} has {whole} bytes now, {int(self.sizes[k])} when its index was made"
                    )
                yield _s3.taker(lambda n: store.read_body(self.urls[k], body, n))
            finally:
                body.close()
            return
        with open(self.urls[k], "rb") as f:
            now, was = os.fstat(f.fileno()).st_size, int(self.sizes[k])
            if now != was:
                raise ValueError(f"{self.urls[k]} has {now} bytes now, {was} when its index was made")
            f.seek(first)
            left = [end - first]

            def read(n: int) -> bytes:
                data = f.read(min(n, left[0]))
                left[0] -= len(data)
                return data

            yield _s3.taker(read)


def _tar_members(shards: Shards, k: int) -> dict:
    """Shard ``k``'s members from its headers alone: a local file scanned by the Rust side (off
    the GIL), an object by ranged GETs of :data:`INDEX_WINDOW` bytes at each header."""
    url = shards.urls[k]
    try:
        if not shards.remote:
            (names, headers, offsets, sizes), read = _native.scan_tar(url)
        else:
            size = int(shards.sizes[k])
            walker = _native.TarWalker(size)
            window = INDEX_WINDOW
            while (want := walker.want()) is not None:
                at, least = want
                body = shards.read_range(k, at, min(size, at + max(window, least)))
                walker.feed(at, body)
                window = INDEX_WINDOW
                if walker.want() == want:
                    # An extended header longer than the window: read it whole next time.
                    window = walker.need(body)
                    if window <= len(body):
                        raise ValueError(f"truncated at offset {at + len(body)}")
            read = walker.fed
            names, headers, offsets, sizes = walker.finish()
    except ValueError as e:
        raise ValueError(f"{url}: {e}" if shards.remote else str(e)) from None  # scan_tar names the file
    return {
        "names": list(names),
        "headers": headers.tolist(),
        "offsets": offsets.tolist(),
        "sizes": sizes.tolist(),
        "read": int(read),
    }


def _load_cached(path: pathlib.Path) -> dict | None:
    try:
        index = json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # absent, or half-written by a process that died: built again
    return index if isinstance(index, dict) and isinstance(index.get("read"), int) else None


def _store_cached(path: pathlib.Path, index: dict) -> None:
    """Writes ``path`` whole or not at all (ranks of one host may write it at once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(index, f)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def shard_indexes(shards: Shards, kind: str, build: Any, index_dir: Any) -> tuple[list[dict], int]:
    """Every shard's index (``build(shards, k)``), from the cache when it holds one for the
    shard as it is now, else built (several shards at once) and cached; and the bytes read to
    build them."""
    where = None if index_dir is False else pathlib.Path(index_dir) if index_dir else default_index_dir()
    indexes: list[Any] = [None] * len(shards.urls)
    if where is not None:
        for k in range(len(indexes)):
            indexes[k] = _load_cached(shards.cache_path(where, kind, k))
    missing = [k for k, index in enumerate(indexes) if index is None]
    workers = _s3.WORKERS if shards.remote else 2
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        for k, index in zip(missing, pool.map(lambda k: build(shards, k), missing)):
            indexes[k] = index
            if where is not None:
                _store_cached(shards.cache_path(where, kind, k), index)
    return indexes, sum(indexes[k]["read"] for k in missing)


def split_name(name: str) -> tuple[str, str] | None:
    """A member's ``(key, extension)`` as WebDataset splits it (the extension lower-cased),
    or ``None`` for a member WebDataset skips (metadata, a name without an extension)."""
    if ("/" not in name and name.startswith("__") and name.endswith("__")) or _META.match(name):
        return None
    match = _KEY_EXT.match(name)
    if match is None:
        return None
    return match.group(1), match.group(2).lower()


def tar_records(url: str, index: dict, member: str | None) -> tuple[np.ndarray, np.ndarray]:
    """A shard's records (starts and sizes): each sample's ``member``, or with ``None`` its
    members' bytes from its first header to the end of its last member's padded data. A
    sample is the members in a row that share a key, as WebDataset groups them."""
    names, headers, offsets, sizes = index["names"], index["headers"], index["offsets"], index["sizes"]
    starts: list[int] = []
    lengths: list[int] = []
    key = None
    seen: dict[str, int] = {}
    first = 0

    def close() -> None:
        if key is None:
            return
        if member is None:
            j = max(seen.values())
            starts.append(headers[min(seen.values())])
            lengths.append(offsets[j] + -(-sizes[j] // 512) * 512 - headers[min(seen.values())])
        elif member in seen:
            j = seen[member]
            starts.append(offsets[j])
            lengths.append(sizes[j])
        else:
            has = ", ".join(f".{e}" for e in seen)
            raise ValueError(f"{url}: sample {key!r} (offset {first}) has no .{member} member (it has {has})")

    for j, name in enumerate(names):
        split = split_name(name)
        if split is None:
            continue
        k, ext = split
        if k != key:
            close()
            key, seen, first = k, {}, headers[j]
        if ext in seen:
            raise ValueError(
                f"{url}: sample {key!r} has two .{ext} members (the second at offset {headers[j]})"
            )
        seen[ext] = j
    close()
    return np.array(starts, dtype=np.int64), np.array(lengths, dtype=np.int64)


def webdataset_source(urls: Any, member: str | None, index_dir: Any) -> Any:
    """See :func:`ubershuffle.sources.webdataset`."""
    if member is not None and (not isinstance(member, str) or not member or "/" in member):
        raise ValueError(
            f"member must be an extension such as 'jpg' (or None: the whole sample), got {member!r}"
        )
    if member is not None:
        member = member.lower().lstrip(".")
    shards = Shards.listed(expand(urls))
    indexes, index_bytes = shard_indexes(shards, "wds", _tar_members, index_dir)
    parts = [tar_records(url, index, member) for url, index in zip(shards.urls, indexes)]
    if sum(len(p[0]) for p in parts) == 0:
        raise ValueError(
            f"the shards hold no sample (with a .{member} member)" if member else "the shards hold no sample"
        )
    return _sharded_source(shards, parts, index_bytes, ("wds", member))


class LocalShards:
    """Where a local sharded source's records are: record ``i`` at byte ``starts[i]`` of the
    file ``paths[shards[i]]``."""

    def __init__(
        self, paths: list[str], shard_sizes: np.ndarray, shards: np.ndarray, starts: np.ndarray
    ) -> None:
        self.paths = paths
        self.shard_sizes = np.asarray(shard_sizes, dtype=np.int64)
        self.shards = np.asarray(shards, dtype=np.int64)
        self.starts = np.asarray(starts, dtype=np.int64)

    def record(self, i: int, size: int) -> np.ndarray:
        """Record ``i`` (of ``size`` bytes), read now; a shard whose size changed since its
        index is a one-line ``ValueError``."""
        path = self.paths[int(self.shards[i])]
        with open(path, "rb") as f:
            now = os.fstat(f.fileno()).st_size
            was = int(self.shard_sizes[int(self.shards[i])])
            if now != was:
                raise ValueError(f"{path} has {now} bytes now, {was} when its index was made")
            data = os.pread(f.fileno(), int(size), int(self.starts[i]))
        return np.frombuffer(data, dtype=np.uint8)

    def reader(self, offsets: np.ndarray) -> Any:
        """The engine's reader of these records (Rust, off the GIL)."""
        return _native.SourceReader.shards(
            self.paths, [int(s) for s in self.shard_sizes], self.shards, self.starts, offsets
        )


def sample_members(record: Any) -> dict:
    """The members of a WebDataset sample read whole (``webdataset(..., member=None)``): a
    dict of ``"__key__"`` (the sample's key) and each member's extension to its bytes (a
    read-only uint8 view of ``record``), as WebDataset's own reader gives them."""
    data = np.frombuffer(memoryview(record).cast("B"), dtype=np.uint8)
    names, _, offsets, sizes = _native.scan_tar_bytes(data, True)
    out: dict = {}
    for name, at, size in zip(names, offsets.tolist(), sizes.tolist()):
        split = split_name(name)
        if split is not None:
            out.setdefault("__key__", split[0])
            out[split[1]] = data[at : at + size]
    return out


def fingerprint(parts: Any, sizes: np.ndarray, starts: np.ndarray) -> int:
    """A 63-bit digest of a sharded source's listing (its shards' URLs, sizes and ETags) and
    index: ranks that list the same objects agree without reading a record."""
    h = hashlib.blake2b(digest_size=8)
    h.update(repr(parts).encode())
    h.update(np.ascontiguousarray(sizes, dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(starts, dtype=np.int64).tobytes())
    return (int.from_bytes(h.digest(), "little") & (2**63 - 1)) or 1


def _read_index_json(root: str, split: str | None) -> tuple[dict, str, Any]:
    """A data set's ``index.json`` (MDS, LitData) under ``root`` (a folder or an ``s3://``
    prefix; ``split``: a subfolder), the folder or prefix its shards are named from, and the
    object store client that read it (``None`` for a folder)."""
    store = None
    base = root.rstrip("/")
    if split:
        base = f"{base}/{split.strip('/')}"
    where = f"{base}/index.json"
    try:
        if _s3.is_url(where):
            bucket, key = _s3.split_url(where)
            store = _s3.ObjectStore()
            text, _ = store.get(bucket, key, None, None, "")
        else:
            text = pathlib.Path(where).read_bytes()
        index = json.loads(text)
    except OSError as e:
        raise ValueError(f"{where}: {getattr(e, 'strerror', None) or e}") from None
    except ValueError as e:
        raise ValueError(f"{where}: not JSON ({e})") from None
    if not isinstance(index, dict):
        raise ValueError(f"{where}: not an index (a JSON object)")
    return index, base, store


def _mds_shards(index: dict, where: str, column: str) -> tuple[list[str], list[dict], list[str | None]]:
    """The shards' file names (a compressed shard's ``zip_data``), infos and codecs (``None``:
    uncompressed) of an MDS ``index.json``, checked to be MDS shards that hold ``column``, all
    compressed alike or none."""
    shards = index.get("shards")
    if index.get("version") != 2 or not isinstance(shards, list) or not shards:
        raise ValueError(f"{where}/index.json: not an MDS index of version 2 with shards")
    names, codecs = [], []
    for k, shard in enumerate(shards):
        if not isinstance(shard, dict) or shard.get("format") != "mds" or shard.get("version") != 2:
            raise ValueError(f"{where}/index.json: shard {k} is not an MDS shard of version 2")
        try:
            codec = codec_of(str(shard["compression"])) if shard.get("compression") else None
        except ValueError as e:
            raise ValueError(f"{where}/index.json: shard {k}: {e}") from None
        columns = shard.get("column_names") or []
        if column not in columns:
            raise ValueError(
                f"{where}/index.json: shard {k} has no column {column!r} (it has {', '.join(columns)})"
            )
        for name in ("raw_data", "zip_data") if codec else ("raw_data",):
            data = shard.get(name) or {}
            if not isinstance(data.get("basename"), str) or not isinstance(data.get("bytes"), int):
                raise ValueError(f"{where}/index.json: shard {k} names no {name} file")
        names.append(shard["zip_data" if codec else "raw_data"]["basename"])
        codecs.append(codec)
    if len(set(codecs)) > 1:
        raise ValueError(
            f"{where}/index.json: its shards are compressed differently ({set(codecs)}): not read"
        )
    return names, shards, codecs


def _read_ranges(shards: Shards, k: int, starts: list[int], length: int) -> tuple[list[bytes], int]:
    """``length`` bytes at each of ``starts`` (ascending) of shard ``k``, and the bytes read
    for them: neighbours within :data:`INDEX_WINDOW` of each other by one read, every other by
    its own."""
    out: list[bytes] = []
    read = 0
    at = 0
    while at < len(starts):
        end = at + 1
        while end < len(starts) and starts[end] + length - starts[at] <= INDEX_WINDOW:
            end += 1
        first, last = starts[at], starts[end - 1] + length
        body = shards.read_range(k, first, last)
        if len(body) != last - first:
            raise ValueError(f"{shards.urls[k]}: truncated at offset {first + len(body)}")
        out += [body[s - first : s - first + length] for s in starts[at:end]]
        read += len(body)
        at = end
    return out, read


def _mds_build(column: str, infos: list[dict], trailer: str = "truncated") -> Any:
    """A builder of shard ``k``'s index of ``column``: its offsets table (and, when another
    column's size varies, each sample's sizes), every size checked against the shard's. An MDS
    shard and a LitData chunk share the layout: ``samples`` (uint32), ``samples + 1`` offsets
    (uint32, from the file's start), then the samples, each the uint32 sizes of its columns
    whose size varies (``column_sizes`` ``None``; all of a LitData item's) and the columns'
    bytes in order. ``trailer`` says what bytes after the last sample may be."""

    def build(shards: Shards, k: int) -> dict:
        url, info = shards.urls[k], infos[k]
        size, samples = int(shards.sizes[k]), int(info.get("samples", -1))
        head = 4 * (samples + 2)
        if size < head:
            raise ValueError(f"{url}: truncated at offset {size}: its offsets table needs {head} bytes")
        table = np.frombuffer(shards.read_range(k, 0, head), dtype="<u4").astype(np.int64)
        read = head
        if table[0] != samples:
            raise ValueError(f"{url}: the shard holds {table[0]} samples, its index says {samples} (corrupt)")
        offsets = table[1:]
        if (np.diff(offsets) < 0).any() or offsets[0] < head:
            raise ValueError(f"{url}: its offsets table at offset 4 is corrupt (not ascending from its end)")
        if offsets[-1] != size:
            raise ValueError(
                f"{url}: its samples end at offset {offsets[-1]}, the file has {size} bytes ({trailer})"
            )
        names, fixed = info["column_names"], info.get("column_sizes") or []
        c = names.index(column)
        variable = [j for j, s in enumerate(fixed) if s is None]
        head_bytes = 4 * len(variable)
        lengths = np.diff(offsets)
        if all(s is not None for j, s in enumerate(fixed) if j != c):
            # The column is where the fixed sizes put it: nothing more to read.
            before = sum(fixed[:c])
            starts = offsets[:-1] + head_bytes + before
            sizes = lengths - head_bytes - sum(s for j, s in enumerate(fixed) if j != c)
            if (sizes < 0).any() or (fixed[c] is not None and (sizes != fixed[c]).any()):
                i = int(np.argmax((sizes < 0) | ((sizes != fixed[c]) if fixed[c] is not None else False)))
                raise ValueError(
                    f"{url}: sample {i} (offset {offsets[i]}) is shorter than its columns (corrupt)"
                )
        else:
            # Each sample's sizes of its variable columns, at its start.
            heads, head_read = _read_ranges(shards, k, offsets[:-1].tolist(), head_bytes)
            read += head_read
            var_sizes = (
                np.frombuffer(b"".join(heads), dtype="<u4").astype(np.int64).reshape(samples, len(variable))
            )
            all_sizes = np.empty((samples, len(names)), dtype=np.int64)
            for j, s in enumerate(fixed):
                if s is not None:
                    all_sizes[:, j] = s
            all_sizes[:, variable] = var_sizes
            bad = np.flatnonzero(head_bytes + all_sizes.sum(axis=1) != lengths)
            if len(bad):
                i = int(bad[0])
                raise ValueError(
                    f"{url}: sample {i} (offset {offsets[i]}) has {lengths[i]} bytes, its columns' sizes "
                    f"say {head_bytes + all_sizes[i].sum()} (corrupt)"
                )
            starts = offsets[:-1] + head_bytes + all_sizes[:, :c].sum(axis=1)
            sizes = all_sizes[:, c]
        return {"starts": starts.tolist(), "sizes": sizes.tolist(), "read": int(read)}

    return build


def mds_source(root: Any, column: str, split: str | None, index_dir: Any) -> Any:
    """See :func:`ubershuffle.sources.mds`."""
    root = os.fspath(root)
    index, base, store = _read_index_json(root, split)
    names, infos, codecs = _mds_shards(index, base, column)
    shards = Shards.listed([f"{base}/{name}" for name in names], store)
    for k, info in enumerate(infos):
        size, listed = int(shards.sizes[k]), info["zip_data" if codecs[k] else "raw_data"]["bytes"]
        if size != listed:
            raise ValueError(f"{shards.urls[k]} has {size} bytes, index.json says {listed} (truncated?)")
    build = _mds_build(column, infos)
    packed = None
    if codecs[0]:
        raw_sizes = [info["raw_data"]["bytes"] for info in infos]
        packed = (codecs, raw_sizes, [info["zip_data"].get("hashes") or {} for info in infos])
        build = compressed_build(build, codecs, raw_sizes)
    indexes, index_bytes = shard_indexes(shards, f"mds-{column}", build, index_dir)
    return _sharded_source(shards, _parts(indexes), index_bytes, ("mds", column), packed)


def _parts(indexes: list[dict]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each shard's records' starts and sizes, from its index."""
    return [(np.array(ix["starts"], dtype=np.int64), np.array(ix["sizes"], dtype=np.int64)) for ix in indexes]


def _sharded_source(shards: Shards, parts: list, index_bytes: int, what: Any, packed: Any = None) -> Any:
    """The record source of ``parts`` (each shard's records' starts and sizes; ``packed``:
    compressed shards' codecs, decompressed sizes and digests, the starts in the decompressed
    bytes)."""
    from .sources import RecordSource

    starts = np.concatenate([p[0] for p in parts])
    sizes = np.concatenate([p[1] for p in parts])
    which = np.repeat(np.arange(len(parts), dtype=np.int64), [len(p[0]) for p in parts])
    if len(sizes) == 0:
        raise ValueError("the shards hold no record")
    if packed:
        source = RecordSource("compressed", sizes, CompressedShards(shards, which, starts, *packed))
    elif shards.remote:
        objects = _s3.ObjectRanges(
            shards.objects.bucket_keys, shards.objects.etags, shards.sizes, which, starts
        )
        objects.store = shards.objects.store  # one client, one count: the listing's and the index's too
        source = RecordSource("s3", sizes, objects)
    else:
        source = RecordSource("shards", sizes, LocalShards(shards.urls, shards.sizes, which, starts))
    source.index_bytes_read = index_bytes
    source.sharded = True
    if shards.remote:
        source._fingerprint_of = (what, shards.urls, shards.sizes.tolist(), shards.stamps)
    return source


def litdata_source(root: Any, field: str, index_dir: Any) -> Any:
    """See :func:`ubershuffle.sources.litdata`."""
    root = os.fspath(root)
    index, base, store = _read_index_json(root, None)
    where = f"{base}/index.json"
    config, chunks = index.get("config"), index.get("chunks")
    if not isinstance(config, dict) or not isinstance(chunks, list) or not chunks:
        raise ValueError(f"{where}: not a LitData index (config and chunks)")
    if config.get("encryption"):
        raise ValueError(f"{where}: the chunks have encryption {config['encryption']!r}: not read")
    codec = _litdata_codec(config, where)
    if config.get("item_loader", "PyTreeLoader") != "PyTreeLoader":
        raise ValueError(f"{where}: items of {config['item_loader']} are not read (only PyTreeLoader's)")
    try:
        spec = json.loads(config["data_spec"])[1]
        fields = json.loads(spec["context"]) if spec.get("type") == "builtins.dict" else None
        leaves = all(child.get("type") is None for child in spec["children_spec"])
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        fields, leaves = None, False
    if not fields or not leaves or len(fields) != len(config.get("data_format") or []):
        raise ValueError(f"{where}: the items are not flat dicts (a field each leaf): not read")
    if field not in fields:
        raise ValueError(
            f"{where}: the items have no field {field!r} (they have {', '.join(map(str, fields))})"
        )
    infos = []
    for k, chunk in enumerate(chunks):
        if not isinstance(chunk, dict) or not isinstance(chunk.get("filename"), str):
            raise ValueError(f"{where}: chunk {k} names no file")
        count = chunk.get("chunk_size")
        sizes = [None] * len(fields)
        infos.append(
            {
                "samples": count if isinstance(count, int) else -1,
                "column_names": fields,
                "column_sizes": sizes,
            }
        )
    shards = Shards.listed([f"{base}/{chunk['filename']}" for chunk in chunks], store)
    if codec:
        return _litdata_compressed(shards, chunks, codec, field, infos, index_dir, where)
    indexes, index_bytes = shard_indexes(shards, f"litdata-{field}", _litdata_build(field, infos), index_dir)
    arrow = [ix for ix in indexes if "ipc" in ix]
    if arrow and len(arrow) != len(indexes):
        raise ValueError(f"{where}: some chunks hold their rows as Arrow, others as items: not read")
    if arrow:
        from ._parquet import LitDataArrowRecords
        from .sources import RecordSource

        sizes = np.array([s for ix in indexes for s in ix["sizes"]], dtype=np.int64)
        groups = [ix["rows"] for ix in indexes]
        records = LitDataArrowRecords(shards, field, groups, [ix["ipc"] for ix in indexes])
        source = RecordSource("arrow", sizes, records)
        source.index_bytes_read = index_bytes
        source.sharded = True
        if shards.remote:
            source._fingerprint_of = (
                ("litdata-arrow", field),
                shards.urls,
                shards.sizes.tolist(),
                shards.stamps,
            )
        return source
    return _sharded_source(shards, _parts(indexes), index_bytes, ("litdata", field))


def _litdata_codec(config: dict, where: str) -> str | None:
    """The codec of a LitData data set's chunks (``None``: plain), checked to be whole-chunk
    compression (``compression_level`` ``"chunk"``, a ``.zstd.bin`` a chunk: what LitData wrote
    before its in-chunk levels, and what ``compression_level="chunk"`` writes)."""
    if not config.get("compression"):
        return None
    level = config.get("compression_level") or "chunk"
    if level != "chunk":
        raise ValueError(
            f"{where}: the chunks have {config['compression']!r} compression of level {level!r} (frames "
            "inside each chunk): only whole-chunk compression is read (compression_level='chunk')"
        )
    try:
        return codec_of(str(config["compression"]))
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None


def _litdata_compressed(
    shards: Shards, chunks: list, codec: str, field: str, infos: list[dict], index_dir: Any, where: str
) -> Any:
    """The source of a LitData data set of compressed chunks (of items: their offsets tables
    and items' sizes read from the decompressed chunks)."""
    raw_sizes = [chunk.get("chunk_bytes") for chunk in chunks]
    if not all(isinstance(size, int) for size in raw_sizes):
        raise ValueError(f"{where}: a chunk has no chunk_bytes (its decompressed size)")
    packed = ([codec] * len(chunks), raw_sizes, [{}] * len(chunks))
    build = compressed_build(_mds_build(field, infos), packed[0], raw_sizes)
    indexes, index_bytes = shard_indexes(shards, f"litdata-{field}", build, index_dir)
    return _sharded_source(shards, _parts(indexes), index_bytes, ("litdata", field), packed)


def _litdata_build(field: str, infos: list[dict]) -> Any:
    """A builder of chunk ``k``'s index: its items' sizes and offsets (the PyTree layout), or,
    when its items are empty and an Arrow IPC file follows them (LitData's ``LDARW01``
    trailer, what LitData writes for dict items when pyarrow is installed), the Arrow file's
    record batches (read with pyarrow)."""
    items = _mds_build(field, infos, "truncated")

    def build(shards: Shards, k: int) -> dict:
        size, samples = int(shards.sizes[k]), int(infos[k]["samples"])
        head = 4 * (samples + 2)
        tail = shards.read_range(k, size - 12, size) if size >= head + 12 else b""
        if tail[-8:] != LITDATA_ARROW_MAGIC:
            index = items(shards, k)
            index["read"] += len(tail)
            return index
        length = int.from_bytes(tail[:4], "little")
        start = size - 12 - length
        table = np.frombuffer(shards.read_range(k, 0, head), dtype="<u4").astype(np.int64)
        if start < head or table[0] != samples or table[-1] != start:
            raise ValueError(
                f"{shards.urls[k]}: its Arrow rows at offset {start} do not follow its items (corrupt)"
            )
        if (table[1:] != table[-1]).any():
            # Items, then their rows again as Arrow: the items are what the index reads.
            trimmed = Shards(shards.urls, shards.sizes.copy(), shards.stamps, shards.remote, shards.objects)
            trimmed.sizes[k] = start
            index = items(trimmed, k)
            index["read"] += len(tail)
            return index
        from ._parquet import litdata_arrow_index

        index = litdata_arrow_index(shards, k, field, start, length)
        index["read"] += len(tail) + head
        return index

    return build
