"""Records in object storage (S3 and S3-compatible stores): listing, and reading records
concurrently, whole objects or byte ranges of one object, with every request counted.

The client is boto3's (the AWS SDK), not fsspec/s3fs: it is one dependency (boto3 and botocore,
no aiobotocore or event loop), synchronous, and its clients are thread-safe, so a small thread
pool shares one client per process; it reads the usual environment natively
(``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID`` and
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION`` or ``AWS_DEFAULT_REGION``,
``AWS_PROFILE``, ``AWS_MAX_ATTEMPTS`` and ``AWS_RETRY_MODE``, and the shared config files).
``S3_ENDPOINT_URL`` (what MosaicML Streaming reads) is honoured too, when neither AWS variable
of the endpoint is set, so one environment serves both loaders.

boto3 is imported only when an ``s3://`` source is made or read: ``import ubershuffle`` never
imports it. A client does not pickle: each process makes its own on first use (after a fork
too), from its own environment, so credentials never travel in a pickle.
"""

from __future__ import annotations

import collections
import concurrent.futures
import os
import queue
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

WORKERS = 8
"""Requests in flight at once (one client's connection pool)."""
RANGE_BYTES = 8 << 20
"""A range request reads consecutive records of a blob up to this many bytes together."""
PIECE_BYTES = 4 << 20
"""A sharded source's run of records (a whole shard, or a rank's part of one) is one ranged
GET however long, its body read and handed on about this many bytes at a time: what a run in
flight holds in memory, twice (the piece handed on and the one being read)."""
INFLIGHT = 2 * WORKERS
"""Requests submitted ahead of the one being consumed: bounds the memory a read holds."""
LIST_KEYS = 1000
"""Keys asked for per page of a listing (S3's most)."""


class ObjectStoreError(OSError):
    """A request to the object store failed: one line naming the object (``s3://bucket/key``)
    and the store's reason, e.g. ``s3://data/a.jpg: NoSuchKey (The specified key does not
    exist.)``."""


def is_url(x: Any) -> bool:
    """Whether ``x`` is an ``s3://`` URL (a ``str``)."""
    return isinstance(x, str) and x.startswith("s3://")


def split_url(url: str) -> tuple[str, str]:
    """``s3://bucket/key`` as ``(bucket, key)``; a one-line ``ValueError`` when there is no bucket."""
    bucket, _, key = url[len("s3://") :].partition("/")
    if not bucket:
        raise ValueError(f"{url!r} names no bucket (expected s3://bucket/key)")
    return bucket, key


def _url(bucket: str, key: str) -> str:
    return f"s3://{bucket}/{key}"


def _reason(e: BaseException) -> str:
    """The store's reason for ``e`` in one line, without request details (a URL's query)."""
    response = getattr(e, "response", None)
    if isinstance(response, dict):
        error = response.get("Error") or {}
        code = str(error.get("Code") or "")
        message = str(error.get("Message") or "")
        if code.isdigit():  # a HEAD request's error has no body: only its status
            code = f"HTTP {code}"
        if code and message:
            return f"{code} ({message})"
        return code or message or type(e).__name__
    text = " ".join(str(e).split()) or type(e).__name__
    if type(e).__name__ in ("NoCredentialsError", "PartialCredentialsError"):
        text += " (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)"
    return re.sub(r"\?[^\s\"']*", "", text)


def _failures() -> tuple:
    """What a request or the read of its body raises when the store or the network fails
    (botocore is imported by then: a client exists)."""
    from botocore.exceptions import BotoCoreError, ClientError
    from urllib3.exceptions import HTTPError

    return (BotoCoreError, ClientError, HTTPError, OSError)


