"""How fast the data plane's engine delivers on loopback, against what this machine's sockets
carry in the same run (issue "One engine for the data plane", its first goal).

2000 records whose sizes follow a lognormal distribution of mean 110 KB and coefficient of
variation 0.7 (ImageNet's JPEGs average about 110 KB), generated from a seed; 4 training ranks
and no training (each rank asks for the next epoch as soon as the delivery has landed), under
torchrun with gloo for the job's own group (the records travel on the engine's sockets):

- ``peer``: peer mode, global reshuffling (every rank's batch changes whole each epoch);
- ``store``: a store rank and 4 training ranks caching alpha = 0.5, coded delivery (``auto``);
- ``store-uncoded``: the same, uncoded (the store unicasts each rank the records it lacks).

For each epoch after the first two (the catch-up and the first step) every training rank notes
when its delivery started (``set_epoch`` returned, the ranks lined up by a barrier first) and
when it had landed (``wait_delivery`` returned); the delivery's window runs from the first
start to the last landing, and its rate is the bytes of the records the ranks lacked and
received (``record_bytes_received``, summed) over the window. In the same run, before each
arm, one process fans the same bytes out to 4 receiver processes over loopback TCP (1 MiB
``sendall`` in turn to each, ``recv_into`` a reused buffer): the raw rate. Times are this
machine's wall seconds; every figure's ratio is taken within its run.

The plane's cost on the training thread: over the same calls (``set_epoch`` to
``wait_delivery``'s return) each training rank notes its Python thread's CPU
(``time.thread_time``) and the rest of the process's (the engine's native threads); the
busiest rank's Python CPU over the delivery's window is ``python_cpu_share`` (goal: at most
1 %).

Writes results/plane-rate.csv (a row per run, arm and epoch) and results/plane-rate-summary.csv
(per arm the medians and the goal: at least half the raw rate), and prints them.

Run: python python/benchmarks/bench_rate.py [--runs 3] [--out-dir results] (needs torch and the
package installed).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import pathlib
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RECORDS, MEAN, CV, SEED = 2000, 110_000, 0.7, 0
EPOCHS = 5
FIRST_MEASURED = 2
RANKS = 4
GOAL = 0.5
CPU_GOAL = 0.01
CHUNK = 1 << 20
ARMS = {
    "peer": ["mode=peer", "policy=global"],
    "store": ["mode=store", "alpha=0.5", "scheme=auto"],
    "store-uncoded": ["mode=store", "alpha=0.5", "scheme=uncoded"],
}


def rank_main(out: pathlib.Path, opts: dict) -> None:
    """One rank of an arm's job (run by torchrun)."""
    import torch.distributed as dist

    sys.path.insert(0, str(HERE))
    from plane_rank import lognormal_sizes, make_records

    from ubershuffle.torch import ShuffleGroup, init_process_group

    init_process_group("gloo")
    rank = dist.get_rank()
    mode = opts["mode"]
    records = make_records(lognormal_sizes(RECORDS, MEAN, CV, SEED), SEED)
    kwargs = dict(mode=mode, seed=SEED, timeout=120.0)
    for key in ("policy", "scheme"):
        if key in opts:
            kwargs[key] = opts[key]
    if "alpha" in opts:
        kwargs["alpha"] = float(opts["alpha"])
    source = records if mode == "peer" or rank == 0 else None
    sg = ShuffleGroup(source, **kwargs)
    log: dict = {"epochs": {}}
    if sg.is_store:
        log["served"] = [{k: v for k, v in f.items() if not k.startswith("round_")} for f in sg.serve()]
    else:
        for epoch in range(EPOCHS):
            dist.barrier(sg.train_group)
            thread_cpu, process_cpu = time.thread_time(), time.process_time()
            sg.set_epoch(epoch)
            started = time.time()
            sg.wait_delivery()
            landed = time.time()
            log["epochs"][str(epoch + 1)] = {
                "started": started,
                "landed": landed,
                # This Python thread's CPU in the plane's calls, and the process's other
                # threads' (the engine's, native) over the same calls.
                "python_cpu": time.thread_time() - thread_cpu,
                "engine_cpu": time.process_time() - process_cpu - (time.thread_time() - thread_cpu),
            }
            log["epochs"][str(epoch + 1)]["python_threads"] = threading.active_count()
            if epoch > 0:
                log["epochs"][str(epoch)]["figures"] = sg.figures(epoch)
        sg.close()
    (out / f"rank-{rank}.json").write_text(json.dumps(log))


