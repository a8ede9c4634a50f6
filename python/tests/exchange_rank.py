"""One training rank of the exchange tests, as a process of its own: joins the store, checks
every delivered record against the regenerated data set and its batch against a sampler of the
same settings, and prints one JSON line per epoch (then, with --hang-after E, stops after
epoch E, as a frozen rank would, until killed). With --state FILE it saves the epoch it took
after every epoch; --start E resumes at epoch E (a job resumes from the checkpoint its ranks
share)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

import ubershuffle as us

POINTS, WIDTH, SEED, ALPHA = 240, 96, 11, 0.5


def data_set() -> np.ndarray:
    """The records every process regenerates."""
    return np.random.default_rng(SEED).integers(0, 256, size=(POINTS, WIDTH), dtype=np.uint8)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("address")
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--store")
    p.add_argument("--state")
    p.add_argument("--hang-after", type=int)
    p.add_argument("--start", type=int, default=0)
    args = p.parse_args()
    truth = data_set()
    start = args.start
    with us.Exchange.connect(
        args.address, rank=args.rank, world=args.world, store_dir=args.store, epoch=start
    ) as ex:
        held = ex.store.held()
        print(json.dumps({"rank": ex.rank, "start": start, "held": len(held)}), flush=True)
        sampler = us.CodedShuffleSampler(POINTS, num_replicas=ex.world, rank=ex.rank, seed=SEED, alpha=ALPHA)
        try:
            for batch in ex:
                sampler.set_epoch(batch.epoch)
                line = {
                    "rank": ex.rank,
                    "epoch": batch.epoch,
                    "agree": bool(np.array_equal(np.sort(sampler.batch()), batch.ids)),
                    "bytes_ok": bool(np.array_equal(batch.records, truth[batch.ids])),
                    "received": batch.figures.bytes_received,
                }
                if args.state:
                    with open(args.state + ".tmp", "w") as f:
                        json.dump({"epoch": batch.epoch}, f)
                    os.replace(args.state + ".tmp", args.state)
                print(json.dumps(line), flush=True)
                if args.hang_after is not None and batch.epoch >= args.hang_after:
                    time.sleep(600)
        except us.ExchangeClosed as e:
            print(json.dumps({"rank": ex.rank, "error": type(e).__name__, "message": str(e)}), flush=True)
            sys.exit(1)
    print(json.dumps({"rank": args.rank, "done": True}), flush=True)


if __name__ == "__main__":
    main()
