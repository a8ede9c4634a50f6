"""The coded exchange in a training loop (numpy only): 4 local processes, each with its own
record store, train a linear model by SGD on the batches their samplers name; each epoch the
store outside the job (hosted on a thread of this parent process) delivers every rank the
records of its new batch that it lacks, by coded multicast, and every record received is
checked against the data set byte for byte.

Each rank trains its own model on its own batches (no averaging: this example shows the data
plane; exchange_torch_ddp.py averages gradients with torch DDP).

Run: python python/examples/exchange_linear.py [--ranks 4] [--epochs 6]
Prints one JSON line per rank (its losses and the records it checked) and the store's epochs.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile

import numpy as np

import ubershuffle as us

POINTS, FEATURES, SEED, ALPHA = 2000, 15, 3, 0.5
POLICY = {"policy": "partial-local", "fraction": 0.3}


def data_set() -> tuple[np.ndarray, np.ndarray]:
    """The data set every process can regenerate: features and label as float32 records
    (64 bytes each), and the true weights."""
    rng = np.random.default_rng(SEED)
    x = rng.normal(size=(POINTS, FEATURES)).astype(np.float32)
    w = rng.normal(size=FEATURES).astype(np.float32)
    y = (x @ w + 0.01 * rng.normal(size=POINTS)).astype(np.float32)
    records = np.concatenate([x, y[:, None]], axis=1)
    return records.view(np.uint8).reshape(POINTS, -1), w


def loss_and_step(records: np.ndarray, w: np.ndarray, lr: float) -> tuple[float, np.ndarray]:
    """One pass of minibatch SGD over ``records`` (uint8 rows of float32); the loss before it."""
    rows = records.view(np.float32).reshape(len(records), FEATURES + 1)
    x, y = rows[:, :FEATURES].astype(np.float64), rows[:, FEATURES].astype(np.float64)
    loss = float(np.mean((x @ w - y) ** 2))
    for k in range(0, len(x), 32):
        xb, yb = x[k : k + 32], y[k : k + 32]
        w = w - lr * 2 * xb.T @ (xb @ w - yb) / len(xb)
    return loss, w


def rank_main(address: str, rank: int, world: int, store_dir: str) -> None:
    """One rank: join the store, then train each epoch on the batch the sampler names, which
    the exchange delivered into the record store."""
    truth, _ = data_set()
    ex = us.Exchange.connect(address, rank=rank, world=world, store_dir=store_dir)
    sampler = ex.sampler  # the store's chain
    w, losses, checked, received = np.zeros(FEATURES), [], 0, 0
    for batch in ex:
        ids = np.asarray(list(sampler), dtype=np.int64)  # the sampler's order of this epoch
        if not np.array_equal(np.sort(ids), batch.ids):
            raise SystemExit(f"rank {ex.rank}: the sampler and the exchange disagree at epoch {batch.epoch}")
        if not np.array_equal(ex.store.records(batch.new_ids), truth[batch.new_ids]):
            raise SystemExit(f"rank {ex.rank}: a received record differs at epoch {batch.epoch}")
        checked += len(batch.new_ids)
        received += batch.figures.bytes_received
        loss, w = loss_and_step(ex.store.records(ids), w, lr=0.01)
        losses.append(loss)
        print(f"rank {ex.rank}: epoch {batch.epoch} loss {loss:.4f}", file=sys.stderr, flush=True)
    ex.close()
    print(json.dumps({"rank": ex.rank, "losses": losses, "checked": checked, "bytes_received": received}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--rank-of", metavar="ADDRESS", help="(internal) run one rank against ADDRESS")
    p.add_argument("--rank", type=int, help="(internal) the rank")
    p.add_argument("--store", help="(internal) the rank's store directory")
    args = p.parse_args()
    if args.rank_of:
        rank_main(args.rank_of, args.rank, args.ranks, args.store)
        return
    os.environ.setdefault(us.exchange.TOKEN_VAR, secrets.token_hex(16))
    records, _ = data_set()
    host = us.Exchange.host(
        records, workers=args.ranks, alpha=ALPHA, epochs=args.epochs, seed=SEED, scheme="coded", **POLICY
    )
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
                    "--ranks",
                    str(args.ranks),
                    "--store",
                    os.path.join(stores, str(k)),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            for k in range(args.ranks)
        ]
        outputs = [proc.communicate(timeout=300)[0] for proc in procs]
    if any(proc.returncode != 0 for proc in procs):
        raise SystemExit("a rank failed")
    for line in outputs:
        print(line.strip())
    for e in host.join(timeout=60):
        if e["epoch"] > 0 and "packets" in e:  # the coded deliveries (epoch 0 goes whole)
            print(json.dumps({k: e[k] for k in ("epoch", "packets", "uncoded_packets", "bytes_sent")}))


if __name__ == "__main__":
    main()
