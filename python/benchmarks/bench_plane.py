"""The in-job data plane's benchmark (``ubershuffle.torch.ShuffleGroup`` under torchrun, gloo on
loopback): 2000 records whose sizes follow a lognormal distribution of mean 110 KB and
coefficient of variation 0.7 (ImageNet's JPEGs average about 110 KB), generated from a seed.

- ``peer``: 4 ranks, partial-local with Q = 0.3, training emulated by sleeping (the CPU idle,
  as while a GPU computes) long enough that an epoch of training outlasts the exchange; then the
  partial-local seed's scheduler (one isend/irecv and a barrier of the group per record) on
  the same step as the plane's last delivery, in the foreground.
- ``store``: a store rank and 4 training ranks caching alpha = 0.5 (``auto``), the same records.
- ``store-uncoded``: the same, uncoded (``scheme="uncoded"``): the store unicasts each rank
  the records it lacks, the baseline that coded delivery is measured against.
- ``store-delivery``: the store mode's delivery time on the same chain (alpha = 0.5,
  ``auto``, the same records and seed) with no training, so that each epoch's wait for its
  batch is the whole delivery (``exposed_seconds``). (:class:`ubershuffle.Exchange` runs the
  same engine, so it is not measured apart.)

Every arm reports, per rank and epoch, the bytes it received on the plane against the bytes of
the records it lacked (``received_vs_lacked``: 1 plus its part of the plan; coded delivery
saves the store's uplink, not a rank's downlink, so about 1 there too).

Writes results/plane.csv (one row per arm, epoch and rank: the figures of
``ShuffleGroup.figures``, the records the chain moves into the rank, and the store's plan) and
results/plane-summary.csv (each goal of the issue, the measured value, computed from those
rows, and whether it is met), and prints them. Times are this machine's wall seconds.

Run: python python/benchmarks/bench_plane.py [--out-dir results] [--train-seconds S]
(needs the package installed and torch).
"""

from __future__ import annotations

import argparse
import csv
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile

import numpy as np

import ubershuffle as us

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
import plane_rank  # noqa: E402

RECORDS, MEAN, CV, SEED = 2000, 110_000, 0.7, 0
EPOCHS = 5
COLUMNS = [
    "arm",
    "mode",
    "policy",
    "ranks",
    "records",
    "mean_record_bytes",
    "segment_bytes",
    "epoch",
    "rank",
    "kind",
    "bytes_sent",
    "bytes_received",
    "record_bytes_received",
    "received_vs_lacked",
    "chain_bytes",
    "padding_bytes",
    "data_bytes",
    "packets",
    "coded_packets",
    "uncoded_packets",
    "record_transmissions",
    "records_received",
    "source_records",
    "source_bytes",
    "held_records",
    "held_bytes",
    "train_seconds",
    "transfer_seconds",
    "exposed_seconds",
    "epoch_seconds",
    "baseline_seconds",
]


def run(out: pathlib.Path, nproc: int, *options: str) -> list:
    out.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={nproc}",
        str(HERE / "plane_rank.py"),
        str(out),
        *options,
    ]
    subprocess.run(cmd, check=True, timeout=1800)
    return [json.loads((out / f"rank-{r}.json").read_text()) for r in range(nproc)]


def chain(ranks: int, **kwargs) -> list:
    """Every epoch's targets and batches of the job's chain (the same seed and settings)."""
    sampler = us.CodedShuffleSampler(RECORDS, num_replicas=ranks, rank=0, seed=SEED, **kwargs)
    states = []
    for e in range(EPOCHS + 1):
        sampler.set_epoch(e)
        core = sampler._core
        states.append({"targets": core.targets(), "batches": [core.batch(r) for r in range(ranks)]})
    return states


