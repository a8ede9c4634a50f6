"""The sampler's state as bytes (plain values and bytes as JSON): what the first training rank
of store mode hands the store at a catch-up, and what a job saves."""

from __future__ import annotations

import base64
import json
from typing import Any


def state_bytes(state: Any) -> bytes:
    """A sampler state (plain values and bytes) as JSON bytes."""

    def plain(v: Any) -> Any:
        if isinstance(v, bytes):
            return {"__bytes__": base64.b64encode(v).decode()}
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        return v

    return json.dumps(plain(state)).encode()


def state_from(data: bytes) -> Any:
    """The sampler state of :func:`state_bytes`."""

    def back(v: Any) -> Any:
        if isinstance(v, dict):
            if set(v) == {"__bytes__"}:
                return base64.b64decode(v["__bytes__"])
            return {k: back(x) for k, x in v.items()}
        if isinstance(v, list):
            return [back(x) for x in v]
        return v

    return back(json.loads(data.decode()))
