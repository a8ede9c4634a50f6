"""Coded data shuffling for distributed learning, from Python.

``ubershuffle`` plans and verifies the coded shuffles of the Rust project ``ubershuffle-rs``
(the same instances, seeds and schemes as the ``ubershuffle`` command line, so the counts are
the same), and offers :class:`CodedShuffleSampler`, a drop-in for
``torch.utils.data.DistributedSampler`` whose epochs follow the project's epoch chain, and
:class:`Exchange`, a training rank of a job whose records a store outside the job delivers by
coded multicast into the rank's :class:`RecordStore` (records of any size, shared by DataLoader
worker processes).

Planning::

    >>> import ubershuffle
    >>> r = ubershuffle.plan(8, 4000, 0.4, "coded", seed=1)
    >>> r.verified, r.transmissions < r.uncoded_transmissions
    (True, True)

Importing this package never imports torch.
"""

from __future__ import annotations

from ._native import _panic_for_test  # noqa: F401  (used by the tests)
from .exchange import (
    EpochBatch,
    EpochFigures,
    Exchange,
    ExchangeClosed,
    ExchangeFinished,
    Host,
)
from .planning import (
    LowerBound,
    PlanResult,
    Verification,
    lower_bound,
    plan,
    plan_epochs,
    plan_instance,
    schemes,
    verify,
)
from .sampler import CodedShuffleSampler
from .store import RecordStore

__all__ = [
    "CodedShuffleSampler",
    "EpochBatch",
    "EpochFigures",
    "Exchange",
    "ExchangeClosed",
    "ExchangeFinished",
    "Host",
    "RecordStore",
    "LowerBound",
    "PlanResult",
    "Verification",
    "lower_bound",
    "plan",
    "plan_epochs",
    "plan_instance",
    "schemes",
    "verify",
]
__version__ = "0.1.0"
