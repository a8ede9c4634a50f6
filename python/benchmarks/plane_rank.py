"""One rank of bench_plane.py's jobs (run by torchrun): a ShuffleGroup over records of
lognormal sizes, epochs of emulated training, and the seed's per-sample scheduler as a baseline.

Usage: torchrun ... plane_rank.py OUT_DIR key=value ...; writes OUT_DIR/rank-R.json.

Training is emulated by sleeping (the CPU idle, as while a GPU computes), ``train_seconds`` an
epoch in ``batches`` steps, so the delivery in the background has the cores to itself; the
figures are this machine's wall times on loopback.
"""

from __future__ import annotations

import json
import pathlib
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

from ubershuffle.torch import ShuffleGroup, init_process_group


def lognormal_sizes(count: int, mean: float, cv: float, seed: int) -> np.ndarray:
    """Record sizes of a lognormal distribution with this mean and coefficient of variation."""
    sigma2 = np.log1p(cv * cv)
    rng = np.random.default_rng(seed)
    return np.maximum(rng.lognormal(np.log(mean) - sigma2 / 2, np.sqrt(sigma2), count), 1).astype(np.int64)


def make_records(sizes: np.ndarray, seed: int) -> list:
    """Records of these sizes, seeded bytes."""
    rng = np.random.default_rng(seed + 1)
    blob = rng.integers(0, 256, int(sizes.sum()), dtype=np.uint8)
    ends = np.cumsum(sizes)
    return [blob[e - s : e] for s, e in zip(sizes, ends)]


def per_sample_exchange(group: dist.ProcessGroup, now, nxt, records: list, rank: int) -> float:
    """The partial-local seed's scheduler: every record that changes rank is one isend/irecv
    pair followed by a barrier of the whole group; returns its seconds."""
    was, will = now.targets(), nxt.targets()
    owner = {}
    for r, ids in enumerate(was):
        for i in ids:
            owner[int(i)] = r
    moves = sorted(
        (int(i), owner[int(i)], r) for r, ids in enumerate(will) for i in np.setdiff1d(ids, was[r])
    )
    dist.barrier(group)
    start = time.perf_counter()
    for i, src, dst in moves:
        if rank == src:
            dist.isend(torch.from_numpy(np.asarray(records[i])), dst=dst, group=group).wait()
        elif rank == dst:
            buffer = torch.empty(len(records[i]), dtype=torch.uint8)
            dist.irecv(buffer, src=src, group=group).wait()
        dist.barrier(group)
    return time.perf_counter() - start


def main() -> None:
    out = pathlib.Path(sys.argv[1])
    opts = dict(a.split("=", 1) for a in sys.argv[2:])
    init_process_group("gloo")
    rank = dist.get_rank()
    count, mean, cv = int(opts["records"]), float(opts["mean"]), float(opts["cv"])
    sizes = lognormal_sizes(count, mean, cv, int(opts.get("seed", 0)))
    mode = opts["mode"]
    records = make_records(sizes, int(opts.get("seed", 0))) if mode == "peer" or rank == 0 else None
    kwargs: dict = {"mode": mode, "seed": int(opts.get("seed", 0)), "timeout": 600.0}
    for key in ("policy", "scheme"):
        if key in opts:
            kwargs[key] = opts[key]
    for key in ("fraction", "alpha"):
        if key in opts:
            kwargs[key] = float(opts[key])
    sg = ShuffleGroup(records, **kwargs)
    log: dict = {"rank": rank, "is_store": sg.is_store, "segment_bytes": sg.segment_bytes, "epochs": []}
    if sg.is_store:
        log["served"] = sg.serve()
        (out / f"rank-{rank}.json").write_text(json.dumps(log))
        return
    epochs, train, batches = (
        int(opts["epochs"]),
        float(opts.get("train_seconds", 0)),
        int(opts.get("batches", 20)),
    )
    group = sg.train_group
    for epoch in range(epochs):
        dist.barrier(group)
        start = time.perf_counter()
        sg.set_epoch(epoch)
        touched = 0
        for step, i in enumerate(sg.sampler):
            touched += len(sg[i])
            if train and step % max(1, len(sg.sampler) // batches) == 0:
                time.sleep(train / batches)
        row = dict(sg.figures(epoch), epoch=epoch, epoch_seconds=time.perf_counter() - start, touched=touched)
        log["epochs"].append(row)
    now = sg._sampler._core
    sg.close()
    if opts.get("baseline") and mode == "peer":
        # The seed's scheduler on the step the plane delivered last (drained by close), in the
        # foreground: the same records between the same ranks.
        log["last_step"] = sg.figures(epochs)
        log["baseline_seconds"] = per_sample_exchange(group, now, now.stepped(), records, rank)
    (out / f"rank-{rank}.json").write_text(json.dumps(log))
    dist.barrier(group)
    dist.destroy_process_group()


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
