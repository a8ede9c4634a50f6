"""What the ranks of a ShuffleGroup say to each other besides records: a training rank's
requests to the store and the store's answers (store mode), the sampler's state as bytes, and a
data set's fingerprint."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import numpy as np

STEP, FULFIL, STOP = 1, 2, 3
"""A training rank's requests: the chain's next epoch, catching up to an epoch, the end."""
CODED, WHOLE = 0, 1
"""The store's answer to a step: coded packets, or records sent whole."""
CONTROL_LEN = 5
"""int64 values in a request: the request, the epoch, the chain's digest, two of its own."""


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


def offsets_digest(offsets: np.ndarray) -> int:
    """A 63-bit fingerprint of a data set's offsets."""
    digest = hashlib.blake2b(np.ascontiguousarray(offsets, dtype="<i8").tobytes(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)
