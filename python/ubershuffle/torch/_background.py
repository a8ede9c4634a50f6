"""A delivery on a background thread, and what a DataLoader worker gets of a ShuffleGroup."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ..store import RecordStore
from ._watch import ShuffleClosed, log


class Background:
    """The next epoch's delivery, on a daemon thread; its error is raised where it is joined."""

    def __init__(self, epoch: int, work: Any) -> None:
        self.epoch = epoch
        self.error: BaseException | None = None
        self.figures: dict = {}
        self.thread = threading.Thread(
            target=self._run, args=(work,), name=f"ubershuffle-epoch-{epoch}", daemon=True
        )
        self.thread.start()

    def _run(self, work: Any) -> None:
        try:
            work(self)
        except BaseException as e:  # noqa: BLE001 (raised again by join)
            self.error = e
            if not isinstance(e, ShuffleClosed):
                # Said now, not only at the next set_epoch: a dead peer is named in the job's
                # log within the liveness bound however long the epoch trains.
                log.error(
                    "ubershuffle: the delivery of epoch %d failed: %s: %s", self.epoch, type(e).__name__, e
                )

    def join(self) -> dict:
        """Waits for the thread, raises its error, returns its figures."""
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.figures


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
