"""Runs a rank script as ``nproc`` processes with torchrun's environment but no agent: no rank
is stopped because another ended, and every rank's own exit status is kept. The job's
key-value store is this process's, as torchrun's agent hosts it, so it outlives every rank.

Usage: python launch_ranks.py OUT_DIR NPROC SCRIPT [ARG ...]; writes OUT_DIR/exits.json (each
rank's return code: negative for a signal) once every rank has ended.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys


def launch(out: pathlib.Path, nproc: int, script: str, args: list, timeout: float = 120) -> list:
    """Runs the ranks (their output to OUT_DIR/output-R.txt); returns their return codes."""
    import torch.distributed as dist

    out.mkdir(parents=True, exist_ok=True)
    store = dist.TCPStore("127.0.0.1", 0, nproc + 1, is_master=True, wait_for_workers=False)
    jobs = []
    for r in range(nproc):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(nproc))
        env.update(LOCAL_WORLD_SIZE=str(nproc), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(store.port))
        env.update(TORCHELASTIC_RESTART_COUNT="0", TORCHELASTIC_USE_AGENT_STORE="True")
        with open(out / f"output-{r}.txt", "w") as output:
            cmd = [sys.executable, script, str(out), *args]
            jobs.append(subprocess.Popen(cmd, stdout=output, stderr=subprocess.STDOUT, env=env))
    codes = []
    for job in jobs:
        try:
            codes.append(job.wait(timeout=timeout))
        except subprocess.TimeoutExpired:
            job.kill()
            codes.append(job.wait())
    del store  # kept until every rank ended
    return codes


def output_of(out: pathlib.Path, nproc: int) -> str:
    """Every rank's output, rank by rank."""
    return "\n".join(f"--- rank {r}\n" + (out / f"output-{r}.txt").read_text() for r in range(nproc))


if __name__ == "__main__":
    folder = pathlib.Path(sys.argv[1])
    codes = launch(folder, int(sys.argv[2]), sys.argv[3], sys.argv[4:])
    (folder / "exits.json").write_text(json.dumps(codes))