def _new_client() -> Any:
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise ImportError("records in s3:// need boto3: pip install boto3") from None
    endpoint = None
    if not (os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")):
        endpoint = os.environ.get("S3_ENDPOINT_URL") or None
    config = Config(max_pool_connections=WORKERS, connect_timeout=10, read_timeout=60)
    return boto3.session.Session().client("s3", endpoint_url=endpoint, config=config)


class ObjectStore:
    """This process's client of the object store, made on first use, and the count of its
    requests and of the bytes of the objects it read. Pickles without the client (the copy
    makes its own, and counts from 0)."""

    def __init__(self) -> None:
        self.requests = 0
        """Requests made (listings, heads and reads), failed ones included."""
        self.bytes_read = 0
        """Bytes of object data read."""
        self._made: Any = None
        """The client, once made."""
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def __reduce__(self) -> tuple:
        return (ObjectStore, ())

    def _client(self) -> Any:
        if self._pid != os.getpid():  # a forked child: the parent's lock may be held forever
            self._lock, self._pid, self._made = threading.Lock(), os.getpid(), None
        with self._lock:
            if self._made is None:
                self._made = _new_client()
            return self._made

    def _count(self, requests: int, nbytes: int = 0) -> None:
        with self._lock:
            self.requests += requests
            self.bytes_read += nbytes

    def _call(self, url: str, method: str, **kwargs: Any) -> dict:
        client = self._client()
        self._count(1)
        try:
            return getattr(client, method)(**kwargs)
        except _failures() as e:
            reason = _reason(e)
            if reason.startswith("PreconditionFailed"):  # an If-Match read of an object replaced
                raise ValueError(f"{url} changed since the source was made (its ETag differs)") from None
            raise ObjectStoreError(f"{url}: {reason}") from None

    def list(self, bucket: str, prefix: str) -> tuple[list[str], np.ndarray, list[str]]:
        """Every object under ``prefix`` (ListObjectsV2, page by page; nothing read): keys,
        sizes and ETags, sorted by key."""
        keys: list[str] = []
        sizes: list[int] = []
        etags: list[str] = []
        token = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": LIST_KEYS}
            if token:
                kwargs["ContinuationToken"] = token
            page = self._call(_url(bucket, prefix), "list_objects_v2", **kwargs)
            for item in page.get("Contents", ()):
                keys.append(item["Key"])
                sizes.append(int(item["Size"]))
                etags.append(item.get("ETag", ""))
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                break
        order = sorted(range(len(keys)), key=keys.__getitem__)
        return [keys[i] for i in order], np.array(sizes, dtype=np.int64)[order], [etags[i] for i in order]

    def head(self, bucket: str, key: str) -> tuple[int, str]:
        """The object's size and ETag (HeadObject)."""
        r = self._call(_url(bucket, key), "head_object", Bucket=bucket, Key=key)
        return int(r["ContentLength"]), r.get("ETag", "")

    def heads(self, urls: list[str]) -> list[tuple[int, str]]:
        """:meth:`head` of every URL, ``WORKERS`` at once, in order."""
        with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
            return list(pool.map(lambda url: self.head(*split_url(url)), urls))

    def get(self, bucket: str, key: str, first: int | None, end: int | None, etag: str) -> tuple[bytes, int]:
        """The bytes ``first..end`` of the object (the whole of it when ``first`` is ``None``),
        and the object's whole size; with ``etag``, only if the object still has that ETag."""
        url = _url(bucket, key)
        stream, whole = self.open(bucket, key, first, end, etag)
        try:
            body = self.read_body(url, stream, None)
        finally:
            stream.close()
        return body, len(body) if whole is None else whole

    def open(
        self, bucket: str, key: str, first: int | None, end: int | None, etag: str
    ) -> tuple[Any, int | None]:
        """A GET of the bytes ``first..end`` of the object (the whole of it when ``first`` is
        ``None``; with ``etag``, only if the object still has that ETag), its body not read yet
        (:meth:`read_body`; the caller closes it), and the object's whole size when the answer
        says it (a range's does)."""
        kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key}
        if first is not None:
            kwargs["Range"] = f"bytes={first}-{end - 1}"
        if etag:
            kwargs["IfMatch"] = etag
        r = self._call(_url(bucket, key), "get_object", **kwargs)
        whole = None
        content_range = r.get("ContentRange") or ""  # "bytes 2-4/11"
        if "/" in content_range and content_range.rsplit("/", 1)[1].isdigit():
            whole = int(content_range.rsplit("/", 1)[1])
        return r["Body"], whole

    def read_body(self, url: str, body: Any, n: int | None) -> bytes:
        """The next ``n`` bytes of an open GET's ``body`` (fewer at its end; all that is left
        when ``n`` is ``None``), counted."""
        try:
            data = body.read() if n is None else body.read(n)
        except _failures() as e:
            raise ObjectStoreError(f"{url}: {_reason(e)}") from None
        self._count(0, len(data))
        return data


