"""One rank of ``cargo xtask netns-loaders``: the digits CNN trained under DDP (gloo) on JPEG
records that one of the experiment's arms brings from an S3 object store (moto's server, in the
store's namespace, ``loaders_data.py serve``):

- ``m``: MosaicML Streaming (``streaming.StreamingDataset`` over ``s3://B/mds``, ``cache_limit``
  ``--cache-bytes``), iterated by a plain ``DataLoader``;
- ``l``: LitData (``litdata.StreamingDataset`` over ``s3://B/lit``, ``max_cache_size``
  ``--cache-bytes``), iterated by ``litdata.StreamingDataLoader`` (it sets the batch size that
  its chunk assignment depends on);
- ``p``: ``ShuffleGroup("s3://B/objects/")``, peer mode, partial-local with Q = ``--fraction``;
- ``s``: ``ShuffleGroup`` store mode, coded (``auto``), ``alpha = --alpha``; rank 0 is the store
  (in the store's namespace, reading ``s3://B/objects/``), the training ranks pass no source.

Every rank is its own node, as in every netns experiment (one rank per namespace): the script
sets ``LOCAL_RANK=0``, ``LOCAL_WORLD_SIZE=1`` and ``NNODES=WORLD_SIZE`` before Streaming or
LitData read them. Every arm reads its batches the same way (the JPEG bytes, the label and the
record's id, decoded in the training loop), so ``exposed_seconds`` (the training loop's wait for
its next batch, plus ``set_epoch`` for p and s) is data time alone in every arm. With
``--compute`` every step also sleeps that long after its update, the CPU idle as while a GPU
computes a larger model: the compute window a real job gives the loaders to hide their reads.

Per epoch a training rank logs to ``OUT/rank-R.json``: the record ids it trained on, in order;
when the epoch started and ended (the host's clock, shared by every namespace); exposed data
time; its interface's byte counters; the most its cache held during the epoch (the cache dir's
bytes sampled every 0.2 s for m and l; the plane's ``peak_held_bytes`` for p and s: what the
rank held when the epoch's delivery ended, before it let go of the previous epoch's records); training loss;
and, on the first training rank, held-out accuracy. An exception ends the arm and is logged as
``error`` with its traceback (exit 2); an epoch (or the set-up) longer than ``--epoch-timeout``
(a hung loader, or a peer that failed and left DDP waiting) is logged as ``error: timeout ...``
with every thread's stack (exit 3). The log is written after every epoch, so a rank that dies
leaves what it had. Bytes from the object store are not counted here: the server's request log
counts them per client address, whichever library asked.

Workarounds, each for a failure met (see docs/loaders.md):

- Streaming keys its shared memory (``/dev/shm/000000_locals``, file locks in the temp dir) by a
  prefix that each node's leader picks at the same moment, so two nodes on one host collide
  (``FileExistsError``). Namespaces share /dev/shm, so the script renames Streaming's objects
  with the rank (``r{R}...``), what a private /dev/shm per node would give.
- Streaming refuses a ``cache_limit`` below 4 shards: the xtask sizes the shards for the
  smallest cache of any arm.
- LitData's obstore client refuses ``http://`` endpoints (``builder error``):
  ``litdata.streaming.downloader._OBSTORE_CLIENT_OPTIONS["allow_http"] = True``.
- LitData asks PyPI for a newer version (no route from a namespace):
  ``LITDATA_DISABLE_VERSION_CHECK=1``.

Usage: python netns_loaders_rank.py --arm m --bucket B --endpoint http://HOST:PORT --data DIR
  --cache-bytes BYTES --out DIR [--epochs 4 ...]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pathlib
import shutil
import sys
import threading
import time
import traceback

from netns_node import check_node_rank

# Every rank is a node: set before Streaming or LitData read the environment.
os.environ["LOCAL_RANK"] = "0"
os.environ["LOCAL_WORLD_SIZE"] = "1"
if "WORLD_SIZE" in os.environ:
    os.environ["NNODES"] = os.environ["WORLD_SIZE"]
os.environ.setdefault("LITDATA_DISABLE_VERSION_CHECK", "1")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("AWS_ACCESS_KEY_ID", "netns-loaders")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "netns-loaders")

ARMS = ("m", "l", "p", "s")


def counters(interface: str) -> tuple:
    """The interface's (tx, rx) byte counters, from this namespace's sysfs; (0, 0) where it has
    none (a run on loopback)."""
    base = pathlib.Path("/sys/class/net") / interface / "statistics"
    try:
        return int((base / "tx_bytes").read_text()), int((base / "rx_bytes").read_text())
    except OSError:
        return 0, 0


def dir_bytes(root: pathlib.Path) -> int:
    """Bytes of the files under ``root`` (files evicted meanwhile are skipped)."""
    total = 0
    for path in root.rglob("*"):
        try:
            if path.is_file():
                total += path.stat().st_size
        except FileNotFoundError:
            pass
    return total


class Peak(threading.Thread):
    """The most bytes ``measure()`` gave since the last ``take()``, sampled every 0.2 s."""

    def __init__(self, measure) -> None:
        super().__init__(daemon=True)
        self.measure, self.lock, self.peak = measure, threading.Lock(), 0
        self.start()

    def run(self) -> None:
        while True:
            now = self.measure()
            with self.lock:
                self.peak = max(self.peak, now)
            time.sleep(0.2)

    def take(self) -> int:
        now = self.measure()
        with self.lock:
            peak, self.peak = max(self.peak, now), now
        return peak


class Watchdog(threading.Thread):
    """Writes the log with ``error: timeout`` and exits 3 when a stage outlasts ``limit``."""

    def __init__(self, limit: float, save) -> None:
        super().__init__(daemon=True)
        self.limit, self.save = limit, save
        self.deadline: float | None = None
        self.stage = "setup"
        self.start()

    def arm(self, stage: str) -> None:
        self.stage, self.deadline = stage, time.monotonic() + self.limit

    def run(self) -> None:
        while True:
            time.sleep(1.0)
            if self.deadline is not None and time.monotonic() > self.deadline:
                stacks = io.StringIO()
                for ident, frame in sys._current_frames().items():
                    stacks.write(f"thread {ident}:\n{''.join(traceback.format_stack(frame))}\n")
                self.save(
                    error=f"timeout: {self.stage} ran over {self.limit:.0f} s", stacks=stacks.getvalue()
                )
                print(f"netns-loaders: {self.stage} ran over {self.limit:.0f} s", file=sys.stderr, flush=True)
                os._exit(3)


def tag_streaming_shm(rank: int) -> None:
    """Names Streaming's shared memory and file locks ``r{rank}{prefix}_{name}``, as if this
    rank had its own /dev/shm and temp dir."""
    import streaming.base.shared.prefix as prefix

    original = prefix._get_path

    def _get_path(prefix_int: int, name: str) -> str:
        return f"r{rank}{original(prefix_int, name)}"

    for name, module in list(sys.modules.items()):
        if name.startswith("streaming") and getattr(module, "_get_path", None) is original:
            module._get_path = _get_path


def allow_http_obstore() -> str:
    """Lets LitData's obstore client use http:// endpoints; returns what it did."""
    import litdata.streaming.downloader as downloader

    options = getattr(downloader, "_OBSTORE_CLIENT_OPTIONS", None)
    if isinstance(options, dict):
        options["allow_http"] = True
        return "_OBSTORE_CLIENT_OPTIONS['allow_http'] = True"
    if getattr(downloader, "_OBSTORE_AVAILABLE", False):
        raise RuntimeError(
            "this LitData has no _OBSTORE_CLIENT_OPTIONS: uninstall obstore for http:// endpoints"
        )
    return "obstore not installed: LitData downloads with boto3"


