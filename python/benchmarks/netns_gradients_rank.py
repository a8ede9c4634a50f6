"""One rank of ``cargo xtask netns-gradients``: does the plane's background delivery slow DDP's
gradient all-reduce, and does yielding to it help? The xtask starts one process per rank in
that rank's network namespace (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``,
``GLOO_SOCKET_IFNAME`` in the environment) and reads ``OUT/rank-R.json``.

Each step reads its batch's records (the JPEG digits of ``netns_train_rank.py --make-data``),
sleeps ``--compute`` seconds (the compute, the CPU idle as while a GPU computes, so that the
links and not this machine's two cores are what is measured), then runs forward and backward
of a one-layer model whose gradient is ``--gradient-mb`` MB under DDP (gloo), whose all-reduce
is timed by the plane's hook (:meth:`ShuffleGroup.yield_to`).

What the rank read is logged so that the report can check the plane's bytes, not only its
times: per epoch a digest of every record it read (:func:`digest`: SHA-256 over the records in
the order read, each its id, its size and its bytes as ``sg[i]`` gave them), the same digest
recomputed from the source's files after the job (``source_digest``), and the plane's own counts
of the delivery behind the epoch (``figures(e + 1)``: ``records_received``,
``record_bytes_received``, ``bytes_received``, ``yields``).

Arms: ``p`` peer mode, partial-local with Q = ``--fraction``; ``g`` peer mode, global; ``s``
store mode, coded (``auto``), alpha 0.5 (rank 0 the store). Planes: ``idle`` (the next epoch's
delivery waited for before the epoch starts: the all-reduce alone on the links), ``flight``
(the delivery in flight during the epoch, not yielding), ``yield`` (in flight, yielding).

Usage: python netns_gradients_rank.py --arm p --plane yield --data DIR --out DIR [--epochs 4 ...]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import pathlib
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from netns_node import check_node_rank
from torch.nn.parallel import DistributedDataParallel

from ubershuffle.torch import ShuffleGroup, init_process_group

ARMS = ("p", "g", "s")
PLANES = ("idle", "flight", "yield")


def settings(arm: str, fraction: float) -> dict:
    """The ShuffleGroup's settings of an arm."""
    if arm == "p":
        return {"mode": "peer", "policy": "partial-local", "fraction": fraction}
    if arm == "g":
        return {"mode": "peer", "policy": "global"}
    return {"mode": "store", "scheme": "auto", "alpha": 0.5}


def absorb(h: Any, i: int, record: Any) -> int:
    """Adds record ``i`` (a bytes-like object) to the digest ``h``: its id and size (8 bytes
    each, little-endian), then its bytes; returns its size."""
    view = memoryview(record).cast("B")
    h.update(int(i).to_bytes(8, "little") + len(view).to_bytes(8, "little"))
    h.update(view)
    return len(view)


def digest(ids: list, record: Callable[[int], Any]) -> str:
    """The hex SHA-256 of the records ``ids`` in that order, record ``i`` being ``record(i)``
    (see :func:`absorb`)."""
    h = hashlib.sha256()
    for i in ids:
        absorb(h, i, record(i))
    return h.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arm", choices=ARMS, required=True)
    parser.add_argument("--plane", choices=PLANES, required=True)
    parser.add_argument("--data", type=pathlib.Path, required=True)
    parser.add_argument("--out", type=pathlib.Path, required=True)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--fraction", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--compute", type=float, default=0.25, help="seconds of compute per step")
    parser.add_argument("--gradient-mb", type=float, default=2.0, help="MB of gradient per step")
    args = parser.parse_args()
    check_node_rank()
    torch.set_num_threads(1)
    init_process_group("gloo")
    rank = dist.get_rank()
    files = sorted((args.data / "train").glob("*.jpg"))
    s = settings(args.arm, args.fraction)
    mode = s.pop("mode")
    source = files if (mode == "peer" or rank == 0) else None
    sg = ShuffleGroup(
        source, mode=mode, seed=args.seed, timeout=900.0, yield_to_gradients=args.plane == "yield", **s
    )
    log: dict = {"rank": rank, "arm": args.arm, "plane": args.plane}
    if sg.is_store:
        log["role"] = "store"
        log["served"] = sg.serve()
        (args.out / f"rank-{rank}.json").write_text(json.dumps(log))
        dist.destroy_process_group()
        return
    side = max(1, round(math.sqrt(args.gradient_mb * 1e6 / 4)))
    torch.manual_seed(args.seed)
    model = sg.yield_to(
        DistributedDataParallel(torch.nn.Linear(side, side, bias=False), process_group=sg.train_group)
    )
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(8, side)
    log.update(role="trainer", place=sg.sampler.rank, gradient_bytes=side * side * 4)
    epochs = []
    orders: list = []
    for epoch in range(args.epochs):
        dist.barrier(sg.train_group)
        row: dict = {"epoch": epoch, "t_start": time.time()}
        start = time.perf_counter()
        sg.set_epoch(epoch)
        row["exposed_seconds"] = time.perf_counter() - start
        if args.plane == "idle":
            waited = time.perf_counter()
            sg.wait_delivery()
            row["idle_wait_seconds"] = time.perf_counter() - waited
            dist.barrier(sg.train_group)
        began = time.perf_counter()
        order = list(iter(sg.sampler))
        orders.append(order)
        read_digest = hashlib.sha256()
        steps = []
        for b in range(max(math.ceil(len(order) / args.batch), 1)):
            step = time.perf_counter()
            read = sum(absorb(read_digest, i, sg[i]) for i in order[b * args.batch : (b + 1) * args.batch])
            time.sleep(args.compute)
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
            steps.append(time.perf_counter() - step)
            row["read_bytes"] = row.get("read_bytes", 0) + read
        row["step_seconds"] = steps
        row["records_read"] = len(order)
        row["digest"] = read_digest.hexdigest()
        row["epoch_seconds"] = time.perf_counter() - start
        row["train_seconds"] = time.perf_counter() - began
        row["t_end"] = time.time()
        epochs.append(row)
    # The last epoch's all-reduces are counted with the delivery that ran behind it.
    sg.wait_delivery()
    sg.close()
    # Epoch e's figures hold epoch e-1's all-reduces: those of the last epoch are in the
    # delivery that close() drained.
    for e, row in enumerate(epochs):
        try:
            f = sg.figures(e + 1)
        except KeyError:
            continue
        row["allreduce_step_seconds"] = f.get("allreduce_step_seconds", [])
        row["allreduce_step_during_delivery"] = f.get("allreduce_step_during_delivery", [])
        row["yield_seconds"] = f.get("yield_seconds", 0.0)
        row["yields"] = f.get("yields", 0)
        row["delivery_seconds"] = f.get("transfer_seconds", 0.0)
        # The plane's counts: absent (null) when it has none, so that the check fails.
        row["delivery_received"] = {
            k: f.get(k) for k in ("records_received", "record_bytes_received", "bytes_received")
        }
        row["next_exposed_seconds"] = f.get("exposed_seconds")
    # What the plane should have given: the same records read from the source's files.
    for row, order in zip(epochs, orders):
        row["source_digest"] = digest(order, lambda i: files[i].read_bytes())
    log["epochs"] = epochs
    (args.out / f"rank-{rank}.json").write_text(json.dumps(log))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