def run_arm(arm: str, workdir: pathlib.Path) -> list:
    """Runs one arm under torchrun; returns every training rank's log."""
    out = workdir / arm
    out.mkdir(parents=True, exist_ok=True)
    nproc = RANKS + (1 if arm.startswith("store") else 0)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}"]
    cmd += [str(pathlib.Path(__file__).resolve()), "--rank-job", str(out), *ARMS[arm]]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        sys.exit(f"error: arm {arm} failed:\n" + "\n".join((done.stdout + done.stderr).splitlines()[-30:]))
    logs = [json.loads((out / f"rank-{r}.json").read_text()) for r in range(nproc)]
    return logs[1:] if arm.startswith("store") else logs


RECEIVER = """
import socket, sys
n = int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
buf = bytearray(1 << 20)
view = memoryview(buf)
got = 0
while got < n:
    k = s.recv_into(view, min(len(buf), n - got))
    if not k:
        sys.exit("the sender closed early")
    got += k
s.sendall(b"k")
s.close()
"""


def raw_fanout(total: int) -> float:
    """Seconds for one process to send ``total`` bytes, a quarter to each of 4 receiver
    processes on loopback, in 1 MiB ``sendall`` s in turn."""
    per = total // RANKS
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(RANKS)
    port = listener.getsockname()[1]
    procs = [subprocess.Popen([sys.executable, "-c", RECEIVER, str(port), str(per)]) for _ in range(RANKS)]
    conns = [listener.accept()[0] for _ in range(RANKS)]
    chunk = memoryview(os.urandom(CHUNK))
    sent = [0] * RANKS
    start = time.perf_counter()
    while any(s < per for s in sent):
        for i, c in enumerate(conns):
            if sent[i] < per:
                n = min(CHUNK, per - sent[i])
                c.sendall(chunk[:n])
                sent[i] += n
    for c in conns:
        if c.recv(1) != b"k":
            sys.exit("error: a receiver did not finish")
    seconds = time.perf_counter() - start
    for c in conns:
        c.close()
    listener.close()
    for p in procs:
        p.wait()
    return seconds