def collate(items: list) -> dict:
    """A batch as the training loop takes it, whatever the arm: ids, labels, JPEG bytes."""
    return {
        "id": [int(x["id"]) for x in items],
        "label": [int(x["label"]) for x in items],
        "jpeg": [bytes(x["jpeg"]) for x in items],
    }


class Raw:
    """The records of a ShuffleGroup as the loaders give theirs: JPEG bytes, label, id."""

    def __init__(self, records, labels) -> None:
        self.records, self.labels = records, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict:
        return {"jpeg": self.records[i], "label": int(self.labels[i]), "id": int(i)}


def loader_arm(args: argparse.Namespace, rank: int, local: pathlib.Path, log: dict):
    """Arm m's or l's (loader, what set_epoch does, the cache's measure)."""
    import torch

    if args.arm == "m":
        from streaming import StreamingDataset
        from streaming.base.util import clean_stale_shared_memory

        tag_streaming_shm(rank)
        clean_stale_shared_memory()  # a rank ended by its watchdog leaves its shared memory
        dataset = StreamingDataset(
            remote=f"s3://{args.bucket}/mds",
            local=str(local),
            shuffle=True,
            shuffle_seed=args.seed,
            cache_limit=args.cache_bytes,
            batch_size=args.batch,
        )
        loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch, collate_fn=collate)
    else:
        import litdata

        log["obstore"] = allow_http_obstore()
        dataset = litdata.StreamingDataset(
            input_dir=f"s3://{args.bucket}/lit",
            cache_dir=str(local),
            shuffle=True,
            seed=args.seed,
            max_cache_size=args.cache_bytes,
            drop_last=True,
        )
        loader = litdata.StreamingDataLoader(dataset, batch_size=args.batch, collate_fn=collate)
    return loader, None, lambda: dir_bytes(local)


