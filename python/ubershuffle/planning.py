"""Planning, verification and lower bounds: the command line's numbers from Python."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np

from . import _native

ArrayLike = Union[Sequence[int], "np.ndarray"]
Lists = Union[Sequence[ArrayLike], "np.ndarray"]


def _path(plugin: str | os.PathLike | None) -> str | None:
    return None if plugin is None else os.fspath(plugin)


def _candidates(candidates: int | str | None) -> str | None:
    if candidates is None:
        return None
    if isinstance(candidates, bool) or not isinstance(candidates, (int, str)):
        raise TypeError(f"candidates must be an int or 'all', got {type(candidates).__name__}")
    return str(candidates)


def _int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    return int(value)


def _float(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    return float(value)


def _seed(seed: Any) -> int:
    seed = _int("seed", seed)
    if not 0 <= seed < 2**64:
        raise ValueError(f"seed must lie in [0, 2^64), got {seed}")
    return seed


def _lists(name: str, lists: Lists) -> list:
    """Per-worker id lists as contiguous int64 arrays (TypeError for anything else)."""
    if isinstance(lists, (str, bytes)) or not hasattr(lists, "__len__"):
        raise TypeError(f"{name} must be a list of per-worker lists or arrays of point ids")
    out = []
    for worker, ids in enumerate(lists):
        arr = np.asarray(ids)
        if arr.size == 0:
            arr = np.zeros(0, dtype=np.int64)
        if arr.ndim != 1:
            raise ValueError(f"{name} of worker {worker} must be a flat list of point ids")
        if not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"{name} of worker {worker} must hold integer point ids, got {arr.dtype}")
        out.append(np.ascontiguousarray(arr, dtype=np.int64))
    return out


@dataclass(frozen=True)
class PlanResult:
    """A verified plan and its counts, as ``ubershuffle plan --json`` reports them.

    The packets are flat numpy arrays: transmission ``t`` is the XOR of the points
    ``packet_points[packet_offsets[t]:packet_offsets[t + 1]]``, each meant for the worker at
    the same place of ``packet_workers``; :meth:`packets` gives them as lists of pairs.
    """

    scheme: str
    """The scheme asked for."""
    made_by: str
    """The scheme that made the plan (for ``auto``, the portfolio's winner)."""
    workers: int
    points: int
    cache_size: int
    seed: int
    transmissions: int
    """Coded transmissions of the plan."""
    parts: int
    uncoded_transmissions: int
    """Transmissions of uncoded delivery (for a pliable scheme: of the chosen assignment)."""
    fully_random_uncoded_transmissions: int | None
    """Pliable schemes: uncoded transmissions of the fully random assignment."""
    lower_bound: int
    lower_bound_kind: str
    theorem1_transmissions: float | None
    verified: bool
    plan_seconds: float
    verify_seconds: float
    lower_bound_seconds: float
    tried: list
    """What every member of a portfolio did: ``{"scheme", "transmissions" or "skipped"}``."""
    packet_offsets: np.ndarray = field(repr=False)
    packet_points: np.ndarray = field(repr=False)
    packet_workers: np.ndarray = field(repr=False)
    assignment: list = field(repr=False)
    """The assignment delivered, one sorted array per worker (pliable: the chosen one)."""

    def packets(self) -> list:
        """The transmissions as lists of ``(point, worker)`` pairs."""
        o, p, w = self.packet_offsets, self.packet_points, self.packet_workers
        return [
            list(zip(p[o[t] : o[t + 1]].tolist(), w[o[t] : o[t + 1]].tolist())) for t in range(len(o) - 1)
        ]

    def to_dict(self) -> dict:
        """The counts as ``plan --json`` names them (no packets)."""
        keys = [
            "scheme", "made_by", "workers", "points", "cache_size", "seed", "transmissions", "parts",
            "uncoded_transmissions", "lower_bound", "lower_bound_kind", "theorem1_transmissions",
            "verified", "plan_seconds", "verify_seconds", "lower_bound_seconds",
        ]  # fmt: skip
        return {k: getattr(self, k) for k in keys}


def _result(d: dict) -> PlanResult:
    return PlanResult(**d)


def schemes(plugin: str | os.PathLike | None = None) -> list:
    """Every scheme as ``{"name", "description"}`` dicts, as ``ubershuffle schemes --json``.

    With ``plugin`` (the path of a plugin library), the plugin's schemes, each with its path.
    """
    return _native.schemes(_path(plugin))


def plan(
    workers: int,
    points: int,
    alpha: float | None,
    scheme: str = "auto",
    *,
    seed: int = 0,
    time_budget: float | None = None,
    plugin: str | os.PathLike | None = None,
    candidates: int | str | None = None,
) -> PlanResult:
    """Plans one epoch of the seeded random instance and verifies the plan.

    The same as ``ubershuffle plan --workers W --points Q --alpha A --scheme S --seed SEED
    [--time-budget T] --json``: the same instance, plan and counts. ``alpha=None`` gives no
    excess storage (each worker caches exactly its previous batch). ``time_budget`` is in
    seconds (default 10, as the command line) and is counted in work units, so the plan does
    not depend on the machine's load. ``plugin`` loads a scheme plugin library (then ``scheme``
    names one of its schemes; ``"auto"`` means its only one). ``candidates`` (an int or
    ``"all"``) applies to the pliable schemes. Planning releases the GIL.

    Raises ValueError (bad values, with the command line's one-line message) or TypeError.
    """
    return _result(
        _native.plan(
            _int("workers", workers),
            _int("points", points),
            _float("alpha", alpha),
            str(scheme),
            _seed(seed),
            _float("time_budget", time_budget),
            _path(plugin),
            _candidates(candidates),
        )
    )


def plan_instance(
    caches: Lists,
    assignment: Lists,
    scheme: str = "auto",
    *,
    points: int | None = None,
    seed: int = 0,
    time_budget: float | None = None,
    plugin: str | os.PathLike | None = None,
    candidates: int | str | None = None,
) -> PlanResult:
    """Plans a given instance: ``caches[w]`` the points worker ``w`` holds, ``assignment[w]``
    the points it must hold after the shuffle (lists or numpy integer arrays, one per worker).

    ``points`` defaults to the size of the assignment (every point is assigned exactly once).
    The same as ``ubershuffle plan --instance FILE`` on that instance.
    """
    return _result(
        _native.plan_instance(
            _lists("cache", caches),
            _lists("assignment", assignment),
            None if points is None else _int("points", points),
            str(scheme),
            _seed(seed),
            _float("time_budget", time_budget),
            _path(plugin),
            _candidates(candidates),
        )
    )


@dataclass(frozen=True)
class Verification:
    """What peeling found: ``valid`` when every worker decodes its whole batch; ``missing``
    maps each worker that cannot to the points it lacks."""

    valid: bool
    missing: dict

    def __bool__(self) -> bool:
        return self.valid


def _plan_arrays(plan: Any) -> tuple:
    if isinstance(plan, PlanResult):
        return plan.packet_offsets, plan.packet_points, plan.packet_workers
    if isinstance(plan, tuple) and len(plan) == 3 and all(isinstance(a, np.ndarray) for a in plan):
        return plan
    if isinstance(plan, (str, bytes)) or not hasattr(plan, "__iter__"):
        raise TypeError(
            "plan must be a PlanResult, (offsets, points, workers) arrays, or a list of transmissions"
        )
    offsets, pts, wks = [0], [], []
    for t, transmission in enumerate(plan):
        for part in transmission:
            if len(part) != 2:
                raise ValueError(f"transmission {t} has a part that is not a (point, worker) pair")
            pts.append(int(part[0]))
            wks.append(int(part[1]))
        offsets.append(len(pts))
    return tuple(np.asarray(x, dtype=np.int64) for x in (offsets, pts, wks))


def verify(caches: Lists, assignment: Lists, plan: Any, *, points: int | None = None) -> Verification:
    """Decodes ``plan`` symbolically at every worker (peeling), as the command line's checks.

    ``plan`` is a :class:`PlanResult`, a tuple of flat arrays ``(offsets, points, workers)``,
    or a list of transmissions, each a list of ``(point, worker)`` pairs. A malformed plan
    (an empty transmission, an id out of range) raises ValueError.
    """
    offsets, pts, wks = (np.ascontiguousarray(a, dtype=np.int64) for a in _plan_arrays(plan))
    valid, missing = _native.verify(
        _lists("cache", caches),
        _lists("assignment", assignment),
        None if points is None else _int("points", points),
        offsets,
        pts,
        wks,
    )
    return Verification(valid, {w: list(m) for w, m in missing})


@dataclass(frozen=True)
class LowerBound:
    """The largest lower bound that applies: no scheme sends fewer than ``value``."""

    value: int
    kind: str
    uncoded_transmissions: int


def lower_bound(caches: Lists, assignment: Lists, *, points: int | None = None) -> LowerBound:
    """The largest lower bound on the transmissions of any scheme for this instance, and which
    bound gave it (``max-need``, ``acyclic-subgraph``, ...), as ``plan --json`` prints it."""
    value, kind, uncoded = _native.lower_bound(
        _lists("cache", caches),
        _lists("assignment", assignment),
        None if points is None else _int("points", points),
    )
    return LowerBound(value, kind, uncoded)


def plan_epochs(
    workers: int,
    points: int,
    *,
    policy: str,
    fraction: float | None = None,
    alpha: float | None,
    scheme: str,
    epochs: int,
    seed: int = 0,
    time_budget: float | None = None,
    plugin: str | os.PathLike | None = None,
) -> list:
    """Plans ``epochs`` consecutive epochs of partitioned data under an exchange policy
    (``local``, ``partial-local`` with ``fraction``, ``global``), each verified.

    Returns the ``per_epoch`` records of ``ubershuffle plan --policy P [--fraction Q] --scheme S
    -n W -q Q [--alpha A] --epochs E --seed SEED --json``: dicts with ``epoch`` (from 1),
    ``points_exchanged``, ``points_moved``, ``transmissions``, ``uncoded_transmissions`` and
    ``verified``, equal for the same arguments.
    """
    return _native.plan_epochs(
        _int("workers", workers),
        _int("points", points),
        str(policy),
        _float("fraction", fraction),
        _float("alpha", alpha),
        str(scheme),
        _int("epochs", epochs),
        _seed(seed),
        _float("time_budget", time_budget),
        _path(plugin),
    )
