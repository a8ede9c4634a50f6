"""What a WebDataset source costs: the bytes and requests its index reads (local shards and an S3
server, moto's, in a process of its own on loopback), against the data set's size, its time, a
restart's (the cache), and what reading every record from the object store costs the training
thread (a pure-Python loop's rate in the main thread while the records load on the source's
threads, against the loop alone, and against the loop beside the same load in another process).

The shards are written by WebDataset's own TarWriter (a .jpg of random bytes, lognormal sizes
of mean ``--mean-kb``, and a .cls a sample). Times are this machine's.

Run: python python/benchmarks/bench_shards.py [--shards 50 --samples 1000 --mean-kb 20
--s3-shards 10] (needs webdataset, boto3 and moto[server]).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import webdataset as wds

from ubershuffle import RecordStore
from ubershuffle.sources import webdataset


def write(folder: pathlib.Path, shards: int, samples: int, mean_kb: float, seed: int) -> list[pathlib.Path]:
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    sigma = 0.7
    mu = np.log(mean_kb * 1000) - sigma**2 / 2
    paths = []
    for s in range(shards):
        path = folder / f"train-{s:06d}.tar"
        with wds.TarWriter(str(path)) as w:
            for k in range(samples):
                size = int(rng.lognormal(mu, sigma))
                w.write({"__key__": f"{s:06d}{k:06d}", "jpg": rng.bytes(size), "cls": b"%d" % (k % 10)})
        paths.append(path)
    return paths


def spin(seconds: float) -> float:
    """Iterations per second of a pure-Python loop over ``seconds``."""
    n, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(1000):
            n += 1
    return n / seconds


def moto_bucket(bucket: str) -> tuple:
    """Starts moto's S3 server on a free loopback port, in a process of its own, points this
    process's boto3 at it (``AWS_ENDPOINT_URL`` and test credentials in ``os.environ``) and makes
    ``bucket``; returns the server's process (terminate it when done) and a boto3 client."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, AWS_ACCESS_KEY_ID="k", AWS_SECRET_ACCESS_KEY="s", AWS_DEFAULT_REGION="us-east-1")
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.environ.update(env, AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}")
    import boto3

    client = boto3.client("s3")
    for _ in range(100):
        try:
            client.create_bucket(Bucket=bucket)
            break
        except Exception:  # noqa: BLE001 (the server is starting)
            time.sleep(0.1)
    return server, client


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shards", type=int, default=50)
    p.add_argument("--samples", type=int, default=1000, help="samples per shard")
    p.add_argument("--mean-kb", type=float, default=20.0)
    p.add_argument("--s3-shards", type=int, default=10, help="shards uploaded to the S3 server")
    args = p.parse_args()
    root = pathlib.Path(tempfile.mkdtemp(prefix="bench-shards-"))
    paths = write(root / "data", args.shards, args.samples, args.mean_kb, 0)
    data = sum(p.stat().st_size for p in paths)
    pattern = str(root / "data" / f"train-{{000000..{args.shards - 1:06d}}}.tar")
    t = time.perf_counter()
    local = webdataset(pattern, index_dir=root / "index")
    built = time.perf_counter() - t
    t = time.perf_counter()
    again = webdataset(pattern, index_dir=root / "index")
    cached = time.perf_counter() - t
    assert again.index_bytes_read == 0
    print(
        f"local: {len(local)} records in {args.shards} shards, {data / 1e6:.1f} MB, of which "
        f"{(data - local.total_bytes) / 1e6:.1f} MB are not the records (tar headers, labels); index "
        f"read {local.index_bytes_read / 1e6:.2f} MB ({local.index_bytes_read / data:.2%} of the "
        f"shards) in {built:.2f} s; from the cache {cached:.3f} s"
    )

    server, client = moto_bucket("data")
    try:
        shards = paths[: args.s3_shards]
        for path in shards:
            client.upload_file(str(path), "data", path.name)
        size = sum(p.stat().st_size for p in shards)
        url = f"s3://data/train-{{000000..{len(shards) - 1:06d}}}.tar"
        t = time.perf_counter()
        remote = webdataset(url, index_dir=root / "s3-index")
        built = time.perf_counter() - t
        gets = remote.requests - len(shards)
        print(
            f"s3: {len(remote)} records in {len(shards)} shards, {size / 1e6:.1f} MB; index read "
            f"{remote.index_bytes_read / 1e6:.2f} MB ({remote.index_bytes_read / size:.2%}) by {gets} "
            f"ranged GETs ({gets / len(remote):.2f} a record) and {len(shards)} HeadObjects in {built:.2f} s"
        )
        # The training thread while every record loads from the object store.
        alone = spin(3.0)
        store = RecordStore(remote.offsets)
        before = remote.requests
        done = threading.Event()
        loaded = {}

        def load() -> None:
            t = time.perf_counter()
            loaded["bytes"] = remote.load(store, np.arange(len(remote)))
            loaded["seconds"] = time.perf_counter() - t
            done.set()

        threading.Thread(target=load).start()
        rates = []
        while not done.is_set():
            rates.append(spin(0.5))
        store.close()
        beside = float(np.median(rates)) if rates else float("nan")
        # The same load in another process (its own interpreter): what the machine's two cores
        # and the S3 server cost the loop, without this process's GIL.
        code = (
            "import sys, numpy as np\n"
            "from ubershuffle import RecordStore\n"
            "from ubershuffle.sources import webdataset\n"
            "s = webdataset(sys.argv[1], index_dir=sys.argv[2])\n"
            "st = RecordStore(s.offsets)\n"
            "s.load(st, np.arange(len(s)))\n"
            "st.close()\n"
        )
        other = subprocess.Popen([sys.executable, "-c", code, url, str(root / "s3-index")])
        apart = []
        while other.poll() is None:
            apart.append(spin(0.5))
        elsewhere = float(np.median(apart)) if apart else float("nan")
        print(
            f"s3 read: {loaded['bytes'] / 1e6:.1f} MB of records by {remote.requests - before} range "
            f"requests in {loaded['seconds']:.2f} s; a Python loop in the main thread ran at "
            f"{beside / alone:.2f}x its rate alone meanwhile, and at {elsewhere / alone:.2f}x while "
            "another process loaded the same records (the cores' and the server's share, no GIL)"
        )
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
