"""The exchange's benchmark: 4 local rank processes receive 4 KiB records by coded delivery
(``ubershuffle.Exchange``, the master on a thread of this process) for the policies
partial-local 0.3 and global; alongside, ``ubershuffle run --transport tcp`` with 4
``ubershuffle worker`` processes on the same chain (linear regression on 4 KiB records: 511
features and a label). Writes results/exchange-vs-run.csv, one row per system, policy and epoch, and
checks, for every exchange epoch:

- the master's data bytes = transmissions x record size + the stated framing of its data
  messages (``data_framing`` below: 12 bytes and 4 per packet per message, 1 more for a
  point-to-point chunk; the transport's frames below the messages are not counted), to the byte;
- the coded ratio (transmissions / uncoded) equals the plan's (``ubershuffle.plan_epochs``);
- ``run`` sends the same transmissions for the same chain.

Times are the master's phases (seconds, this machine); ``delivery_seconds`` is the epoch but
planning and its checks (routing, encoding, moving the packets, the ranks decoding and handing
the records over, the acknowledgements), the figure the exchange is compared on with ``run``.

Run: python python/benchmarks/bench_exchange.py [--cli target/release/ubershuffle] [--out FILE]
(needs the package installed and the command line built: cargo build --release -p ubershuffle).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import pathlib
import secrets
import socket
import statistics
import subprocess
import sys

import numpy as np

import ubershuffle as us

RANKS, POINTS, WIDTH, ALPHA, EPOCHS, SEED, SCHEME = 4, 2048, 4096, 0.5, 10, 1, "auto"
SETTINGS = [("partial-local", 0.3), ("global", None)]
ROOT = pathlib.Path(__file__).resolve().parents[2]
PHASES = (
    "plan_seconds",
    "verify_seconds",
    "route_seconds",
    "encode_seconds",
    "transmit_seconds",
    "decode_seconds",
    "train_seconds",
    "waiting_seconds",
    "aggregate_seconds",
    "epoch_seconds",
)
COLUMNS = [
    "system",
    "policy",
    "epoch",
    "transmissions",
    "uncoded_transmissions",
    "coded_ratio",
    "plan_ratio",
    "payload_bytes",
    "data_bytes",
    "framing_bytes",
    "control_bytes",
    *PHASES,
    "delivery_seconds",
]

RANK = """
import sys, ubershuffle as us
ex = us.Exchange.connect(sys.argv[1], timeout=30.0)
for batch in ex:
    pass
