"""One rank of the exchange tests, as a process of its own: connects, follows the sampler,
checks every delivered record against the regenerated data set, and prints one JSON line per
epoch (then, with --hang-after E, stops calling the exchange after epoch E, as a frozen or
killed rank would). With --state FILE it saves the sampler's state_dict after every epoch and,
when FILE exists at the start, resumes from it."""

from __future__ import annotations

import argparse
import json
import os
import pickle
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
    p.add_argument("--store")
    p.add_argument("--state")
    p.add_argument("--hang-after", type=int)
    p.add_argument("--timeout", type=float, default=2.0)
    args = p.parse_args()
    truth = data_set()
    ex = us.Exchange.connect(args.address, store_dir=args.store, timeout=args.timeout)
    sampler = us.CodedShuffleSampler(POINTS, num_replicas=ex.world, rank=ex.rank, seed=SEED, alpha=ALPHA)
    if args.state and os.path.exists(args.state):
        with open(args.state, "rb") as f:
            saved = pickle.load(f)
        sampler.load_state_dict(saved["sampler"])
        # The last epoch's batch of the rank this store belonged to survived the crash (the
        # process may rejoin as another rank: ranks go by join order).
        before = us.CodedShuffleSampler(
            POINTS, num_replicas=ex.world, rank=saved["rank"], seed=SEED, alpha=ALPHA
        )
        before.load_state_dict(saved["sampler"])
        held = all(int(i) in ex.store for i in before.batch())
        print(json.dumps({"rank": ex.rank, "resumed_at": sampler.epoch, "held": bool(held)}), flush=True)
    while True:
        try:
            batch = ex.next_epoch()
        except us.ExchangeFinished:
            break
        sampler.set_epoch(batch.epoch)
        line = {
            "rank": ex.rank,
            "epoch": batch.epoch,
            "agree": bool(np.array_equal(np.sort(sampler.batch()), batch.ids)),
            "bytes_ok": bool(np.array_equal(batch.records, truth[batch.ids])),
            "new": len(batch.new_ids),
        }
        if args.state:
            with open(args.state + ".tmp", "wb") as f:
                pickle.dump({"rank": ex.rank, "sampler": sampler.state_dict()}, f)
            os.replace(args.state + ".tmp", args.state)
        print(json.dumps(line), flush=True)
        if args.hang_after is not None and batch.epoch >= args.hang_after:
            time.sleep(600)
    ex.close()
    print(json.dumps({"rank": ex.rank, "done": True}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