def peer_rows(logs: list, sizes: np.ndarray, train: float) -> list:
    """The peer arm's rows, each with the bytes of the records the chain moves into the rank."""
    states = chain(4, policy="partial-local", fraction=0.3)
    rows = []
    for r, log in enumerate(logs):
        for f in log["epochs"]:
            e = f["epoch"]
            arrived = (
                np.setdiff1d(states[e]["targets"][r], states[e - 1]["targets"][r])
                if e
                else states[0]["targets"][r]
            )
            rows.append(
                row(
                    "peer",
                    "peer",
                    "partial-local 0.3",
                    4,
                    log["segment_bytes"],
                    f,
                    r,
                    train,
                    chain_bytes=int(sizes[arrived].sum()),
                )
            )
        last = dict(log["last_step"], epoch=EPOCHS)
        rows.append(
            row(
                "peer-last-step",
                "peer",
                "partial-local 0.3",
                4,
                log["segment_bytes"],
                last,
                r,
                0.0,
                baseline_seconds=log["baseline_seconds"],
            )
        )
    return rows


def store_rows(logs: list, train: float, arm: str = "store", scheme: str = "auto") -> list:
    """A store arm's rows; the store's steps with the record-level plan's transmissions."""
    store, trainers = logs[0], logs[1:]
    states = chain(4, alpha=0.5, scheme=scheme)
    policy = "global" if scheme == "auto" else f"global, {scheme}"
    rows = []
    for r, log in enumerate(trainers):
        for f in log["epochs"]:
            rows.append(row(arm, "store", policy, 4, log["segment_bytes"], f, r + 1, train))
    for f in store["served"]:
        e = f["epoch"]
        extra = {}
        if f["kind"] == "step":
            before, after = states[e - 1], states[e]
            plan = us.plan_instance(before["targets"], after["batches"], scheme, points=RECORDS, seed=SEED)
            extra["record_transmissions"] = plan.transmissions
        rows.append(row(arm, "store", policy, 4, store["segment_bytes"], f, 0, train, **extra))
    return rows


def delivery_rows(store: list) -> list:
    """The delivery arm's rows: the store mode's training ranks."""
    rows = []
    for r, log in enumerate(store[1:]):
        for f in log["epochs"]:
            rows.append(row("store-delivery", "store", "global", 4, log["segment_bytes"], f, r + 1, 0.0))
    return rows


def row(arm, mode, policy, ranks, segment, f, rank, train, **extra) -> dict:
    """A CSV row from a rank's figures of an epoch."""
    out = {k: f.get(k, "") for k in COLUMNS}
    out.update(
        arm=arm,
        mode=mode,
        policy=policy,
        ranks=ranks,
        records=RECORDS,
        mean_record_bytes=round(float(SIZES.mean()), 1),
        segment_bytes=segment,
        epoch=f["epoch"],
        rank=rank,
        train_seconds=train,
    )
    out.update(extra)
    lacked = f.get("record_bytes_received")
    if lacked:
        out["received_vs_lacked"] = f["bytes_received"] / lacked
    return out


