"""What indexing a WebDataset set in object storage reads: 50,000 small records in 50 shards
(by default) written by WebDataset's own TarWriter (a .jpg of random bytes, lognormal sizes of
mean ``--mean-kb``, and a .cls a sample), uploaded to an S3 server (moto's, in a process of its
own on loopback), then indexed from the tar headers alone. Reports the bytes and requests the
index read against the data set's size, a restart's (the index from ``index_dir``), and what
reading every record by shard then reads (each shard by one ranged GET), one row each, into
``shard-index.csv`` under ``--out-dir`` (a new temporary folder unless given; the shards are
written to a temporary folder and removed at the end). Times are this
machine's and the server's (moto serves a request in about a millisecond).

Run: python python/benchmarks/bench_shard_index.py [--shards 50 --samples 1000 --mean-kb 4
--out-dir DIR] (needs webdataset, boto3 and moto[server]).
"""

from __future__ import annotations

import argparse
import csv
import pathlib
import shutil
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_shards import moto_bucket, write  # noqa: E402 (the same shards as bench_shards.py)

from ubershuffle import RecordStore  # noqa: E402
from ubershuffle.sources import webdataset  # noqa: E402

FIELDS = [
    "what",
    "shards",
    "records",
    "data_bytes",
    "record_bytes",
    "bytes_read",
    "bytes_read_over_data",
    "get_requests",
    "head_requests",
    "gets_per_record",
    "seconds",
]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shards", type=int, default=50)
    p.add_argument("--samples", type=int, default=1000, help="samples per shard")
    p.add_argument("--mean-kb", type=float, default=4.0, help="mean size of a record (the .jpg)")
    p.add_argument("--out-dir", type=pathlib.Path, default=None, help="default: a new temporary folder")
    args = p.parse_args()
    root = pathlib.Path(tempfile.mkdtemp(prefix="bench-shard-index-"))
    out_dir = args.out_dir or root
    paths = write(root / "data", args.shards, args.samples, args.mean_kb, 0)
    data = sum(p.stat().st_size for p in paths)

    moto, client = moto_bucket("data")
    rows = []
    try:
        for path in paths:
            client.upload_file(str(path), "data", path.name)
        url = f"s3://data/train-{{000000..{len(paths) - 1:06d}}}.tar"

        def row(what: str, source, gets: int, heads: int, bytes_read: int, seconds: float) -> dict:
            return {
                "what": what,
                "shards": len(paths),
                "records": len(source),
                "data_bytes": data,
                "record_bytes": source.total_bytes,
                "bytes_read": bytes_read,
                "bytes_read_over_data": round(bytes_read / data, 4),
                "get_requests": gets,
                "head_requests": heads,
                "gets_per_record": round(gets / len(source), 4),
                "seconds": round(seconds, 3),
            }

        # A source lists its shards by a HeadObject each; the rest of its requests are GETs.
        shards = len(paths)
        index_dir = root / "index"
        t = time.perf_counter()
        source = webdataset(url, index_dir=index_dir)
        seconds = time.perf_counter() - t
        assert source.bytes_read == source.index_bytes_read
        gets = source.requests - shards
        rows.append(row("index from the headers", source, gets, shards, source.index_bytes_read, seconds))
        t = time.perf_counter()
        again = webdataset(url, index_dir=index_dir)
        seconds = time.perf_counter() - t
        gets = again.requests - shards
        rows.append(row("index from index_dir (a restart)", again, gets, shards, again.bytes_read, seconds))
        store = RecordStore(source.offsets)
        requests, bytes_read = source.requests, source.bytes_read
        t = time.perf_counter()
        source.load(store, np.arange(len(source)))
        seconds = time.perf_counter() - t
        store.close()
        gets, bytes_read = source.requests - requests, source.bytes_read - bytes_read
        rows.append(row("every record by shard", source, gets, 0, bytes_read, seconds))
    finally:
        moto.terminate()
        moto.wait()
        for made in ("data", "index"):  # the shards and their index; the CSV stays
            shutil.rmtree(root / made, ignore_errors=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / "shard-index.csv"
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    for r in rows:
        print(
            f"{r['what']}: {r['bytes_read']} bytes ({r['bytes_read_over_data']:.2%} of the {r['data_bytes']} "
            f"bytes of {r['shards']} shards, {r['records']} records) by {r['get_requests']} GETs and "
            f"{r['head_requests']} HeadObjects, {r['seconds']} s"
        )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
