"""Type stubs of the Rust extension ``ubershuffle._native`` (the public API is the package)."""

from typing import Any

import numpy as np
import numpy.typing as npt

def schemes(plugin: str | None = None) -> list[dict[str, str]]: ...
def plan(
    workers: int,
    points: int,
    alpha: float | None,
    scheme: str,
    seed: int,
    time_budget: float | None,
    plugin: str | None,
    candidates: str | None,
) -> dict[str, Any]: ...
def plan_instance(
    caches: list[npt.NDArray[np.int64]],
    assignment: list[npt.NDArray[np.int64]],
    points: int | None,
    scheme: str,
    seed: int,
    time_budget: float | None,
    plugin: str | None,
    candidates: str | None,
) -> dict[str, Any]: ...
def verify(
    caches: list[npt.NDArray[np.int64]],
    assignment: list[npt.NDArray[np.int64]],
    points: int | None,
    offsets: npt.NDArray[np.int64],
    packet_points: npt.NDArray[np.int64],
    packet_workers: npt.NDArray[np.int64],
) -> tuple[bool, list[tuple[int, list[int]]]]: ...
def lower_bound(
    caches: list[npt.NDArray[np.int64]],
    assignment: list[npt.NDArray[np.int64]],
    points: int | None,
) -> tuple[int, str, int]: ...
def plan_epochs(
    workers: int,
    points: int,
    policy: str,
    fraction: float | None,
    alpha: float | None,
    scheme: str,
    epochs: int,
    seed: int,
    time_budget: float | None,
    plugin: str | None,
) -> list[dict[str, Any]]: ...
def _panic_for_test() -> None: ...

class SamplerCore:
    def __init__(
        self,
        points: int,
        world: int,
        seed: int,
        policy: str,
        fraction: float | None,
        alpha: float | None,
        scheme: str,
        candidates: str | None,
        time_budget: float | None,
        plugin: str | None,
    ) -> None: ...
    @property
    def epoch(self) -> int: ...
    @property
    def world(self) -> int: ...
    @property
    def segment_start(self) -> int: ...
    @property
    def is_remainder(self) -> bool: ...
    def set_epoch(self, epoch: int) -> None: ...
    def num_samples(self, drop_last: bool) -> int: ...
    def order(self, rank: int, shuffle: bool, drop_last: bool) -> npt.NDArray[np.int64]: ...
    def iter(self, rank: int, shuffle: bool, drop_last: bool, start: int) -> EpochIter: ...
    def batch(self, rank: int) -> npt.NDArray[np.int64]: ...
    def needs(self, rank: int) -> npt.NDArray[np.int64]: ...
    def plan_summary(self) -> dict[str, Any]: ...
    def state(self, position: int, shuffle: bool, drop_last: bool) -> dict[str, Any]: ...
    def load_state(self, state: dict[str, Any], world: int) -> int: ...

class EpochIter:
    def __new__(cls, order: npt.NDArray[np.int64], position: int = 0) -> EpochIter: ...
    def __iter__(self) -> EpochIter: ...
    def __next__(self) -> int: ...
    def __len__(self) -> int: ...
    @property
    def position(self) -> int: ...
    def order(self) -> npt.NDArray[np.int64]: ...
    def _reset(self, order: npt.NDArray[np.int64], position: int) -> None: ...

class ExchangeCore:
    def __init__(self, address: str, token: str, timeout: float, join_timeout: float) -> None: ...
    def next_event(
        self,
        store: npt.NDArray[np.uint8] | None,
        present: npt.NDArray[np.bool_] | None,
        timeout: float | None = None,
    ) -> dict[str, Any]: ...
    def close(self) -> None: ...

class HostCore:
    def __init__(
        self,
        records: npt.NDArray[np.uint8],
        workers: int,
        alpha: float,
        policy: str,
        fraction: float | None,
        scheme: str,
        seed: int,
        epochs: int,
        listen: str,
        token: str,
        timeout: float,
        join_timeout: float,
        checkpoint: str | None,
        resume: bool,
    ) -> None: ...
    @property
    def address(self) -> str: ...
    def running(self) -> bool: ...
    def epochs(self) -> list[dict[str, Any]]: ...
    def join(self, timeout: float | None = None) -> tuple[bool, str, list[int]] | None: ...
