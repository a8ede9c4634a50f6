"""The JPEG digits in the formats of the loaders that issue 54 compares, in an S3 bucket, and an
S3 server (moto) that logs every request it answers.

``make`` reads the folder that ``netns_train_rank.py --make-data`` writes (``DIR/train/*.jpg``,
labels in ``DIR/labels-train.npy``), takes its first ``--records`` JPEGs in name order (record
``i`` is the ``i``-th file), and writes, under ``--out``:

- ``mds/``: a MosaicML Streaming (MDS) data set by ``streaming.MDSWriter``, columns ``jpeg``
  (``bytes``: the file's bytes as they are), ``label`` (``int``) and ``id`` (``int``: the
  record's index), records in id order, shards of at most ``--chunk-bytes``: ``index.json``,
  ``shard.00000.mds``, ...;
- ``lit/``: a LitData optimized data set by ``litdata.optimize`` (one worker, so chunks hold
  records in id order), items ``{"jpeg": bytes, "label": int, "id": int}``, chunks of at most
  ``--chunk-bytes``: ``index.json``, ``chunk-0-0.bin``, ...;
- ``manifest.json``: the records' sizes and labels, and for each format the shard (chunk) of
  every record and the shards' sizes, so a rank's log of sample ids can be turned into shards.

With ``--bucket`` (and the endpoint in ``AWS_ENDPOINT_URL``; credentials from the usual
variables) it then uploads, by boto3, to ``s3://BUCKET/``:

- ``mds/index.json``, ``mds/shard.NNNNN.mds``: arm m's ``remote``;
- ``lit/index.json``, ``lit/chunk-0-K.bin``: arm l's ``input_dir``;
- ``objects/NNNNN.jpg``: one object per record, the JPEG's bytes, keys sorting in id order:
  ``ShuffleGroup("s3://BUCKET/objects/", ...)`` gives record ``i`` = ``objects/{i:05d}.jpg``
  (arms p and s); labels stay in the rank's local ``labels-train.npy``;
- ``manifest.json``: as above.

``serve`` runs moto's S3 server (the same WSGI app as ``moto_server``) and appends one JSON line
per request it answered to ``--log``: ``{"t", "client", "method", "path", "range", "status",
"bytes"}``, ``bytes`` being the response body's length as sent. That log is the object store's
count of what each client (address) read, whatever the client library (boto3, obstore).

Usage:
  python loaders_data.py serve --port 9000 --log requests.jsonl &
  AWS_ENDPOINT_URL=http://127.0.0.1:9000 AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=x \\
    python loaders_data.py make --data DIR --out OUT --bucket digits [--records 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import threading
import time

import numpy as np

os.environ.setdefault("LITDATA_DISABLE_VERSION_CHECK", "1")  # litdata asks PyPI otherwise

PREFIXES = {"mds": "mds/", "lit": "lit/", "objects": "objects/"}


def records(data: pathlib.Path, count: int | None) -> tuple[list, np.ndarray]:
    """The first ``count`` JPEG files of ``data/train`` (all if None) and their labels."""
    files = sorted((data / "train").glob("*.jpg"))[:count]
    labels = np.load(data / "labels-train.npy")[: len(files)]
    if not files:
        raise SystemExit(f"no JPEG under {data / 'train'}: make it with netns_train_rank.py --make-data")
    return files, labels


def write_mds(files: list, labels: np.ndarray, out: pathlib.Path, chunk_bytes: int) -> None:
    from streaming import MDSWriter

    columns = {"jpeg": "bytes", "label": "int", "id": "int"}
    with MDSWriter(out=str(out), columns=columns, size_limit=chunk_bytes, compression=None) as writer:
        for i, (f, label) in enumerate(zip(files, labels)):
            writer.write({"jpeg": f.read_bytes(), "label": int(label), "id": i})


def _lit_item(item: tuple) -> dict:
    i, path, label = item
    return {"jpeg": pathlib.Path(path).read_bytes(), "label": int(label), "id": int(i)}


def write_lit(files: list, labels: np.ndarray, out: pathlib.Path, chunk_bytes: int) -> None:
    import litdata

    inputs = [(i, str(f), int(label)) for i, (f, label) in enumerate(zip(files, labels))]
    litdata.optimize(
        fn=_lit_item,
        inputs=inputs,
        output_dir=str(out),
        chunk_bytes=chunk_bytes,
        num_workers=1,
        mode="overwrite",
    )


def shard_map(index: dict, kind: str) -> tuple[list, list, list]:
    """Per shard of an ``index.json``: its file name, its record count and its bytes."""
    if kind == "mds":
        shards = index["shards"]
        return (
            [s["raw_data"]["basename"] for s in shards],
            [int(s["samples"]) for s in shards],
            [int(s["raw_data"]["bytes"]) for s in shards],
        )
    chunks = index["chunks"]
    return (
        [c["filename"] for c in chunks],
        [int(c["chunk_size"]) for c in chunks],
        [int(c["chunk_bytes"]) for c in chunks],
    )


def manifest(files: list, labels: np.ndarray, out: pathlib.Path, kinds: list) -> dict:
    m: dict = {
        "records": len(files),
        "sizes": [f.stat().st_size for f in files],
        "labels": [int(x) for x in labels],
        "objects": [f"{PREFIXES['objects']}{i:05d}.jpg" for i in range(len(files))],
    }
    for kind in kinds:
        names, counts, sizes = shard_map(json.loads((out / kind / "index.json").read_text()), kind)
        # Both writers keep records in id order (MDSWriter in write order; optimize with one
        # worker): shard k holds the next counts[k] ids.
        m[kind] = {
            "files": names,
            "bytes": sizes,
            "shard_of": np.repeat(np.arange(len(counts)), counts).tolist(),
        }
        if len(m[kind]["shard_of"]) != len(files):
            raise SystemExit(f"{kind}: {len(m[kind]['shard_of'])} records in the index, {len(files)} written")
    return m


def upload(out: pathlib.Path, files: list, bucket: str, kinds: list) -> int:
    """Uploads the layouts written (``kinds``), the objects and the manifest; returns the bytes
    uploaded."""
    import boto3
    from botocore.exceptions import ClientError

    s3 = boto3.client("s3")
    try:
        s3.create_bucket(Bucket=bucket)
    except ClientError as e:
        if e.response["Error"]["Code"] not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            raise
    sent = 0
    for kind in kinds:
        for f in sorted((out / kind).iterdir()):
            s3.upload_file(str(f), bucket, PREFIXES[kind] + f.name)
            sent += f.stat().st_size
    for i, f in enumerate(files):
        body = f.read_bytes()
        s3.put_object(Bucket=bucket, Key=f"{PREFIXES['objects']}{i:05d}.jpg", Body=body)
        sent += len(body)
    s3.upload_file(str(out / "manifest.json"), bucket, "manifest.json")
    return sent


def make(args: argparse.Namespace) -> None:
    files, labels = records(args.data, args.records)
    args.out.mkdir(parents=True, exist_ok=True)
    for kind in ("mds", "lit"):
        if (args.out / kind).exists():
            for f in (args.out / kind).iterdir():
                f.unlink()
    kinds = [k for k in args.formats.split(",") if k]
    unknown = sorted(set(kinds) - {"mds", "lit"})
    if unknown:
        raise SystemExit(f"--formats {','.join(unknown)}: use mds and lit (the objects are always written)")
    if "mds" in kinds:
        write_mds(files, labels, args.out / "mds", args.chunk_bytes)
    if "lit" in kinds:
        write_lit(files, labels, args.out / "lit", args.chunk_bytes)
    m = manifest(files, labels, args.out, kinds)
    (args.out / "manifest.json").write_text(json.dumps(m))
    summary = {"records": m["records"], "bytes": int(sum(m["sizes"]))}
    for kind in ("mds", "lit"):
        summary[f"{kind}_shards"] = len(m[kind]["files"]) if kind in m else 0
        summary[f"{kind}_bytes"] = int(sum(m[kind]["bytes"])) if kind in m else 0
    if args.bucket:
        if not (os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL_S3")):
            raise SystemExit("--bucket needs the S3 endpoint in AWS_ENDPOINT_URL")
        summary["uploaded_bytes"] = upload(args.out, files, args.bucket, kinds)
        summary["bucket"] = args.bucket
    print(json.dumps(summary))


class RequestLog:
    """WSGI middleware: one JSON line per answered request, with the body bytes sent."""

    def __init__(self, app, path: pathlib.Path) -> None:
        self.app, self.lock = app, threading.Lock()
        self.out = open(path, "a", buffering=1)  # noqa: SIM115 (lives as long as the server)

    def __call__(self, environ: dict, start_response):
        row = {
            "t": time.time(),
            "client": environ.get("REMOTE_ADDR"),
            "method": environ.get("REQUEST_METHOD"),
            "path": environ.get("PATH_INFO"),
            "range": environ.get("HTTP_RANGE"),
        }

        def start(status, headers, exc_info=None):
            row["status"] = int(status.split()[0])
            return start_response(status, headers, exc_info)

        sent = 0
        try:
            for piece in self.app(environ, start):
                sent += len(piece)
                yield piece
        finally:
            row["bytes"], row["t_end"] = sent, time.time()
            with self.lock:
                self.out.write(json.dumps(row) + "\n")


def serve(args: argparse.Namespace) -> None:
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    app = DomainDispatcherApplication(create_backend_app)
    if args.log:
        app = RequestLog(app, args.log)
    server = make_server(args.host, args.port, app, threaded=True, request_handler=MotoRequestHandler)
    print(
        json.dumps({"serving": f"http://{args.host}:{server.server_port}", "log": str(args.log)}), flush=True
    )
    server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("make", help="write MDS, LitData and plain objects (and upload them with --bucket)")
    p.add_argument(
        "--data", type=pathlib.Path, required=True, help="the JPEG folder (train/, labels-train.npy)"
    )
    p.add_argument("--out", type=pathlib.Path, required=True)
    p.add_argument("--records", type=int, default=None, help="the first N JPEGs (default all)")
    p.add_argument(
        "--chunk-bytes",
        type=int,
        default=1 << 20,
        help="MDS shard / LitData chunk size limit (Streaming needs cache_limit >= 4 shards)",
    )
    p.add_argument("--bucket", help="upload to s3://BUCKET at AWS_ENDPOINT_URL")
    p.add_argument(
        "--formats",
        default="mds,lit",
        help="the loaders' layouts to write, of mds and lit (comma-separated; each needs its loader "
        "installed); the objects are always written",
    )
    p.set_defaults(run=make)
    s = sub.add_parser("serve", help="moto's S3 server, logging every request")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=9000, help="0: any free port (printed)")
    s.add_argument("--log", type=pathlib.Path, help="append a JSON line per request here")
    s.set_defaults(run=serve)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
