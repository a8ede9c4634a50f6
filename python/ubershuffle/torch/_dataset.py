"""``ShuffleGroup.dataset()``: the group's records as a ``torch.utils.data.Dataset``."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from torch.utils.data import Dataset


class RecordDataset(Dataset):
    """Item ``i`` is ``transform(records[i])`` (the record's bytes, a read-only uint8 view,
    without a transform). ``records`` is a :class:`ShuffleGroup` in the training process; in a
    DataLoader worker it is the group itself (fork) or, pickled (spawn), a read-only reader of
    the rank's record store, mapping the same files."""

    def __init__(self, records: Any, transform: Callable[[np.ndarray], Any] | None = None) -> None:
        self.records = records
        self.transform = transform

    def __len__(self) -> int:
        """The number of records of the data set (a rank holds only its share: index it with
        the group's sampler)."""
        return len(self.records)

    def __getitem__(self, i: int) -> Any:
        data = self.records[i]
        return data if self.transform is None else self.transform(data)

    def __repr__(self) -> str:
        return f"RecordDataset({len(self)} records, transform={self.transform!r})"
