"""Training a small CNN with DDP on JPEG records moved by the job's own process group.

    torchrun --standalone --nproc-per-node 4 python/examples/torch_jpeg.py --mode peer
    torchrun --standalone --nproc-per-node 5 python/examples/torch_jpeg.py --mode store

The data set is made once (``digits_jpeg.make_data``, shared with the network-namespace
benchmark) from scikit-learn's digits (1797 handwritten digits of 8x8,
shipped in the wheel): each image upscaled to 32x32 and JPEG-encoded at a quality between 30
and 95, so records vary in size (a few hundred bytes to about 1.3 KB), one file each under
``--data`` (training and held-out images in folders of their own, labels beside them).

``--mode peer`` (the partial-local seed's system): each rank reads only its first batch from
the folder, and each epoch the records that change rank (``--fraction`` of each batch under
partial-local) go rank to rank while the epoch before trains. ``--mode store``: rank 0 reads
the folder and serves coded deliveries to the other ranks, which cache ``--alpha`` of the data
and train on ``sg.train_group``. Either way a JPEG is decoded in the Dataset, in DataLoader
worker processes, from ``sg[i]``. The first training rank prints a JSON line per epoch: loss,
held-out accuracy, and what the epoch's delivery moved and how long training waited for it.

Needs torch, Pillow and scikit-learn (``pip install torch pillow scikit-learn``).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from digits_jpeg import Digits, Net, held_out, make_data
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

from ubershuffle.torch import ShuffleGroup, init_process_group


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=["peer", "store"], default="peer")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--data", type=pathlib.Path, default=pathlib.Path("data/digits-jpeg"))
    parser.add_argument("--policy", default="partial-local")
    parser.add_argument("--fraction", type=float, default=0.3)
    parser.add_argument("--alpha", type=float, default=0.5)
    parser.add_argument("--workers", type=int, default=2, help="DataLoader worker processes")
    args = parser.parse_args()
    torch.set_num_threads(1)
    init_process_group("gloo")
    if int(os.environ.get("LOCAL_RANK", "0")) == 0:
        make_data(args.data)
    dist.barrier()
    if args.mode == "peer":
        sg = ShuffleGroup(
            args.data / "train", mode="peer", policy=args.policy, fraction=args.fraction, seed=0
        )
    else:
        sg = ShuffleGroup(args.data / "train", mode="store", alpha=args.alpha, seed=0)
    if sg.is_store:
        sg.serve()
        dist.destroy_process_group()
        return
    labels = np.load(args.data / "labels-train.npy")
    loader = DataLoader(
        Digits(sg, labels),
        batch_size=32,
        sampler=sg.sampler,
        num_workers=args.workers,
        persistent_workers=True,
    )
    torch.manual_seed(0)
    model = DistributedDataParallel(Net(), process_group=sg.train_group)
    opt = torch.optim.Adam(model.parameters(), lr=0.003)
    first = sg.sampler.rank == 0
    test_x, test_y = held_out(args.data) if first else (None, None)
    for epoch in range(args.epochs):
        start = time.perf_counter()
        sg.set_epoch(epoch)
        total, count = 0.0, 0
        for x, y in loader:
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            total, count = total + loss.item() * len(y), count + len(y)
        if first:
            with torch.no_grad():
                accuracy = float((model.module(test_x).argmax(1) == test_y).float().mean())
            f = sg.figures(epoch)
            line = {
                "epoch": epoch,
                "loss": round(total / count, 4),
                "held_out_accuracy": round(accuracy, 4),
                "epoch_seconds": round(time.perf_counter() - start, 3),
                "exposed_seconds": round(f["exposed_seconds"], 4),
                "bytes_received": f["bytes_received"],
                "records_received": f["records_received"],
                "coded_packets": f["coded_packets"],
                "source_records": f["source_records"],
            }
            print(json.dumps(line), flush=True)
    sg.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
