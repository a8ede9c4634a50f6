"""The plane's rendezvous through the job's key-value store (torchrun's TCPStore): every rank
publishes the address its engine listens on and reads every other's, and the ranks share a
per-job key for their sealed connections. The store carries nothing else: the records travel
on the engine's own sockets.

Where the key comes from: ``UBERSHUFFLE_TOKEN_FILE`` (a file holding a secret) or
``UBERSHUFFLE_TOKEN`` when set, the same on every rank (for a job whose key-value store is
reachable by others: the store is unauthenticated); otherwise the plane's first rank makes a
random key and hands it out through the store, which every rank of the job can read anyway.

Which address a rank publishes: the IPv4 address of the interface named by
``UBERSHUFFLE_SOCKET_IFNAME`` (or ``GLOO_SOCKET_IFNAME``, as gloo reads it) when set; otherwise,
as gloo does, the address this host's name resolves to.
"""

from __future__ import annotations

import datetime
import fcntl
import hashlib
import hmac
import os
import socket
import struct
from typing import Any

IFNAME_VARIABLES = ("UBERSHUFFLE_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")
"""The environment variables that name the interface to listen on, in order."""


def interface_address(name: str) -> str:
    """The IPv4 address of network interface ``name`` (Linux), or a one-line ``ValueError``."""
    siocgifaddr = 0x8915
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            packed = fcntl.ioctl(s.fileno(), siocgifaddr, struct.pack("256s", name.encode()[:15]))
        except OSError as e:
            raise ValueError(f"network interface {name!r} has no IPv4 address here ({e.strerror})") from None
    return socket.inet_ntoa(packed[20:24])


def listen_host() -> str:
    """The address this rank's engine listens on (see the module's docs)."""
    for variable in IFNAME_VARIABLES:
        name = os.environ.get(variable)
        if name:
            return interface_address(name.split(",")[0].strip())
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def token_key() -> bytes | None:
    """The job's key from a token in a file or the environment, or ``None``."""
    path = os.environ.get("UBERSHUFFLE_TOKEN_FILE")
    token = None
    if path:
        try:
            with open(path, "rb") as f:
                token = f.read().strip()
        except OSError as e:
            raise ValueError(f"UBERSHUFFLE_TOKEN_FILE: cannot read {path}: {e.strerror}") from None
    elif os.environ.get("UBERSHUFFLE_TOKEN"):
        token = os.environ["UBERSHUFFLE_TOKEN"].encode()
    if token is None:
        return None
    if not token:
        raise ValueError(
            "the token is empty: give a shared secret in UBERSHUFFLE_TOKEN_FILE or UBERSHUFFLE_TOKEN"
        )
    return hmac.new(b"ubershuffle-plane-v1 token", token, hashlib.sha256).digest()


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
