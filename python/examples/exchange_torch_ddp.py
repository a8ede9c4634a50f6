"""The coded exchange under torch DDP (CPU, gloo): each process is one rank with its own record
store; a ``Dataset`` reads samples straight from the store (zero-copy views), the
``CodedShuffleSampler`` names each epoch's indices, and the exchange delivers the records of
the new batch that the rank lacks before the epoch's DataLoader starts. DDP averages the
gradients; the store outside the job (holding the data set) runs on a thread of the parent
process.

Run by hand (torch is not installed in CI; this file imports torch only when run):
    pip install torch --index-url https://download.pytorch.org/whl/cpu
    python python/examples/exchange_torch_ddp.py [--world 4] [--epochs 5]
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import subprocess
import sys
import tempfile

import numpy as np

import ubershuffle as us

POINTS, FEATURES, SEED, ALPHA = 4096, 31, 5, 0.5  # 128-byte records: 31 features and a label


def data_set() -> np.ndarray:
    """Features and label as float32 records, viewed as uint8 rows."""
    rng = np.random.default_rng(SEED)
    x = rng.normal(size=(POINTS, FEATURES)).astype(np.float32)
    y = (x @ rng.normal(size=FEATURES) + 0.01 * rng.normal(size=POINTS)).astype(np.float32)
    return np.concatenate([x, y[:, None]], axis=1).view(np.uint8).reshape(POINTS, -1)


def rank_main(address: str, rank: int, world: int, store_dir: str, dist_port: int) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, Dataset

    ex = us.Exchange.connect(address, rank=rank, world=world, store_dir=store_dir)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{dist_port}", rank=ex.rank, world_size=ex.world
    )

    class StoreDataset(Dataset):
        """Samples read from the rank's record store (shared memory: DataLoader worker
        processes read it too), each copied into a tensor."""

        def __len__(self) -> int:
            return len(ex.store)

        def __getitem__(self, i: int):
            row = torch.tensor(ex.store[i].view(np.float32))
            return row[:FEATURES], row[FEATURES]

    loader = DataLoader(StoreDataset(), batch_size=64, sampler=ex.sampler)
    model = DistributedDataParallel(torch.nn.Linear(FEATURES, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.02)
    for batch in ex:  # the epoch's missing records, by coded delivery (the next in the background)
        total = 0.0
        for x, y in loader:  # every index of the epoch's batch is in the store
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
            loss.backward()
            opt.step()
            total += float(loss) * len(x)
        if ex.rank == 0:
            f = batch.figures
            print(f"epoch {batch.epoch}: mean loss {total / len(ex.sampler):.4f}", flush=True)
            print(f"  received {f.new_records} records in {f.packets} packets ({f.coded_packets} coded)")
    ex.close()
    dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--world", type=int, default=4)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--rank-of", metavar="ADDRESS", help="(internal) run one rank against ADDRESS")
    p.add_argument("--rank", type=int, help="(internal) the rank")
    p.add_argument("--store", help="(internal) the rank's store directory")
    p.add_argument("--dist-port", type=int, help="(internal) torch.distributed's port")
    args = p.parse_args()
    if args.rank_of:
        rank_main(args.rank_of, args.rank, args.world, args.store, args.dist_port)
        return
    os.environ.setdefault(us.exchange.TOKEN_VAR, secrets.token_hex(16))
    host = us.Exchange.host(
        data_set(), workers=args.world, alpha=ALPHA, epochs=args.epochs, seed=SEED, timeout=60.0
    )
    port = free_port()
    with tempfile.TemporaryDirectory() as stores:
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--rank-of",
                    host.address,
                    "--rank",
                    str(k),
                    "--world",
                    str(args.world),
                    "--store",
                    os.path.join(stores, str(k)),
                    "--dist-port",
                    str(port),
                ]
            )
            for k in range(args.world)
        ]
        codes = [proc.wait() for proc in procs]
    host.join(timeout=60)
    if any(codes):
        raise SystemExit(f"a rank failed: exit codes {codes}")


if __name__ == "__main__":
    main()
