"""``init_process_group``: torch.distributed's, safe across torchrun's restarts."""

from __future__ import annotations

import datetime
import os
from typing import Any

import torch.distributed as dist


def init_process_group(backend: str | None = None, **kwargs: Any) -> None:
    """``torch.distributed.init_process_group`` for a torchrun job that may be restarted
    (``--max-restarts``): the same arguments, and under torchrun's agent store the job's
    processes meet under a key prefix of their own attempt.

    Why: torch 2.15's torchrun keeps one store across restarts and the restarted processes'
    gloo group reads the addresses the dead attempt left there ("Connection refused" at
    ``init_process_group``, checked with 4 ranks and ``--standalone``). Outside torchrun, or
    with an explicit ``store`` or ``init_method``, this is ``init_process_group`` itself.
    """
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT")
    agent_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    if attempt is None or not agent_store or "store" in kwargs or "init_method" in kwargs:
        dist.init_process_group(backend, **kwargs)
        return
    world = int(os.environ["WORLD_SIZE"])
    store = dist.TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        world,
        is_master=False,
        timeout=kwargs.get("timeout") or datetime.timedelta(minutes=30),
    )
    dist.init_process_group(
        backend,
        store=dist.PrefixStore(f"ubershuffle/attempt-{attempt}", store),
        rank=int(os.environ["RANK"]),
        world_size=world,
        **kwargs,
    )