class ObjectRecords:
    """Where an ``s3`` :class:`~ubershuffle.sources.RecordSource`'s records are: one object a
    record (``keys``), or consecutive byte ranges of one object (``blob_offsets``)."""

    def __init__(
        self,
        bucket_keys: list[tuple[str, str]],
        etags: list[str],
        blob_offsets: np.ndarray | None = None,
    ) -> None:
        self.bucket_keys = bucket_keys
        self.etags = etags
        self.blob_offsets = blob_offsets
        self.store = ObjectStore()

    def url(self, i: int) -> str:
        """Record ``i``'s object."""
        return _url(*self.bucket_keys[0 if self.blob_offsets is not None else i])

    def _requests(self, ids: np.ndarray) -> Iterator[list[int]]:
        """``ids`` in the order given, in groups read by one request each: consecutive records
        of a blob together, up to :data:`RANGE_BYTES`; one object a request otherwise."""
        if self.blob_offsets is None:
            for i in ids:
                yield [int(i)]
            return
        off = self.blob_offsets
        group: list[int] = []
        for i in map(int, ids):
            if group and (i != group[-1] + 1 or off[i + 1] - off[group[0]] > RANGE_BYTES):
                yield group
                group = []
            group.append(i)
        if group:
            yield group

    def _read(self, group: list[int], sizes: np.ndarray) -> list[tuple[int, np.ndarray]]:
        if self.blob_offsets is None:
            (i,) = group
            bucket, key = self.bucket_keys[i]
            body, _ = self.store.get(bucket, key, None, None, self.etags[i])
            record = np.frombuffer(body, dtype=np.uint8)
            if len(record) != sizes[i]:
                raise ValueError(
                    f"record {i} ({self.url(i)}) has {len(record)} bytes now, "
                    f"{int(sizes[i])} when the source was made"
                )
            return [(i, record)]
        off = self.blob_offsets
        first, end = int(off[group[0]]), int(off[group[-1] + 1])
        if first == end:  # empty records: a range request cannot ask for nothing
            return [(i, np.zeros(0, dtype=np.uint8)) for i in group]
        bucket, key = self.bucket_keys[0]
        body, whole = self.store.get(bucket, key, first, end, self.etags[0])
        if whole != int(off[-1]) or len(body) != end - first:
            raise ValueError(f"{self.url(0)} has {whole} bytes now, {int(off[-1])} when the source was made")
        data = np.frombuffer(body, dtype=np.uint8)
        return [(i, data[off[i] - first : off[i + 1] - first]) for i in group]

    def record(self, i: int, sizes: np.ndarray) -> np.ndarray:
        """Record ``i`` (``sizes``: the records' sizes when the source was made), read now."""
        return self._read([i], sizes)[0][1]

    def read(self, ids: np.ndarray, sizes: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
        """``(i, record i)`` for every ``i`` of ``ids``, in order, read by :data:`WORKERS`
        threads with at most :data:`INFLIGHT` requests ahead."""
        yield from _in_flight(self._requests(ids), lambda group: self._read(group, sizes))


def _in_flight(groups: Iterable, read: Callable[[Any], list]) -> Iterator:
    """Every item of ``read(group)`` for each of ``groups``, in order, read by :data:`WORKERS`
    threads with at most :data:`INFLIGHT` groups ahead (:func:`_streamed`, each group's items
    handed on at once)."""
    return _streamed(groups, lambda group, put: put(read(group)))


GAP_BYTES = 8 << 10
"""Bytes between two records of one object that a range request reads rather than split into
two requests: the tar headers and small members between two samples' chosen members (with
WebDataset's pax headers, a label and its headers take 2 KiB). A smaller record of another
rank between two of this rank's is read with them."""


def taker(read: Callable[[int], bytes]) -> Callable[[int], bytes]:
    """``take(n)``: the next ``n`` bytes of ``read`` (which may give fewer), fewer only at its
    end."""

    def take(n: int) -> bytes:
        parts = []
        while n > 0 and (data := read(n)):
            parts.append(data)
            n -= len(data)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    return take


def skip(take: Callable[[int], bytes], n: int) -> int:
    """Reads and drops the next ``n`` bytes of ``take`` (a hole between two ranges that one
    read reads through), :data:`PIECE_BYTES` at a time; the bytes dropped."""
    dropped = 0
    while dropped < n:
        data = take(min(n - dropped, PIECE_BYTES))
        if not data:
            break
        dropped += len(data)
    return dropped


def cut_records(
    take: Callable[[int], bytes],
    at: int,
    spans: list[tuple[int, int, int]],
    put: Callable[[list], None],
    what: str,
) -> int:
    """Hands on (``put``) the records ``spans`` (``(i, start, size)``, each at or after the end
    of the one before, none before ``at``) of the bytes ``take`` gives from offset ``at``, a
    piece of about :data:`PIECE_BYTES` at a time; the offset reached. Bytes that end early are a
    one-line ``ValueError``: ``what`` ended at byte ..."""
    piece: list[tuple[int, np.ndarray]] = []
    held = 0
    for i, start, size in spans:
        at += skip(take, start - at)
        data = take(size) if at == start else b""
        if len(data) != size:
            raise ValueError(f"{what} ended at byte {at + len(data)}")
        at += size
        piece.append((i, np.frombuffer(data, dtype=np.uint8)))
        held += size
        if held >= PIECE_BYTES:
            put(piece)
            piece, held = [], 0
    if piece:
        put(piece)
    return at


def near_runs(spans: Iterable[tuple[Any, int, int, int]], gap: float = GAP_BYTES) -> Iterator[list]:
    """The items of ``spans`` (``(item, shard, start, end)``: bytes ``start..end`` of a shard), in
    the order given, in runs read by one range request each, however long (a whole shard's
    items are one run): items of one shard, each starting at or after the end of the one before,
    at most ``gap`` after it (:data:`GAP_BYTES`: pyarrow's own coalescing of ranges reads holes
    of up to 8 KiB too)."""
    run: list = []
    shard, end = None, 0
    for item, where, start, stop in spans:
        if run and not (where == shard and end <= start <= end + gap):
            yield run
            run = []
        run.append(item)
        shard, end = where, stop
    if run:
        yield run


class ObjectRanges(ObjectRecords):
    """Where a sharded ``s3`` :class:`~ubershuffle.sources.RecordSource`'s records are: record
    ``i`` at byte ``starts[i]`` of object ``shards[i]`` (a WebDataset tar, an MDS shard, a
    LitData chunk). Records of one object near each other are read by one range request."""

    def __init__(
        self,
        bucket_keys: list[tuple[str, str]],
        etags: list[str],
        object_sizes: np.ndarray,
        shards: np.ndarray,
        starts: np.ndarray,
    ) -> None:
        super().__init__(bucket_keys, etags)
        self.object_sizes = np.asarray(object_sizes, dtype=np.int64)
        self.shards = np.asarray(shards, dtype=np.int64)
        self.starts = np.asarray(starts, dtype=np.int64)

    def url(self, i: int) -> str:
        """Record ``i``'s object."""
        return _url(*self.bucket_keys[int(self.shards[i])])

    def _runs(self, ids: np.ndarray, sizes: np.ndarray) -> Iterator[list[int]]:
        """``ids`` in the order given, in runs read by one range request each (:func:`near_runs`)."""
        spans = ((i, self.shards[i], self.starts[i], self.starts[i] + sizes[i]) for i in map(int, ids))
        return near_runs(spans)

    def _read(self, group: list[int], sizes: np.ndarray) -> list[tuple[int, np.ndarray]]:
        first = int(self.starts[group[0]])
        end = int(self.starts[group[-1]]) + int(sizes[group[-1]])
        if first == end:  # empty records: a range request cannot ask for nothing
            return [(i, np.zeros(0, dtype=np.uint8)) for i in group]
        shard = int(self.shards[group[0]])
        bucket, key = self.bucket_keys[shard]
        body, whole = self.store.get(bucket, key, first, end, self.etags[shard])
        want = int(self.object_sizes[shard])
        if whole != want or len(body) != end - first:
            raise ValueError(f"{_url(bucket, key)} has {whole} bytes now, {want} when its index was made")
        data = np.frombuffer(body, dtype=np.uint8)
        out = []
        for i in group:
            at = int(self.starts[i]) - first
            out.append((i, data[at : at + int(sizes[i])]))
        return out

    def _stream(self, group: list[int], sizes: np.ndarray, put: Callable[[list], None]) -> None:
        """Reads the run ``group`` by one ranged GET, handing its records on (``put``) a piece
        of about :data:`PIECE_BYTES` at a time as its body comes."""
        first = int(self.starts[group[0]])
        end = int(self.starts[group[-1]]) + int(sizes[group[-1]])
        if first == end:  # empty records: a range request cannot ask for nothing
            put([(i, np.zeros(0, dtype=np.uint8)) for i in group])
            return
        shard = int(self.shards[group[0]])
        bucket, key = self.bucket_keys[shard]
        url, want = _url(bucket, key), int(self.object_sizes[shard])
        body, whole = self.store.open(bucket, key, first, end, self.etags[shard])
        try:
            if whole is not None and whole != want:
                raise ValueError(f"{url} has {whole} bytes now, {want} when its index was made")
            take = taker(lambda n: self.store.read_body(url, body, n))
            spans = [(i, int(self.starts[i]), int(sizes[i])) for i in group]
            cut_records(take, first, spans, put, f"{url}: the read of bytes {first}..{end}")
        finally:
            body.close()

    def read(self, ids: np.ndarray, sizes: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
        """``(i, record i)`` for every ``i`` of ``ids``, in order, a run of neighbours of one
        object by one range request (however long: its body is streamed), on :data:`WORKERS`
        threads with at most :data:`INFLIGHT` runs ahead."""
        yield from _streamed(self._runs(ids, sizes), lambda group, put: self._stream(group, sizes, put))


class _Stopped(Exception):
    """The reader of :func:`_streamed` stopped before a producer ended."""


_DONE = object()
"""A producer's last item."""


def _streamed(groups: Iterable, produce: Callable[[Any, Callable[[list], None]], None]) -> Iterator:
    """Every item of every list ``produce(group, put)`` puts, group after group in order. Each
    group's producer runs on one of :data:`WORKERS` threads, at most :data:`INFLIGHT` groups
    ahead, and hands its lists on through a queue of one (a producer ahead of the reader waits
    for it); a producer's error is raised here, where its group's items would come."""
    stop = threading.Event()

    def run(group: Any, out: queue.Queue) -> None:
        def put(item: Any) -> None:
            while not stop.is_set():
                try:
                    out.put(item, timeout=0.1)
                    return
                except queue.Full:
                    continue
            raise _Stopped

        try:
            produce(group, put)
            put(_DONE)
        except _Stopped:
            pass
        except BaseException as e:  # the reader raises it
            try:
                put(e)
            except _Stopped:
                pass

    def drain(out: queue.Queue) -> Iterator:
        while (item := out.get()) is not _DONE:
            if isinstance(item, BaseException):
                raise item
            yield from item

    pool = concurrent.futures.ThreadPoolExecutor(WORKERS)
    try:
        pending: collections.deque = collections.deque()
        for group in groups:
            out: queue.Queue = queue.Queue(maxsize=1)
            pool.submit(run, group, out)
            pending.append(out)
            if len(pending) >= INFLIGHT:
                yield from drain(pending.popleft())
        while pending:
            yield from drain(pending.popleft())
    finally:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
