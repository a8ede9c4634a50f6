"""How to code records of uneven size: segments of each size against padding every record to
the longest in its packet, on 2000 records of lognormal sizes (mean 110 KB, coefficient of
variation 0.7), 4 ranks caching alpha = 0.5, global reshuffling, ``auto``, 3 epochs.

For each segment size the store's real planner and encoder run (``CodedSendCore``: the epoch
planned on its segment instance and verified, every packet encoded); "whole" plans the records
themselves and pads every packet to its longest record. Each row compares the bytes sent with
the record-level plan's transmissions times the mean record (what records all of the mean size
would cost) and counts padding, the bytes of a packet beyond its longest real part (none for
whole records: their cost is the longest record of every packet, in the bytes sent). Planning
time is this machine's.

Run: python python/benchmarks/bench_segments.py [--out results/segments.csv] (no torch needed).
"""

from __future__ import annotations

import argparse
import csv
import pathlib
import statistics
import sys
import time

import numpy as np

import ubershuffle as us
from ubershuffle import _native
from ubershuffle.sources import as_source
from ubershuffle.store import RecordStore

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import plane_rank  # noqa: E402

RECORDS, MEAN, CV, SEED, RANKS, ALPHA, EPOCHS = 2000, 110_000, 0.7, 0, 4, 0.5, 3
SEGMENTS = [512, 1024, 2048, 4096, 8192, 16384, 65536]
COLUMNS = [
    "segment_bytes",
    "epoch",
    "records",
    "mean_record_bytes",
    "workers",
    "alpha",
    "record_transmissions",
    "packets",
    "bytes_sent",
    "bytes_vs_ideal",
    "padding_bytes",
    "padding_share",
    "plan_seconds",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=pathlib.Path, default=HERE.parents[1] / "results" / "segments.csv")
    args = parser.parse_args()
    sizes = plane_rank.lognormal_sizes(RECORDS, MEAN, CV, SEED)
    source = as_source(plane_rank.make_records(sizes, SEED))
    store = RecordStore(source.offsets)
    source.load(store, np.arange(RECORDS))
    mean = float(sizes.mean())
    sampler = us.CodedShuffleSampler(RECORDS, num_replicas=RANKS, rank=0, seed=SEED, alpha=ALPHA)
    rows = []
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        now = sampler._core
        nxt = now.stepped()
        record_plan = us.plan_instance(
            now.targets(), [nxt.batch(r) for r in range(RANKS)], points=RECORDS, seed=SEED
        )
        ideal = record_plan.transmissions * mean
        base = {"epoch": epoch + 1, "records": RECORDS, "mean_record_bytes": round(mean, 1), "workers": RANKS}
        base.update(alpha=ALPHA, record_transmissions=record_plan.transmissions)
        for segment in SEGMENTS:
            start = time.perf_counter()
            sender = _native.CodedSendCore(now, store._core, segment, 64 << 20)
            seconds = time.perf_counter() - start
            for k in range(sender.rounds):
                sender.encode_into(k, np.empty(sum(sender.round_sizes(k)), dtype=np.uint8))
            f = sender.figures()
            sent = f["packets"] * segment
            rows.append(
                dict(
                    base,
                    segment_bytes=segment,
                    packets=f["packets"],
                    bytes_sent=sent,
                    bytes_vs_ideal=sent / ideal,
                    padding_bytes=f["padding_bytes"],
                    padding_share=f["padding_bytes"] / f["data_bytes"],
                    plan_seconds=seconds,
                )
            )
        ends = np.cumsum(np.diff(record_plan.packet_offsets))
        lengths = sizes[record_plan.packet_points]
        longest = np.maximum.reduceat(lengths, np.r_[0, ends[:-1]]) if len(lengths) else np.zeros(0)
        sent = int(longest.sum())
        rows.append(
            dict(
                base,
                segment_bytes="whole",
                packets=record_plan.transmissions,
                bytes_sent=sent,
                bytes_vs_ideal=sent / ideal,
                padding_bytes=0,
                padding_share=0.0,
                plan_seconds=record_plan.plan_seconds,
            )
        )
    store.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6f}" if isinstance(v, float) else v) for k, v in r.items()})
    for segment in [*SEGMENTS, "whole"]:
        mine = [r for r in rows if r["segment_bytes"] == segment]
        ratio = statistics.median(r["bytes_vs_ideal"] for r in mine)
        padding = statistics.median(r["padding_share"] for r in mine)
        seconds = statistics.median(r["plan_seconds"] for r in mine)
        line = f"bytes / ideal {ratio:.3f}, padding / data {padding:.4f}, planning {seconds:.2f} s"
        print(f"{segment!s:>6}: {line}")


if __name__ == "__main__":
    main()
