"""Where a rank's engine listens and the job's key from a token: what a plane's rendezvous
needs, without torch (:mod:`ubershuffle.torch`'s through the job's key-value store, and
:class:`ubershuffle.Exchange`'s through a store outside the job).

Which address a rank listens on: the IPv4 address of the interface named by
``UBERSHUFFLE_SOCKET_IFNAME`` (or ``GLOO_SOCKET_IFNAME``, as gloo reads it) when set; otherwise,
as gloo does, the address this host's name resolves to.

The key of a token (``UBERSHUFFLE_TOKEN_FILE``, a file holding a secret, or
``UBERSHUFFLE_TOKEN``): the same derivation in Python and in Rust (``ubershuffle serve``), so a
store outside the job and its training ranks agree.
"""

from __future__ import annotations

import fcntl
import os
import socket
import struct

from . import _native

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


def token_key(token: str | bytes | None = None) -> bytes | None:
    """The job's key from ``token``, else from a token in a file or the environment, or
    ``None``."""
    path = os.environ.get("UBERSHUFFLE_TOKEN_FILE")
    if isinstance(token, str):
        token = token.encode()
    if token is not None:
        pass
    elif path:
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
    return bytes(_native.plane_token_key(token))
