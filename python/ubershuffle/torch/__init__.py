"""``ubershuffle.torch``: shuffling inside the training job. The data plane's engine (Rust, on
sealed connections and threads of its own, off the GIL) moves the records between the job's
ranks, rank to rank (``mode="peer"``, the partial-local seed's system) or by coded delivery
from a store rank (``mode="store"``: each packet only to the ranks that decode it, relayed
among them), for records of any size, each epoch's delivery overlapped with the epoch before.

This subpackage imports torch; ``import ubershuffle`` does not.

A torchrun script (4 ranks, peer mode)::

    from ubershuffle.torch import ShuffleGroup, init_process_group

    init_process_group("gloo")           # torch.distributed's, safe across torchrun's restarts
    sg = ShuffleGroup("data/jpegs", mode="peer", policy="partial-local", fraction=0.3, seed=0)
    for epoch in range(epochs):
        sg.set_epoch(epoch)              # this epoch's records are local; the next one's move now
        for i in sg.sampler:             # this rank's indices, exactly once per epoch
            train_on(decode(sg[i]))      # sg[i]: the record's bytes, a read-only uint8 view
    sg.close()
"""

from __future__ import annotations

from .._native import PeerClosed, PeerFailed, ShuffleClosed, ShuffleError, ShuffleTimeout
from ._group import ShuffleGroup
from ._init import init_process_group

__all__ = [
    "PeerClosed",
    "PeerFailed",
    "ShuffleClosed",
    "ShuffleError",
    "ShuffleGroup",
    "ShuffleTimeout",
    "init_process_group",
]