"""


def data_framing(e: dict) -> int:
    """The header bytes of the master's data messages in epoch ``e``: per message the epoch,
    the attempt and the packet count (u32 each), per packet its sequence number (u32), and a
    kind byte per point-to-point chunk (``ubershuffle_runtime::protocol::data_chunk_framing``)."""
    packets = e["broadcast_packets"] + e["unicast_packets"]
    return 12 * e["data_messages"] + 4 * packets + e["unicast_messages"]


def exchange_epochs(policy: str, fraction: float | None) -> list[dict]:
    records = np.random.default_rng(SEED).integers(0, 256, size=(POINTS, WIDTH), dtype=np.uint8)
    host = us.Exchange.host(
        records, workers=RANKS, alpha=ALPHA, epochs=EPOCHS, policy=policy, fraction=fraction,
        scheme=SCHEME, seed=SEED, timeout=30.0,
    )  # fmt: skip
    procs = [subprocess.Popen([sys.executable, "-c", RANK, host.address]) for _ in range(RANKS)]
    codes = [p.wait(timeout=300) for p in procs]
    epochs = host.join(timeout=60)
    if any(codes):
        raise SystemExit(f"an exchange rank failed: {codes}")
    return epochs


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_epochs(cli: str, policy: str, fraction: float | None) -> list[dict]:
    addr, token = f"127.0.0.1:{free_port()}", secrets.token_hex(16)
    env = {**os.environ, "UBERSHUFFLE_TOKEN": token}
    args = [cli, "run", "--transport", "tcp", "--listen", addr, "--workers", str(RANKS),
            "--learner", "linreg", "--features", str(WIDTH // 8 - 1), "--points", str(POINTS),
            "--alpha", str(ALPHA), "--epochs", str(EPOCHS), "--policy", policy, "--scheme", SCHEME,
            "--seed", str(SEED), "--timeout", "30", "--json"]  # fmt: skip
    if fraction is not None:
        args += ["--fraction", str(fraction)]
    master = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    worker = [cli, "worker", "--connect", addr, "--timeout", "30"]
    workers = [subprocess.Popen(worker, stderr=subprocess.DEVNULL, env=env) for _ in range(RANKS)]
    out, _ = master.communicate(timeout=600)
    for w in workers:
        w.wait(timeout=60)
    if master.returncode != 0:
        raise SystemExit("ubershuffle run --transport tcp failed")
    return json.loads(out)["epochs"]


def rows_of(system: str, policy: str, epochs: list[dict], planned: list[dict]) -> list[dict]:
    rows = []
    for e, p in zip(epochs, planned):
        framing = data_framing(e) if "data_messages" in e else ""
        rows.append(
            {
                "system": system,
                "policy": policy,
                "epoch": e["epoch"],
                "transmissions": e["transmissions"],
                "uncoded_transmissions": e["uncoded_transmissions"],
                "coded_ratio": f"{e['transmissions'] / e['uncoded_transmissions']:.6f}",
                "plan_ratio": f"{p['transmissions'] / p['uncoded_transmissions']:.6f}",
                "payload_bytes": e["payload_bytes"],
                "data_bytes": e.get("data_bytes", ""),
                "framing_bytes": framing,
                "control_bytes": e["control_bytes"],
                **{k: f"{e[k]:.6f}" for k in PHASES},
                # The epoch but planning and its checks: what moves and hands over the records.
                "delivery_seconds": f"{e['epoch_seconds'] - e['plan_seconds'] - e['verify_seconds']:.6f}",
            }
        )
    return rows


def check(rows: list[dict]) -> None:
    for r in rows:
        if r["system"] != "exchange":
            continue
        expected = r["transmissions"] * WIDTH + r["framing_bytes"]
        if r["data_bytes"] != expected or r["payload_bytes"] != r["transmissions"] * WIDTH:
            raise SystemExit(
                f"{r['policy']} epoch {r['epoch']}: data bytes {r['data_bytes']}, expected {expected}"
            )
        if r["coded_ratio"] != r["plan_ratio"]:
            raise SystemExit(
                f"{r['policy']} epoch {r['epoch']}: coded ratio {r['coded_ratio']} != {r['plan_ratio']}"
            )
    by = {(r["system"], r["policy"], r["epoch"]): r["transmissions"] for r in rows}
    for (system, policy, epoch), n in by.items():
        if system == "exchange" and by.get(("run", policy, epoch)) != n:
            raise SystemExit(
                f"{policy} epoch {epoch}: run sent {by.get(('run', policy, epoch))}, exchange {n}"
            )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cli", default=str(ROOT / "target" / "release" / "ubershuffle"))
    p.add_argument("--out", default=str(ROOT / "results" / "exchange-vs-run.csv"))
    args = p.parse_args()
    os.environ.setdefault(us.exchange.TOKEN_VAR, secrets.token_hex(16))
    rows = []
    for policy, fraction in SETTINGS:
        planned = us.plan_epochs(
            RANKS,
            POINTS,
            policy=policy,
            fraction=fraction,
            alpha=ALPHA,
            scheme=SCHEME,
            epochs=EPOCHS,
            seed=SEED,
        )
        rows += rows_of("exchange", policy, exchange_epochs(policy, fraction), planned)
        rows += rows_of("run", policy, run_epochs(args.cli, policy, fraction), planned)
    check(rows)
    with open(args.out, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    for policy, _ in SETTINGS:
        times = {
            s: statistics.median(
                float(r["delivery_seconds"]) for r in rows if (r["system"], r["policy"]) == (s, policy)
            )
            for s in ("exchange", "run")
        }
        print(f"{policy}: median delivery {times['exchange']:.4f} s (exchange), {times['run']:.4f} s (run), "
              f"ratio {times['exchange'] / times['run']:.3f}")  # fmt: skip
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
