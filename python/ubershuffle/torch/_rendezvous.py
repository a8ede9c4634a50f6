"""The plane's rendezvous through the job's key-value store (torchrun's TCPStore): every rank
publishes the address its engine listens on and reads every other's, and the ranks share a
per-job key for their sealed connections. The store carries nothing else: the records travel
on the engine's own sockets.

Where the key comes from: ``UBERSHUFFLE_TOKEN_FILE`` (a file holding a secret) or
``UBERSHUFFLE_TOKEN`` when set, the same on every rank (for a job whose key-value store is
reachable by others: the store is unauthenticated); otherwise the plane's first rank makes a
random key and hands it out through the store, which every rank of the job can read anyway.
Which address a rank publishes: :func:`ubershuffle._net.listen_host`.
"""

from __future__ import annotations

import datetime
import os
from typing import Any

from .._net import IFNAME_VARIABLES, interface_address, listen_host, token_key

__all__ = ["IFNAME_VARIABLES", "interface_address", "listen_host", "meet", "token_key"]


def meet(store: Any, prefix: str, rank: int, world: int, address: str, timeout: float) -> tuple:
    """Publishes ``address`` under ``prefix`` and returns every rank's address (by rank) and
    the job's key, waiting at most ``timeout`` seconds for the others."""
    store.set(f"{prefix}/addr/{rank}", address)
    key = token_key()
    if key is None and rank == 0:
        store.set(f"{prefix}/key", os.urandom(32))
    keys = [f"{prefix}/addr/{r}" for r in range(world)]
    if key is None:
        keys.append(f"{prefix}/key")
    try:
        store.wait(keys, datetime.timedelta(seconds=timeout))
    except Exception as e:  # noqa: BLE001 (torch raises its own store errors)
        missing = [k for k in keys if not store.check([k])]
        raise TimeoutError(
            f"rank {rank} waited {timeout:g} s for the other ranks to publish their addresses "
            f"({len(missing)} missing, e.g. {missing[0] if missing else '?'}): {str(e).splitlines()[0]}"
        ) from None
    values = store.multi_get(keys)
    addresses = [v.decode() for v in values[:world]]
    if key is None:
        key = bytes(values[world])
    return addresses, key
