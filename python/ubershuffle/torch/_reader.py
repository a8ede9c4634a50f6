"""What a DataLoader worker started by spawn gets of a ShuffleGroup."""

from __future__ import annotations

import numpy as np

from ..store import RecordStore


class Reader:
    """What a DataLoader worker process gets of a ShuffleGroup (pickled into it): the record
    store, read-only, mapped from the same files."""

    def __init__(self, store: RecordStore) -> None:
        self._store = store

    def __getitem__(self, i: int) -> np.ndarray:
        return self._store[i]

    def __len__(self) -> int:
        return len(self._store)

    def __contains__(self, i: object) -> bool:
        return i in self._store

    def held(self) -> np.ndarray:
        """The records held, sorted."""
        return self._store.held()
