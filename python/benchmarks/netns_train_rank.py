"""One rank of ``cargo xtask netns-train``: DDP (gloo) training of the digits CNN on JPEG records,
the records delivered by one of the experiment's arms. The xtask starts one process per rank
inside that rank's network namespace (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``,
``MASTER_PORT``, ``GLOO_SOCKET_IFNAME`` in the environment) and reads ``OUT/rank-R.json``.

Arms (the same seed, epochs and model for every arm):

- ``a``: store mode, ``uncoded``, each rank caching only its batch (alpha = ceil(N/R)/N, the
  least the sampler allows): the new batch comes from the store every epoch;
- ``b``: store mode, ``auto`` (coded), alpha 0.5;
- ``c``: store mode, ``uncoded``, alpha 0.5 (the caches of ``b``: isolates the coding gain);
- ``d``: peer mode, partial-local with Q = ``--fraction``;
- ``e``: peer mode, local;
- ``f``: every rank reads the whole data set from its own copy; ``DistributedSampler``.

In store mode rank 0 is the store (it serves; it does not train) and the world has one more
rank. Per epoch a training rank logs when it started and ended (the host's clock, shared by
every namespace), what ``set_epoch`` waited (exposed data time), its training time, the plane's
figures, its interface's byte counters, and (the first training rank) held-out loss and
accuracy. The store samples its interface's counters every 50 ms, so the xtask can cut its
bytes into the training epochs. The first training rank also logs, per epoch, the bytes of the
records that enter each rank's holding along the sampler's chain (the plan's bytes, for the
xtask's byte checks).

With ``--sleep-train SECONDS`` a rank does not train: it reads every record of its epoch and
sleeps that long per epoch, the CPU idle as while a GPU computes (the profile's control: the
links, not the cores, are then the bottleneck); no held-out accuracy is logged.

Usage: python netns_train_rank.py --arm b --data DIR --out DIR [--epochs 6 ...]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import sys
import threading
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
from digits_jpeg import Digits, Net, held_out, make_data  # noqa: E402
from netns_node import check_node_rank  # noqa: E402

import ubershuffle as us  # noqa: E402
from ubershuffle.torch import ShuffleGroup, init_process_group  # noqa: E402

STORE_ARMS = ("a", "b", "c")
PEER_ARMS = ("d", "e")
ARMS = STORE_ARMS + PEER_ARMS + ("f",)


def counters(interface: str, unit: str = "bytes") -> tuple:
    """The interface's (tx, rx) counters of ``unit`` (``bytes`` or ``packets``), from this
    namespace's sysfs."""
    base = pathlib.Path("/sys/class/net") / interface / "statistics"
    return int((base / f"tx_{unit}").read_text()), int((base / f"rx_{unit}").read_text())


def retransmitted() -> int:
    """TCP segments this namespace has retransmitted (``/proc/net/snmp``'s ``RetransSegs``):
    a segment dropped at a shaped port crosses the receiver's link once more."""
    rows = [line.split() for line in pathlib.Path("/proc/net/snmp").read_text().splitlines()]
    names, values = [r for r in rows if r and r[0] == "Tcp:"][:2]
    return int(values[names.index("RetransSegs")])