def summary(rows: list) -> list:
    """The issue's goals, each from the rows."""
    peer = [r for r in rows if r["arm"] == "peer" and r["kind"] == "step"]
    by_epoch: dict = {}
    for r in peer:
        by_epoch.setdefault(r["epoch"], []).append(r)
    exposed_share = [
        max(x["exposed_seconds"] for x in g) / max(x["epoch_seconds"] for x in g) for g in by_epoch.values()
    ]
    last = [r for r in rows if r["arm"] == "peer-last-step"]
    ours = max(r["transfer_seconds"] for r in last)
    baseline = max(r["baseline_seconds"] for r in last)
    steps = [r for r in rows if r["arm"] == "store" and r["rank"] == 0 and r["kind"] == "step"]
    ideal = [r["bytes_sent"] / (r["record_transmissions"] * r["mean_record_bytes"]) for r in steps]
    padding = [r["padding_bytes"] / r["data_bytes"] for r in steps]
    exposed_train = [
        max(x["transfer_seconds"] for x in g) < min(x["train_seconds"] for x in g) for g in by_epoch.values()
    ]

    def received(arm: str) -> float:
        # The training ranks' steps (the store's rows and the catch-ups have no such ratio).
        ratios = [
            r["received_vs_lacked"]
            for r in rows
            if r["arm"] == arm and r["kind"] == "step" and isinstance(r["received_vs_lacked"], float)
        ]
        return statistics.median(ratios) if ratios else float("nan")

    return [
        measure(
            "peer_received_vs_lacked",
            "peer: bytes a rank received / bytes of the records it lacked, median",
            received("peer"),
            "= 1",
            lambda v: v == 1,
        ),
        measure(
            "store_uncoded_received_vs_lacked",
            "store, uncoded: bytes a rank received / bytes of the records it lacked, median",
            received("store-uncoded"),
            "<= 1.02",
            lambda v: v <= 1.02,
        ),
        measure(
            "store_received_vs_lacked",
            "store, coded: bytes a rank received / bytes of the records it lacked, median",
            received("store"),
            "(about 1: coding saves the store's uplink, not a rank's downlink)",
            lambda v: True,
        ),
        measure(
            "peer_bytes_equal_chain",
            "peer: ranks whose bytes received equal the chain's records, to the byte",
            sum(r["bytes_received"] == r["chain_bytes"] for r in peer) / len(peer),
            "= 1",
            lambda v: v == 1,
        ),
        measure(
            "peer_exposed_share",
            "peer: exposed data time / epoch time (median over epochs after the first)",
            statistics.median(exposed_share),
            "<= 0.05",
            lambda v: v <= 0.05,
        ),
        measure(
            "peer_exchange_shorter",
            "peer: epochs whose exchange was shorter than their training",
            sum(exposed_train) / len(exposed_train),
            "(the condition of the line above)",
            lambda v: True,
        ),
        measure(
            "peer_speedup_per_sample",
            "peer: per-sample isend/irecv scheduler / the plane (the same step)",
            baseline / ours,
            ">= 5",
            lambda v: v >= 5,
        ),
        measure(
            "store_bytes_vs_ideal",
            "store: bytes sent / (record-level transmissions x mean record), median",
            statistics.median(ideal),
            "<= 1.1",
            lambda v: v <= 1.1,
        ),
        measure(
            "store_padding_share",
            "store: padding / data bytes, median",
            statistics.median(padding),
            "<= 0.1",
            lambda v: v <= 0.1,
        ),
    ]


def measure(key, name, value, goal, ok) -> dict:
    """A summary row."""
    return {
        "key": key,
        "measure": name,
        "value": round(float(value), 4),
        "goal": goal,
        "met": bool(ok(value)),
    }


SIZES = plane_rank.lognormal_sizes(RECORDS, MEAN, CV, SEED)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=pathlib.Path, default=ROOT / "results")
    parser.add_argument("--train-seconds", type=float, default=4.0, help="emulated training per epoch")
    args = parser.parse_args()
    sizes = SIZES
    common = [f"records={RECORDS}", f"mean={MEAN}", f"cv={CV}", f"seed={SEED}", f"epochs={EPOCHS}"]
    train = [f"train_seconds={args.train_seconds}"]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        peer = run(
            tmp / "peer",
            4,
            "mode=peer",
            "policy=partial-local",
            "fraction=0.3",
            "baseline=1",
            *common,
            *train,
        )
        store = run(tmp / "store", 5, "mode=store", "alpha=0.5", *common, *train)
        uncoded = run(tmp / "store-uncoded", 5, "mode=store", "alpha=0.5", "scheme=uncoded", *common, *train)
        store_delivery = run(tmp / "store-delivery", 5, "mode=store", "alpha=0.5", *common)
    rows = (
        peer_rows(peer, sizes, args.train_seconds)
        + store_rows(store, args.train_seconds)
        + store_rows(uncoded, args.train_seconds, "store-uncoded", "uncoded")
        + delivery_rows(store_delivery)
    )
    args.out_dir.mkdir(parents=True, exist_ok=True)
    with open(args.out_dir / "plane.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6f}" if isinstance(v, float) else v) for k, v in r.items()})
    goals = summary(rows)
    with open(args.out_dir / "plane-summary.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["key", "measure", "value", "goal", "met"])
        w.writeheader()
        w.writerows(goals)
    for g in goals:
        print(f"{'met ' if g['met'] else 'MISSED'}  {g['value']:>8}  {g['goal']:>8}  {g['measure']}")


if __name__ == "__main__":
    main()