def rows_of(run: int, arm: str, logs: list) -> list:
    """One row per measured epoch: the window, the bytes, the rate."""
    rows = []
    for epoch in range(FIRST_MEASURED, EPOCHS):
        e = str(epoch)
        figures = [log["epochs"][e]["figures"] for log in logs]
        started = min(log["epochs"][e]["started"] for log in logs)
        landed = max(log["epochs"][e]["landed"] for log in logs)
        record_bytes = sum(int(f["record_bytes_received"]) for f in figures)
        python_cpu = max(log["epochs"][e]["python_cpu"] for log in logs)
        wire_bytes = sum(int(f["bytes_received"]) for f in figures)
        rows.append(
            {
                "run": run,
                "arm": arm,
                "epoch": epoch,
                "kind": figures[0]["kind"],
                "record_bytes": record_bytes,
                "wire_bytes": wire_bytes,
                "seconds": round(landed - started, 6),
                "rate_gb_s": round(record_bytes / (landed - started) / 1e9, 4),
                "python_cpu_seconds": round(python_cpu, 6),
                "python_cpu_share": round(python_cpu / (landed - started), 6),
                "engine_cpu_seconds": round(max(log["epochs"][e]["engine_cpu"] for log in logs), 6),
                "python_threads": max(log["epochs"][e]["python_threads"] for log in logs),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out-dir", type=pathlib.Path, default=ROOT / "results")
    parser.add_argument("--arms", nargs="*", default=list(ARMS), choices=list(ARMS))
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="ubershuffle-bench-rate-") as tmp:
        for run in range(args.runs):
            for arm in args.arms:
                logs = run_arm(arm, pathlib.Path(tmp) / f"run-{run}")
                arm_rows = rows_of(run, arm, logs)
                total = int(statistics.median(r["record_bytes"] for r in arm_rows))
                raw = raw_fanout(total)
                for r in arm_rows:
                    r["raw_seconds"] = round(raw, 6)
                    r["raw_rate_gb_s"] = round(total / raw / 1e9, 4)
                    r["of_raw"] = round(r["rate_gb_s"] / r["raw_rate_gb_s"], 4)
                    print(",".join(str(v) for v in r.values()), flush=True)
                rows.extend(arm_rows)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    with open(args.out_dir / "plane-rate.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    summary = []
    for arm in args.arms:
        mine = [r for r in rows if r["arm"] == arm]
        of_raw = statistics.median(r["of_raw"] for r in mine)
        cpu_share = statistics.median(r["python_cpu_share"] for r in mine)
        summary.append(
            {
                "arm": arm,
                "rate_gb_s": round(statistics.median(r["rate_gb_s"] for r in mine), 4),
                "raw_rate_gb_s": round(statistics.median(r["raw_rate_gb_s"] for r in mine), 4),
                "of_raw": round(of_raw, 4),
                "goal": GOAL,
                "met": "yes" if of_raw >= GOAL else "no",
                "python_cpu_share": round(cpu_share, 6),
                "cpu_goal": CPU_GOAL,
                "cpu_met": "yes" if cpu_share <= CPU_GOAL else "no",
            }
        )
    with open(args.out_dir / "plane-rate-summary.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(summary[0]))
        w.writeheader()
        w.writerows(summary)
    for s in summary:
        print(s)
    if args.out_dir.resolve() == (ROOT / "results").resolve():
        write_section(args.out_dir / "README.md", summary, args.runs)


ARM_WORDS = {
    "peer": "peer mode, global reshuffling",
    "store": "store mode, coded (auto), alpha 0.5",
    "store-uncoded": "store mode, uncoded, alpha 0.5",
}
SECTION = "plane-rate"


def write_section(readme: pathlib.Path, summary: list, runs: int) -> None:
    """Replaces (or appends) this benchmark's section of results/README.md, between the
    markers the experiments use, its every number taken from ``summary``."""
    rows = "\n".join(
        f"| {ARM_WORDS[s['arm']]} | {s['rate_gb_s']:.2f} | {s['raw_rate_gb_s']:.2f} | {s['of_raw']:.2f} "
        f"| at least {s['goal']} | {s['met']} | {100 * s['python_cpu_share']:.3f} % "
        f"| at most {100 * s['cpu_goal']:.0f} % | {s['cpu_met']} |"
        for s in summary
    )
    body = f"""## {SECTION}

How fast the data plane's engine delivers on loopback, against what this machine's sockets carry
in the same run: {RECORDS} records of lognormal sizes (mean {MEAN // 1000} KB, coefficient of
variation {CV}), {RANKS} training ranks that do not train, epochs {FIRST_MEASURED} to {EPOCHS - 1}
of {runs} runs, medians. A delivery's rate is the bytes of the records the ranks lacked over its
window (the first rank's `set_epoch` to the last rank's landing); the raw rate is one process
fanning the same bytes out to {RANKS} receiver processes over plain loopback TCP, measured right
after each arm. The training thread's share is the busiest rank's Python CPU in the plane's calls
over the delivery's window (the engine's own threads are native).

| arm | delivered GB/s | raw GB/s | of raw | goal | met | training thread's CPU | goal | met |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |
{rows}

Data: [`plane-rate.csv`](plane-rate.csv) (per run, arm and epoch),
[`plane-rate-summary.csv`](plane-rate-summary.csv).
Run again: `python python/benchmarks/bench_rate.py --runs {runs}` (torch and the package installed)."""
    begin, end = f"<!-- experiment {SECTION} begin -->", f"<!-- experiment {SECTION} end -->"
    text = readme.read_text() if readme.exists() else ""
    block = f"{begin}\n{body}\n{end}"
    if begin in text and end in text:
        text = text[: text.index(begin)] + block + text[text.index(end) + len(end) :]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    tmp = readme.with_suffix(".md.tmp")
    tmp.write_text(text)
    tmp.replace(readme)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--rank-job":
        rank_main(pathlib.Path(sys.argv[2]), dict(a.split("=", 1) for a in sys.argv[3:]))
    else:
        main()