class Sampler(threading.Thread):
    """Samples the interface's counters every ``period`` seconds until stopped."""

    def __init__(self, interface: str, period: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.interface, self.period = interface, period
        self.samples: list = []
        self.done = threading.Event()

    def run(self) -> None:
        while True:
            self.samples.append((time.time(), *counters(self.interface)))
            if self.done.wait(self.period):
                break

    def stop(self) -> list:
        self.done.set()
        self.join()
        self.samples.append((time.time(), *counters(self.interface)))
        return self.samples


def settings(arm: str, records: int, trainers: int, fraction: float) -> dict:
    """The ShuffleGroup's (and the chain's) settings of an arm."""
    if arm == "a":
        return {"mode": "store", "scheme": "uncoded", "alpha": math.ceil(records / trainers) / records}
    if arm == "b":
        return {"mode": "store", "scheme": "auto", "alpha": 0.5}
    if arm == "c":
        return {"mode": "store", "scheme": "uncoded", "alpha": 0.5}
    if arm == "d":
        return {"mode": "peer", "policy": "partial-local", "fraction": fraction}
    return {"mode": "peer", "policy": "local"}


def chain_bytes(sizes: np.ndarray, trainers: int, seed: int, epochs: int, s: dict) -> list:
    """Per epoch after the first, per training rank: the bytes of the records that enter the
    rank's holding along the sampler's chain (what the plan must bring it)."""
    kwargs = {k: v for k, v in s.items() if k != "mode"}
    sampler = us.CodedShuffleSampler(len(sizes), num_replicas=trainers, rank=0, seed=seed, **kwargs)
    sampler.set_epoch(0)
    before = sampler._core.targets()
    out = []
    for e in range(1, epochs):
        sampler.set_epoch(e)
        after = sampler._core.targets()
        out.append([int(sizes[np.setdiff1d(after[r], before[r])].sum()) for r in range(trainers)])
        before = after
    return out


class Folder:
    """Every record of a folder, read from this rank's own copy (arm ``f``)."""

    def __init__(self, files: list) -> None:
        self.records = [np.frombuffer(f.read_bytes(), dtype=np.uint8) for f in files]

    def __getitem__(self, i: int) -> np.ndarray:
        return self.records[i]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arm", choices=ARMS)
    parser.add_argument("--data", type=pathlib.Path, required=True)
    parser.add_argument("--out", type=pathlib.Path)
    parser.add_argument("--make-data", action="store_true", help="make the data set and exit")
    parser.add_argument("--side", type=int, default=256, help="JPEG side in pixels (--make-data)")
    parser.add_argument("--grain", type=float, default=32.0, help="grain added (--make-data)")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--fraction", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--loader-workers", type=int, default=0)
    parser.add_argument(
        "--sleep-train",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="instead of training, sleep this long per epoch (spread over its batches; the CPU idle, "
        "as while a GPU computes): every record of the epoch is still read, none decoded",
    )
    parser.add_argument("--interface", default=os.environ.get("GLOO_SOCKET_IFNAME", "eth0"))
    args = parser.parse_args()
    check_node_rank()
    if args.make_data:
        make_data(args.data, args.side, args.grain)
        sizes = [f.stat().st_size for f in sorted((args.data / "train").glob("*.jpg"))]
        print(json.dumps({"records": len(sizes), "bytes": int(sum(sizes))}))
        return
    if args.arm is None or args.out is None:
        parser.error("--arm and --out are needed (or --make-data)")
    torch.set_num_threads(1)
    init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    store_arm = args.arm in STORE_ARMS
    trainers = world - 1 if store_arm else world
    files = sorted((args.data / "train").glob("*.jpg"))
    sizes = np.asarray([f.stat().st_size for f in files], dtype=np.int64)
    s = settings(args.arm, len(files), trainers, args.fraction)
    log: dict = {"rank": rank, "arm": args.arm, "settings": s, "start_counters": counters(args.interface)}
    log["start_retrans"] = retransmitted()
    dist.barrier()
    log["t0"] = time.time()
    if args.arm == "f":
        sg, records, train_group = None, Folder(files), None
        sampler = DistributedSampler(range(len(files)), num_replicas=world, rank=rank, seed=args.seed)
        place = rank
    else:
        kwargs = dict(s)
        mode = kwargs.pop("mode")
        source = files if (mode == "peer" or rank == 0) else None
        sg = ShuffleGroup(source, mode=mode, seed=args.seed, timeout=900.0, **kwargs)
        records, train_group, sampler = sg, sg.train_group, sg.sampler
        log["segment_bytes"] = sg.segment_bytes
        if sg.is_store:
            log["role"] = "store"
            watch = Sampler(args.interface)
            watch.start()
            log["served"] = sg.serve()
            log["samples"] = watch.stop()
            log["held_bytes"] = int(sizes.sum())
            log["end_counters"] = counters(args.interface)
            log["end_retrans"] = retransmitted()
            (args.out / f"rank-{rank}.json").write_text(json.dumps(log))
            dist.destroy_process_group()
            return
        place = sampler.rank
    log["role"] = "trainer"
    log["place"] = place
    labels = np.load(args.data / "labels-train.npy")
    loader = DataLoader(
        Digits(records, labels),
        batch_size=args.batch,
        sampler=sampler,
        num_workers=args.loader_workers,
        persistent_workers=args.loader_workers > 0,
    )
    torch.manual_seed(args.seed)
    model = DistributedDataParallel(Net(), process_group=train_group)
    opt = torch.optim.Adam(model.parameters(), lr=0.003)
    first = place == 0
    test_x, test_y = held_out(args.data) if first else (None, None)
    if first:
        chain = [] if args.arm == "f" else chain_bytes(sizes, trainers, args.seed, args.epochs, s)
        log["chain_bytes"] = chain
    epochs = []
    for epoch in range(args.epochs):
        dist.barrier(train_group)
        row: dict = {
            "epoch": epoch,
            "t_start": time.time(),
            "counters_start": counters(args.interface),
            "packets_start": counters(args.interface, "packets"),
        }
        start, cpu = time.perf_counter(), time.process_time()
        if sg is None:
            sampler.set_epoch(epoch)
        else:
            sg.set_epoch(epoch)
        row["exposed_seconds"] = time.perf_counter() - start
        total, count = 0.0, 0
        if args.sleep_train > 0:
            order = list(iter(sampler))
            batches = max(math.ceil(len(order) / args.batch), 1)
            for b in range(batches):
                for i in order[b * args.batch : (b + 1) * args.batch]:
                    count += len(records[i]) > 0
                time.sleep(args.sleep_train / batches)
        for x, y in [] if args.sleep_train > 0 else loader:
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            total, count = total + loss.item() * len(y), count + len(y)
        row["epoch_seconds"] = time.perf_counter() - start
        row["train_loss"] = total / max(count, 1)
        if first and args.sleep_train <= 0:
            with torch.no_grad():
                out = model.module(test_x)
                row["held_out_loss"] = float(F.cross_entropy(out, test_y))
                row["held_out_accuracy"] = float((out.argmax(1) == test_y).float().mean())
        if sg is None:
            row.update(held_bytes=int(sizes.sum()), bytes_sent=0, bytes_received=0, transfer_seconds=0.0)
        else:
            row.update({k: v for k, v in sg.figures(epoch).items() if isinstance(v, (int, float, str))})
        # The process's CPU over the epoch: training and the plane (the plane's alone with
        # --sleep-train, the main thread sleeping).
        row["cpu_seconds"] = time.process_time() - cpu
        row["t_end"] = time.time()
        epochs.append(row)
    if sg is not None:
        sg.close()
        # A delivery for the epoch after the last is drained by close(): its figures too.
        try:
            drained = sg.figures(args.epochs)
            log["drained"] = {k: v for k, v in drained.items() if isinstance(v, (int, float))}
        except KeyError:
            pass
    log["epochs"] = epochs
    log["end_counters"] = counters(args.interface)
    log["end_retrans"] = retransmitted()
    log["end_packets"] = counters(args.interface, "packets")
    log["t_end"] = time.time()
    (args.out / f"rank-{rank}.json").write_text(json.dumps(log))
    dist.barrier(train_group)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
