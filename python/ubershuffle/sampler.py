"""``CodedShuffleSampler``: a drop-in for ``torch.utils.data.DistributedSampler`` whose epochs
follow the project's epoch chain. No torch needed: it duck-types the sampler protocol."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from . import _native


def _world(num_replicas: int | None, rank: int | None) -> tuple:
    """``num_replicas`` and ``rank``, from torch.distributed when torch is already imported and
    its process group initialised (never imports torch itself)."""
    if num_replicas is None or rank is None:
        dist = sys.modules.get("torch.distributed")
        if dist is not None and dist.is_available() and dist.is_initialized():
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        else:
            raise ValueError(
                "num_replicas and rank are needed: torch.distributed is not initialised "
                "(or torch is not imported); pass num_replicas=N, rank=R"
            )
    for name, value in (("num_replicas", num_replicas), ("rank", rank)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if num_replicas < 1:
        raise ValueError(f"num_replicas must be at least 1, got {num_replicas}")
    if not 0 <= rank < num_replicas:
        raise ValueError(f"invalid rank {rank}: rank must lie in [0, {num_replicas - 1}]")
    return int(num_replicas), int(rank)


class _EpochIterator(_native.EpochIter):
    """The iterator ``iter(sampler)`` returns: yields this rank's indices of the epoch and
    carries the sampler's state (``state_dict``/``load_state_dict``), so torchdata's
    StatefulDataLoader restores it instead of fast-forwarding it."""

    def __new__(cls, order: np.ndarray, position: int, sampler: CodedShuffleSampler) -> _EpochIterator:
        self = super().__new__(cls, order, position)
        self._sampler = sampler
        return self

    def state_dict(self) -> dict:
        """The sampler's state at this iterator's position."""
        return self._sampler._state_at(self.position)

    def load_state_dict(self, state: dict) -> None:
        """Loads ``state`` into the sampler and continues this iterator where it says."""
        sampler = self._sampler
        sampler.load_state_dict(state)
        self._reset(sampler.indices(), sampler._pending)
        sampler._pending = 0
        sampler._iter = self


class CodedShuffleSampler:
    """Serves each rank its share of a dataset, epoch by epoch, along the epoch chain.

    A drop-in for ``torch.utils.data.DistributedSampler`` (same arguments, ``set_epoch``,
    ``__iter__``, ``__len__``), needing no torch. Each epoch's assignment of indices to ranks is
    the project's epoch chain (``ubershuffle_core``'s ``EpochChain``, which ``ubershuffle plan
    --policy ... --epochs`` and ``ubershuffle run`` step too): epoch 0 is a seeded balanced
    partition (``first_epoch="random"``, the default) or the indices in order cut into
    contiguous blocks (``first_epoch="blocks"``: see below); each later epoch the ``policy``
    (``global``: a uniformly random reshuffle; ``partial-local``: each rank exchanges
    ``fraction`` of its indices; ``local``: no exchange) moves the assignment on, or a pliable
    ``scheme`` (``pliable-greedy``, with ``candidates``) chooses it. Caches carry over between
    epochs (each rank caches its batch, and with ``extra_cache`` or ``alpha`` more), so
    :meth:`needs` says what a rank must receive, and :meth:`plan_summary` how many coded
    transmissions deliver the epoch: the counts of the command line's epoch ``e`` for the same
    seed, ranks and settings.

    Arguments: ``dataset`` is anything with ``len()`` (or an int, the number of samples);
    ``num_replicas``, ``rank``, ``shuffle``, ``seed`` and ``drop_last`` are DistributedSampler's;
    ``policy`` and ``fraction`` choose the exchange; ``extra_cache`` is the share of the indices
    outside a rank's batch that it also caches (in ``[0, 1]``: each rank caches ``b +
    floor(extra_cache * (N - b))`` indices, ``b = ceil(N / R)``), which holds on every number of
    ranks; ``alpha`` is the papers' storage ratio instead, the cached share of all ``N`` indices,
    the batch included (``floor(alpha * N)``, so at least ``1/R``: a value below is refused
    saying what to write); neither caches the batch only. ``scheme`` is the coded delivery
    :meth:`plan_summary` plans (a pliable scheme also chooses the assignment, among
    ``candidates`` per index), ``time_budget`` its search budget in seconds and ``plugin`` a
    scheme plugin library.

    ``first_epoch="blocks"`` starts the chain from contiguous blocks: in epoch 0 rank ``r``
    serves the ``r``-th run of consecutive indices (the first ``N mod R`` runs one index
    longer), in an order shuffled within the run; from epoch 1 on the ``policy`` moves the
    assignment on as from any start (``global`` deals every index at random again). It is for
    data sets kept in shards (WebDataset tars, MDS shards, LitData chunks, Parquet files): each
    rank then reads whole shards in epoch 0 (in object storage, a tar, MDS shard or LitData
    chunk by one ranged GET, a Parquet file by one a row group), instead of scattered records
    of every shard. What it costs is epoch 0's mixing: each rank trains epoch 0 on
    neighbouring records of its own shards only (a step's gradient still averages every rank's
    part), so a data set whose storage order is sorted (by label, by source) gives ranks
    skewed batches in epoch 0; later epochs mix as the policy mixes from any start: ``global``
    at once, ``partial-local`` a ``fraction`` of each batch an epoch (a rank's batch holds
    mostly records of its own block for the first epochs, a share that falls towards ``1/R``),
    ``local`` never (a rank keeps its block). A world-size change
    starts the new ranks' chain at random (their records are held by the ranks already).

    Within a rank the order is shuffled by the project's ChaCha8 stream of ``(seed, epoch,
    rank)``; ``shuffle=False`` keeps the assignment and serves it in increasing order.

    Lengths and padding: ``len(sampler)`` is DistributedSampler's: ``ceil(N / R)`` samples per
    rank, or ``floor(N / R)`` with ``drop_last=True``. Batches differ in size by at most one; a
    rank with the smaller batch pads by repeating the first index of its own order (a sample
    it already holds, so padding moves no data), and with ``drop_last=True`` a rank with the
    larger batch drops the last index of its order. Before padding, every index is served by
    exactly one rank per epoch.

    ``num_replicas`` and ``rank`` default to torch.distributed's when torch is already imported
    and its process group initialised (torch is never imported here); otherwise pass them.

    Resumption: :meth:`state_dict` carries the epoch, the position in it and what the chain
    needs, so :meth:`load_state_dict` continues exactly (torchdata's StatefulDataLoader calls
    both). Loaded with a different ``num_replicas``, the samples of the interrupted epoch that
    no rank has served yet are dealt among the new ranks and served exactly once (padding
    repeats a rank's own first index; that epoch is never cut by ``drop_last``); the next epoch
    starts a new chain over the new ranks, which costs one epoch without coding gain (nothing
    of the old caches is counted as cached). Any one rank's state suffices: data-parallel ranks
    advance in step.
    """

    def __init__(
        self,
        dataset: Any,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
        *,
        policy: str = "global",
        fraction: float | None = None,
        alpha: float | None = None,
        scheme: str = "auto",
        candidates: int | str | None = None,
        time_budget: float | None = None,
        plugin: str | os.PathLike | None = None,
        extra_cache: float | None = None,
        first_epoch: str = "random",
    ) -> None:
        from .planning import _candidates, _float, _path, _seed

        if not isinstance(first_epoch, str):
            raise ValueError(f'first_epoch must be "random" or "blocks", got {first_epoch!r}')

        size = (
            dataset
            if isinstance(dataset, (int, np.integer)) and not isinstance(dataset, bool)
            else len(dataset)
        )
        self.num_replicas, self.rank = _world(num_replicas, rank)
        self.dataset = dataset
        self.shuffle = bool(shuffle)
        self.seed = _seed(seed)
        self.drop_last = bool(drop_last)
        self._args = (
            int(size),
            self.num_replicas,
            self.seed,
            str(policy),
            _float("fraction", fraction),
            _float("alpha", alpha),
            str(scheme),
            _candidates(candidates),
            _float("time_budget", time_budget),
            _path(plugin),
            _float("extra_cache", extra_cache),
            first_epoch,
        )
        self._core = _native.SamplerCore(*self._args)
        self._pending = 0
        self._iter: _EpochIterator | None = None

    def __getstate__(self) -> dict:
        """Pickling and ``copy.deepcopy`` keep the arguments and :meth:`state_dict`."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("_core", "_iter")}
        state["_sampler_state"] = self.state_dict()
        return state

    def __setstate__(self, state: dict) -> None:
        sampler_state = state.pop("_sampler_state")
        self.__dict__.update(state)
        self._core = _native.SamplerCore(*self._args)
        self._iter = None
        self.load_state_dict(sampler_state)

    @property
    def epoch(self) -> int:
        """The current epoch (as ``DistributedSampler.epoch``)."""
        return self._core.epoch

    @property
    def num_samples(self) -> int:
        """Samples this rank serves this epoch (``len(sampler)``)."""
        return self._core.num_samples(self.drop_last)

    @property
    def total_size(self) -> int:
        """Samples all ranks serve this epoch, padding included."""
        return self.num_samples * self.num_replicas

    def set_epoch(self, epoch: int) -> None:
        """Moves to ``epoch``: one step of the chain for the next epoch (fast: no planning,
        except that a pliable scheme plans to choose the assignment); a jump replays the chain
        from the start of the current world size's segment (use :meth:`load_state_dict` to
        jump far without replaying). Calling it with the current epoch keeps a resumed
        position."""
        if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)):
            raise TypeError(f"epoch must be an int, got {type(epoch).__name__}")
        if int(epoch) != self._core.epoch:
            self._core.set_epoch(int(epoch))
            self._pending = 0
            self._iter = None

    def __iter__(self) -> Iterator[int]:
        start, self._pending = self._pending, 0
        self._iter = _EpochIterator(self.indices(), start, self)
        return self._iter

    def __len__(self) -> int:
        return self.num_samples

    def indices(self) -> np.ndarray:
        """This rank's indices this epoch in serving order (int64), padding included."""
        return self._core.order(self.rank, self.shuffle, self.drop_last)

    def batch(self) -> np.ndarray:
        """This rank's batch this epoch: the indices it serves, sorted, without padding."""
        return self._core.batch(self.rank)

    def needs(self) -> np.ndarray:
        """What this rank must receive this epoch: its batch minus what it caches (sorted)."""
        return self._core.needs(self.rank)

    def plan_summary(self) -> dict:
        """The epoch's coded delivery: ``transmissions`` of the scheme against
        ``uncoded_transmissions`` (and ``lower_bound``, ``made_by``, ``points_moved``, ``kind``:
        ``initial`` for a segment's first epoch, ``chain``, or ``remainder`` after a world-size
        change). Planned when asked, without the GIL; never by :meth:`set_epoch`."""
        return self._core.plan_summary()

    def _state_at(self, position: int) -> dict:
        return self._core.state(int(position), self.shuffle, self.drop_last)

    def state_dict(self) -> dict:
        """The state: epoch, position in it (samples this rank has served) and what the chain
        needs to continue, as plain Python values and bytes (``torch.save`` and pickle keep
        it)."""
        position = self._iter.position if self._iter is not None else self._pending
        return self._state_at(position)

    def load_state_dict(self, state: dict) -> None:
        """Continues from ``state``: the next ``iter(self)`` serves exactly what remained. With
        another ``num_replicas`` than the state's, the interrupted epoch's unserved samples are
        dealt among this sampler's ranks (see the class docs). The state's seed, ``shuffle``,
        ``drop_last``, policy, cache setting (``extra_cache`` or ``alpha``), scheme and
        ``first_epoch`` replace the sampler's own."""
        if not isinstance(state, dict):
            raise TypeError(f"state must be a dict from state_dict(), got {type(state).__name__}")
        self._pending = self._core.load_state(state, self.num_replicas)
        self.seed = int(state["seed"])
        self.shuffle = bool(state["shuffle"])
        self.drop_last = bool(state["drop_last"])
        self._iter = None

    def __repr__(self) -> str:
        return (
            f"CodedShuffleSampler(num_samples={self.num_samples}, num_replicas={self.num_replicas}, "
            f"rank={self.rank}, epoch={self.epoch}, shuffle={self.shuffle}, drop_last={self.drop_last})"
        )