def serve_store(args: argparse.Namespace, log: dict) -> None:
    """Arm s's store rank: serves until the training ranks close."""
    from ubershuffle.torch import ShuffleGroup

    sg = ShuffleGroup(
        f"s3://{args.bucket}/objects/",
        mode="store",
        scheme="auto",
        alpha=args.alpha,
        seed=args.seed,
        timeout=900.0,
    )
    log["role"] = "store"
    served = sg.serve()
    keep = ("epoch", "kind", "source_records", "source_bytes", "bytes_sent", "transfer_seconds", "held_bytes")
    log["served"] = [{k: f[k] for k in keep if k in f} for f in served]
    log["object_store"] = {"requests": sg._source.requests, "bytes_read": sg._source.bytes_read}


def run(args: argparse.Namespace) -> None:
    import numpy as np
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
    from digits_jpeg import Net, decode, held_out

    torch.set_num_threads(1)
    os.environ["S3_ENDPOINT_URL"] = args.endpoint  # Streaming
    os.environ["AWS_ENDPOINT_URL"] = args.endpoint  # LitData (boto3 and obstore), ShuffleGroup
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    args.out.mkdir(parents=True, exist_ok=True)
    log: dict = {
        "rank": rank,
        "world": world,
        "arm": args.arm,
        "role": "trainer",
        "epochs": [],
        "error": None,
    }

    def save(**extra) -> None:
        log.update(extra)
        tmp = args.out / f".rank-{rank}.json"
        tmp.write_text(json.dumps(log))
        tmp.replace(args.out / f"rank-{rank}.json")

    watchdog = Watchdog(args.epoch_timeout, save)
    watchdog.arm("setup")
    log["start_counters"] = counters(args.interface)
    try:
        if args.arm == "s" and rank == 0:
            serve_store(args, log)
            log["end_counters"] = counters(args.interface)
            watchdog.deadline = None
            save()
            dist.destroy_process_group()
            return
        start = time.perf_counter()
        sg = None
        if args.arm in ("m", "l"):
            local = args.cache_root / f"{args.arm}-rank{rank}"
            shutil.rmtree(local, ignore_errors=True)  # every run starts cold
            loader, sampler, measure = loader_arm(args, rank, local, log)
            train_group = None
        else:
            from ubershuffle.torch import ShuffleGroup

            if args.arm == "p":
                settings = {"mode": "peer", "policy": "partial-local", "fraction": args.fraction}
                source = f"s3://{args.bucket}/objects/"
            else:
                settings = {"mode": "store", "scheme": "auto", "alpha": args.alpha}
                source = None
            sg = ShuffleGroup(source, seed=args.seed, timeout=900.0, **settings)
            labels = np.load(args.data / "labels-train.npy")[: len(sg)]
            sampler, train_group = sg.sampler, sg.train_group
            loader = torch.utils.data.DataLoader(
                Raw(sg, labels), batch_size=args.batch, sampler=sampler, collate_fn=collate
            )
            measure = None
        log["setup_seconds"] = time.perf_counter() - start
        torch.manual_seed(args.seed)
        model = DistributedDataParallel(Net(), process_group=train_group)
        if sg is not None:
            sg.yield_to(model)
        opt = torch.optim.Adam(model.parameters(), lr=0.003)
        first = dist.get_rank(train_group) == 0
        test = held_out(args.data) if first else None
        peak = Peak(measure) if measure is not None else None
        for epoch in range(args.epochs):
            dist.barrier(train_group)
            watchdog.arm(f"epoch {epoch}")
            row: dict = {"epoch": epoch, "t_start": time.time(), "counters_start": counters(args.interface)}
            start = time.perf_counter()
            if sg is not None:
                sg.set_epoch(epoch)
            exposed = time.perf_counter() - start
            ids: list = []
            total = count = 0.0
            batches = iter(loader)
            while True:
                waited = time.perf_counter()
                batch = next(batches, None)
                exposed += time.perf_counter() - waited
                if batch is None:
                    break
                ids.extend(batch["id"])
                x = torch.stack([decode(np.frombuffer(j, dtype=np.uint8)) for j in batch["jpeg"]])
                y = torch.tensor(batch["label"])
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                total, count = total + loss.item() * len(y), count + len(y)
                if args.compute > 0:
                    time.sleep(args.compute)  # the rest of a step's compute, as on a GPU
            row["epoch_seconds"] = time.perf_counter() - start
            row["exposed_seconds"] = exposed
            row["ids"] = ids
            row["train_loss"] = total / max(count, 1)
            if sg is not None:
                figures = sg.figures(epoch)
                row["storage_bytes"] = int(figures["peak_held_bytes"])
                row["source_bytes"] = int(figures.get("source_bytes", 0))
            else:
                row["storage_bytes"] = peak.take()
            if test is not None:
                with torch.no_grad():
                    out = model.module(test[0])
                    row["held_out_accuracy"] = float((out.argmax(1) == test[1]).float().mean())
            row["counters_end"] = counters(args.interface)
            row["t_end"] = time.time()
            log["epochs"].append(row)
            save()
        watchdog.arm("close")
        if sg is not None:
            sg.close()
    except Exception as e:  # noqa: BLE001 (a failing arm is a result: logged, not hidden)
        save(error=f"{type(e).__name__}: {e}".splitlines()[0], traceback=traceback.format_exc())
        print(f"rank {rank}: arm {args.arm} failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        os._exit(2)  # peers may wait in a collective; their watchdogs end them
    watchdog.deadline = None
    log["end_counters"] = counters(args.interface)
    save()
    dist.barrier(train_group)
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arm", choices=ARMS, required=True)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--endpoint", required=True, help="the S3 server, http://HOST:PORT")
    parser.add_argument(
        "--data", type=pathlib.Path, required=True, help="the JPEG folder (labels, held-out set)"
    )
    parser.add_argument("--out", type=pathlib.Path, required=True)
    parser.add_argument("--cache-bytes", type=int, default=0, help="m and l: the cache limit per node")
    parser.add_argument("--cache-root", type=pathlib.Path, default=pathlib.Path("/tmp/netns-loaders-cache"))
    parser.add_argument("--fraction", type=float, default=0.3, help="p: Q of partial-local")
    parser.add_argument("--alpha", type=float, default=0.5, help="s: the share each training rank caches")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument(
        "--compute",
        type=float,
        default=0.0,
        help="seconds slept after each step (the CPU idle, as while a GPU computes a larger model)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epoch-timeout", type=float, default=600.0)
    parser.add_argument("--interface", default=os.environ.get("GLOO_SOCKET_IFNAME", "eth0"))
    args = parser.parse_args()
    check_node_rank()
    if args.arm in ("m", "l") and args.cache_bytes <= 0:
        parser.error(f"arm {args.arm} needs --cache-bytes")
    run(args)


if __name__ == "__main__":
    main()
