"""Whether the exchange delivers the next epoch while the ranks train, and what a rank's store
holds: 2 local rank processes receive 20 000 records of 4 KiB (``ubershuffle.Exchange``, the
master on a thread of this process, loopback TCP, alpha 0.6, global reshuffling), and each
"trains" ``--train`` seconds (3 by default; a sleep) on every epoch's batch, epoch 0's
included. Writes one row per rank and epoch:

- ``wait_seconds``: how long ``next_epoch()`` waited for the epoch (what training sees of the
  delivery: near 0 when the epoch arrived while the rank trained on the one before);
- ``cache``: the records the master says the rank keeps after the epoch (its batch included);
- ``held_before_next``: records in the rank's store after training, just before the next
  call;
- ``next_new_records``: the records of the next epoch that were not in the cache (0 after the
  last epoch).

Checked (the run fails otherwise): ``held_before_next = cache + next_new_records``, to the
record: the store holds the cache and the epoch in flight, nothing the rank no longer keeps.
Wait times are this machine's; the record counts follow from the chain (seeded).

Run: python python/benchmarks/bench_exchange_overlap.py [--train 3] [--epochs 6] [--out FILE]
(needs the package installed).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import pathlib
import secrets
import subprocess
import sys

import numpy as np

import ubershuffle as us

RANKS, POINTS, WIDTH, ALPHA, SEED = 2, 20_000, 4096, 0.6, 1
ROOT = pathlib.Path(__file__).resolve().parents[2]
COLUMNS = ["rank", "epoch", "wait_seconds", "cache", "held_before_next", "next_new_records"]

RANK = """
import json, sys, time
import ubershuffle as us
ex = us.Exchange.connect(sys.argv[1], timeout=60.0)
train = float(sys.argv[2])
time.sleep(train)  # epoch 0, from the starting cache
while True:
    started = time.perf_counter()
    try:
        batch = ex.next_epoch()
    except us.ExchangeFinished:
        break
    row = {"rank": ex.rank, "epoch": batch.epoch, "wait_seconds": time.perf_counter() - started,
           "cache": len(batch.cache), "new_records": len(batch.new_ids)}
    time.sleep(train)
    row["held_before_next"] = len(ex.store.held())
    print(json.dumps(row), flush=True)
ex.close()
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", type=float, default=3.0, help="seconds of training per epoch")
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--out", default=str(ROOT / "results" / "exchange-overlap.csv"))
    args = p.parse_args()
    os.environ.setdefault(us.exchange.TOKEN_VAR, secrets.token_hex(16))
    records = np.random.default_rng(SEED).integers(0, 256, size=(POINTS, WIDTH), dtype=np.uint8)
    host = us.Exchange.host(
        records, workers=RANKS, alpha=ALPHA, epochs=args.epochs, seed=SEED, timeout=10 * args.train + 30
    )
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", RANK, host.address, str(args.train)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(RANKS)
    ]
    rows = []
    for r in ranks:
        out, _ = r.communicate(timeout=60 + 2 * args.epochs * args.train)
        if r.returncode != 0:
            raise SystemExit(f"a rank failed ({r.returncode})")
        rows += [json.loads(line) for line in out.splitlines()]
    host.join(timeout=60)
    rows.sort(key=lambda r: (r["rank"], r["epoch"]))
    for r, after in zip(rows, rows[1:] + [None]):
        r["next_new_records"] = after["new_records"] if after and after["rank"] == r["rank"] else 0
        if r["held_before_next"] != r["cache"] + r["next_new_records"]:
            raise SystemExit(f"rank {r['rank']} epoch {r['epoch']}: the store holds {r['held_before_next']}")
    with open(args.out, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows({**r, "wait_seconds": f"{r['wait_seconds']:.4f}"} for r in rows)
    for r in rows:
        print(
            f"rank {r['rank']} epoch {r['epoch']}: waited {r['wait_seconds']:.3f} s; "
            f"held {r['held_before_next']} before the next call "
            f"(cache {r['cache']} + {r['next_new_records']} of the next epoch)"
        )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
