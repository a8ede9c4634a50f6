"""Measures the figures issue 25 asks for (a benchmark script, not a test):

- ``set_epoch(e + 1)`` at ImageNet size (q = 1 281 167, 8 ranks), median over steps;
- loading a state saved at epoch 90 (and, for comparison, replaying to epoch 90);
- ``__iter__`` throughput in indices per second;
- ``plan(...)`` from Python against the command line's ``plan_seconds`` (needs the binary).

Run: ``python python/benchmarks/bench_sampler.py [--cli target/release/ubershuffle]``.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import time

import ubershuffle

Q = 1_281_167
WORLD = 8


def median_seconds(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", help="path of the ubershuffle binary, to compare plan_seconds")
    ap.add_argument("--repeat", type=int, default=5, help="runs of each plan comparison (median)")
    ap.add_argument("--plan-only", action="store_true", help="only the plan comparison (needs --cli)")
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)")
    if not args.plan_only:
        sampler_figures()
    if args.cli:
        plan_figures(args.cli, args.repeat)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


def sampler_figures() -> None:
    s = ubershuffle.CodedShuffleSampler(Q, num_replicas=WORLD, rank=3, seed=1)
    steps = []
    for e in range(1, 11):
        t = time.perf_counter()
        s.set_epoch(e)
        steps.append(time.perf_counter() - t)
    print(
        f"set_epoch(e+1), q={Q}, {WORLD} ranks: "
        f"median {statistics.median(steps):.3f} s, max {max(steps):.3f} s"
    )

    t = time.perf_counter()
    s.set_epoch(90)
    print(f"set_epoch(90) from epoch 10 (replay of 80 steps): {time.perf_counter() - t:.2f} s")
    it = iter(s)
    for _ in range(1000):
        next(it)
    blob = pickle.dumps(s.state_dict())
    print(f"state at epoch 90: {len(blob) / 1e6:.1f} MB pickled")

    def load():
        fresh = ubershuffle.CodedShuffleSampler(Q, num_replicas=WORLD, rank=3)
        fresh.load_state_dict(pickle.loads(blob))
        fresh.set_epoch(90)
        return fresh

    print(f"load a state at epoch 90 (unpickle + load_state_dict): {median_seconds(load, 3):.3f} s")
    t = time.perf_counter()
    fresh = load()
    fresh.set_epoch(91)
    print(f"  then set_epoch(91): {time.perf_counter() - t:.3f} s including the load")

    def drain():
        n = 0
        for _ in s:
            n += 1
        return n

    n = len(s)
    secs = median_seconds(drain, 5)
    print(f"__iter__: {n} indices in {secs:.4f} s = {n / secs / 1e6:.1f} M indices/s")

    t = time.perf_counter()
    summary = s.plan_summary()
    print(
        f"plan_summary() at epoch 90: {summary['transmissions']} transmissions vs "
        f"{summary['uncoded_transmissions']} uncoded ({summary['made_by']}), "
        f"{time.perf_counter() - t:.2f} s"
    )


def plan_figures(cli_path: str, repeat: int) -> None:
    """plan_seconds of the command line and of ubershuffle.plan for the same arguments, each
    run in a fresh process (a warm heap in a long-lived process would favour Python),
    alternating, median of `repeat`."""
    cases = [
        ("ubershuffle-opt", 20, 100000, 0.4),
        ("clique-cover", 100, 200000, 0.3),
        ("coded", 20, 1000000, 0.55),
    ]
    for scheme, n, q, a in cases:
        cmd = [cli_path, "plan", "--scheme", scheme, "-n", str(n), "-q", str(q), "-a", str(a), "--json"]
        code = f"import ubershuffle; print(ubershuffle.plan({n}, {q}, {a}, {scheme!r}).plan_seconds)"
        cli, py = [], []
        for _ in range(repeat):
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            cli.append(json.loads(out)["plan_seconds"])
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
            py.append(float(out.stdout))
        c, p = statistics.median(cli), statistics.median(py)
        print(
            f"plan {scheme} n={n} q={q} alpha={a}: CLI plan_seconds {c:.3f} s, "
            f"Python {p:.3f} s ({100 * (p / c - 1):+.1f} %), median of {repeat}"
        )


if __name__ == "__main__":
    main()
