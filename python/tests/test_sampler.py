"""CodedShuffleSampler: DistributedSampler's lengths, exactly-once epochs along the chain,
determinism, and mid-epoch and elastic resumption."""

from __future__ import annotations

import math
import pickle
import re
from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ubershuffle as us
from ubershuffle import CodedShuffleSampler

POLICIES = [("global", None), ("local", None), ("partial-local", 0.3)]


def samplers(q, world, **kw):
    return [CodedShuffleSampler(q, num_replicas=world, rank=r, **kw) for r in range(world)]


def expected_len(q, world, drop_last):
    if drop_last and q % world:
        return math.ceil((q - world) / world)
    return math.ceil(q / world)


def check_epoch(ss, q, drop_last):
    """Every rank's indices: DistributedSampler's length; batches partition 0..q and differ by
    at most one index; padding repeats a rank's own first index; drop_last drops the tail of a
    larger batch."""
    world = len(ss)
    seen = Counter()
    sizes = {len(s.batch()) for s in ss}
    assert max(sizes) - min(sizes) <= 1, f"batch sizes {sorted(sizes)}"
    for s in ss:
        order = s.indices()
        batch = s.batch()
        assert len(s) == len(order) == expected_len(q, world, drop_last)
        assert list(order) == list(s.__iter__())
        seen.update(batch.tolist())
        real = min(len(batch), len(order))
        assert sorted(order[:real].tolist()) == sorted(set(order[:real].tolist()))
        assert set(order[:real].tolist()) <= set(batch.tolist())
        if drop_last:
            assert real == len(order)
        else:
            assert sorted(order[:real].tolist()) == batch.tolist()
            assert all(x == order[0] for x in order[real:]), "padding repeats the first index"
        needs, own = set(s.needs().tolist()), set(batch.tolist())
        if s._core.segment_start == s.epoch:
            assert own <= needs  # a segment's first epoch: the rank loads its starting cache
        else:
            assert needs <= own
    assert sorted(seen) == list(range(q)) and all(c == 1 for c in seen.values())


@given(
    world=st.sampled_from([1, 3, 4, 8]),
    extra=st.integers(0, 120),
    policy=st.sampled_from(POLICIES),
    epochs=st.integers(1, 4),
    drop_last=st.booleans(),
    seed=st.integers(0, 2**64 - 1),
    alpha=st.sampled_from([None, 0.5]),
)
def test_every_epoch_covers_every_index_once(world, extra, policy, epochs, drop_last, seed, alpha):
    q = world + extra
    if alpha is not None and alpha * q < math.ceil(q / world):
        alpha = None
    ss = samplers(q, world, policy=policy[0], fraction=policy[1], drop_last=drop_last, seed=seed, alpha=alpha)
    for e in range(epochs):
        for s in ss:
            s.set_epoch(e)
        check_epoch(ss, q, drop_last)


def test_local_keeps_partitions_and_global_moves_them():
    local = CodedShuffleSampler(100, num_replicas=4, rank=1, policy="local")
    first = local.batch().tolist()
    local.set_epoch(3)
    assert local.batch().tolist() == first and len(local.needs()) == 0
    glob = CodedShuffleSampler(100, num_replicas=4, rank=1)
    assert glob.batch().tolist() == first, "epoch 0 is the same seeded partition"
    glob.set_epoch(1)
    assert glob.batch().tolist() != first
    # Caching its batch only, the rank needs exactly what its new batch has beyond the old.
    assert glob.needs().tolist() == np.setdiff1d(glob.batch(), first).tolist()


def test_first_epoch_blocks_starts_in_contiguous_runs_and_mixes_from_epoch_one():
    q, world = 103, 4
    blocks = samplers(q, world, first_epoch="blocks", seed=3, extra_cache=0.2)
    runs = [list(range(0, 26)), list(range(26, 52)), list(range(52, 78)), list(range(78, 103))]
    assert [s.batch().tolist() for s in blocks] == runs
    assert all(s.indices()[: len(r)].tolist() != r for s, r in zip(blocks, runs)), "shuffled within"
    check_epoch(blocks, q, False)
    default = samplers(q, world, seed=3, extra_cache=0.2)
    assert [s.batch().tolist() for s in default] != runs, "the default start stays random"
    assert default[0].batch().tolist() == samplers(q, world, seed=3, first_epoch="random")[0].batch().tolist()
    # From epoch 1 on, global deals every index at random: each rank gets indices of every run.
    for s in blocks:
        s.set_epoch(1)
    check_epoch(blocks, q, False)
    for s in blocks:
        assert all(np.isin(s.batch(), r).any() for r in runs)
    # The setting travels with the state: a replay and a resume start from the blocks again.
    state = blocks[2].state_dict()
    assert state["first_epoch"] == "blocks"
    other = CodedShuffleSampler(q, num_replicas=world, rank=2, seed=3, extra_cache=0.2)
    other.load_state_dict(state)
    assert other.batch().tolist() == blocks[2].batch().tolist()
    other.set_epoch(0)
    assert other.batch().tolist() == runs[2]
    # A state saved before the setting existed (no key) starts at random, as it did.
    old = dict(samplers(q, world, seed=3)[1].state_dict())
    del old["first_epoch"]
    again = CodedShuffleSampler(q, num_replicas=world, rank=1, first_epoch="blocks")
    again.load_state_dict(old)
    assert again.batch().tolist() == default[1].batch().tolist()
    for bad in ("contiguous", "", None, 2):
        with pytest.raises(ValueError) as e:
            CodedShuffleSampler(q, num_replicas=world, rank=0, first_epoch=bad)
        said = repr(bad).replace("'", '"')
        assert str(e.value) == f'first_epoch must be "random" or "blocks", got {said}', str(e.value)


def test_shuffle_false_serves_the_assignment_in_order():
    a = CodedShuffleSampler(50, num_replicas=3, rank=2, shuffle=False)
    b = CodedShuffleSampler(50, num_replicas=3, rank=2)
    for e in range(3):
        a.set_epoch(e)
        b.set_epoch(e)
        assert a.batch().tolist() == b.batch().tolist()
        assert a.indices()[: len(a.batch())].tolist() == a.batch().tolist()


def test_same_seed_same_epochs_and_jumps_equal_steps():
    a = CodedShuffleSampler(
        300, num_replicas=4, rank=0, seed=5, policy="partial-local", fraction=0.5, alpha=0.4
    )
    b = CodedShuffleSampler(
        300, num_replicas=4, rank=0, seed=5, policy="partial-local", fraction=0.5, alpha=0.4
    )
    orders = []
    for e in range(6):
        a.set_epoch(e)
        orders.append((a.indices().tolist(), a.needs().tolist()))
    b.set_epoch(5)
    assert (b.indices().tolist(), b.needs().tolist()) == orders[5]
    b.set_epoch(2)
    assert (b.indices().tolist(), b.needs().tolist()) == orders[2]
    c = CodedShuffleSampler(300, num_replicas=4, rank=0, seed=6)
    c.set_epoch(1)
    assert c.indices().tolist() != orders[1][0]


def test_excess_storage_caches_more_and_needs_less():
    plain = CodedShuffleSampler(2000, num_replicas=4, rank=0, seed=1)
    cached = CodedShuffleSampler(2000, num_replicas=4, rank=0, seed=1, alpha=0.6)
    for s in (plain, cached):
        for e in range(1, 4):
            s.set_epoch(e)
    assert len(cached.needs()) < len(plain.needs())


def test_extra_cache_holds_on_every_world_size_and_a_short_alpha_says_what_to_write():
    """extra_cache: the batch plus that share of the rest, on any number of ranks; alpha=0.4
    (enough on 4 ranks) fails on 2 naming extra_cache; alpha=0.4 on 4 is extra_cache=0.2."""
    q = 1000
    for world in range(1, 9):
        for extra in (0.0, 0.2, 1.0):
            s = CodedShuffleSampler(q, num_replicas=world, rank=0, extra_cache=extra)
            batch = -(-q // world)
            start = s.needs()
            assert len(start) == batch + int(extra * (q - batch))  # epoch 0 loads the cache
            check_carried_over(s, start)
    with pytest.raises(ValueError) as info:
        CodedShuffleSampler(q, num_replicas=2, rank=0, alpha=0.4)
    message = str(info.value)
    assert message.startswith("alpha=0.4 cannot hold on 2 ranks") and "at least 0.5000" in message
    assert "write extra_cache=E instead" in message and "\n" not in message
    a = CodedShuffleSampler(q, num_replicas=4, rank=1, seed=3, alpha=0.4)
    b = CodedShuffleSampler(q, num_replicas=4, rank=1, seed=3, extra_cache=0.2)
    for e in range(4):
        a.set_epoch(e)
        b.set_epoch(e)
        assert (a.indices().tolist(), a.needs().tolist()) == (b.indices().tolist(), b.needs().tolist())
    for kw, text in [
        (dict(alpha=0.5, extra_cache=0.1), "not both"),
        (dict(extra_cache=1.5), "extra_cache must lie in [0, 1]"),
        (dict(extra_cache=-0.1), "extra_cache must lie in [0, 1]"),
    ]:
        with pytest.raises(ValueError, match=re.escape(text)):
            CodedShuffleSampler(q, num_replicas=2, rank=0, **kw)


def test_extra_cache_survives_an_elastic_resume_that_alpha_cannot():
    """Saved on 4 ranks, loaded on 3 and then 2: the remainder epoch, then new chains that keep
    caching beyond the batch (with alpha=0.3 from 4 ranks, the sampler on 3 cannot even be
    built)."""
    q = 600
    old = CodedShuffleSampler(q, num_replicas=4, rank=0, seed=9, extra_cache=0.1)
    old.set_epoch(2)
    state = old.state_dict()
    assert state["extra_cache"] == 0.1 and state["alpha"] is None
    for world in (3, 2):
        new = CodedShuffleSampler(q, num_replicas=world, rank=0, seed=9, extra_cache=0.1)
        new.load_state_dict(state)
        assert new.plan_summary()["kind"] == "remainder"
        assert len(new) == len(new.indices()) == len(list(new)), "the remainder's share of the rest"
        new.set_epoch(3)
        batch = -(-q // world)
        start, first = new.needs(), new.batch()
        assert len(start) == batch + int(0.1 * (q - batch))  # the new chain's first epoch
        # The next epoch needs its batch minus that whole starting cache: the cache beyond the
        # batch carried over (caching the batch only, it would need its batch minus the last).
        new.set_epoch(4)
        assert new.needs().tolist() == np.setdiff1d(new.batch(), start).tolist()
        assert len(new.needs()) < len(np.setdiff1d(new.batch(), first))
        state = new.state_dict()
    with pytest.raises(ValueError, match="alpha=0.3 cannot hold on 3 ranks"):
        CodedShuffleSampler(q, num_replicas=3, rank=0, alpha=0.3)


def check_carried_over(s, start) -> None:
    """Steps ``s`` (at its segment's first epoch, where it loaded the cache ``start``) two
    epochs: the first needs exactly its batch minus ``start``; the second nothing of the batch
    before (a cache keeps its batch)."""
    s.set_epoch(s.epoch + 1)
    assert s.needs().tolist() == np.setdiff1d(s.batch(), start).tolist()
    before = s.batch()
    s.set_epoch(s.epoch + 1)
    assert set(s.needs().tolist()) <= set(np.setdiff1d(s.batch(), before).tolist())


def test_plan_summary_is_coded_against_uncoded():
    s = CodedShuffleSampler(2000, num_replicas=4, rank=0, seed=1, alpha=0.5, scheme="coded")
    assert s.plan_summary()["kind"] == "initial"
    s.set_epoch(1)
    p = s.plan_summary()
    assert p["kind"] == "chain" and p["transmissions"] < p["uncoded_transmissions"]
    assert p["uncoded_transmissions"] == sum(
        len(CodedShuffleSampler(2000, num_replicas=4, rank=r, seed=1, alpha=0.5)._at(1).needs())
        for r in range(4)
    )


def _at(self, epoch):
    self.set_epoch(epoch)
    return self


CodedShuffleSampler._at = _at


def served_until(ss, k):
    """Every rank serves its first k samples; returns what they served."""
    out = []
    for s in ss:
        it = iter(s)
        out.append([next(it) for _ in range(k)])
    return out


@given(
    q=st.integers(8, 200),
    world=st.sampled_from([1, 3, 4, 8]),
    epoch=st.integers(0, 3),
    frac=st.floats(0, 1),
    drop_last=st.booleans(),
)
def test_mid_epoch_resume_serves_exactly_the_rest(q, world, epoch, frac, drop_last):
    if world > q:
        return
    ss = samplers(q, world, seed=3, drop_last=drop_last)
    for s in ss:
        s.set_epoch(epoch)
    full = [s.indices().tolist() for s in ss]
    k = int(frac * len(full[0]))
    served_until(ss, k)
    for r, s in enumerate(ss):
        state = pickle.loads(pickle.dumps(s.state_dict()))
        fresh = CodedShuffleSampler(q, num_replicas=world, rank=r, drop_last=drop_last)
        fresh.load_state_dict(state)
        fresh.set_epoch(epoch)  # a training loop calls it again: it keeps the position
        assert list(fresh) == full[r][k:]
        fresh.set_epoch(epoch + 1)
        ss[r].set_epoch(epoch + 1)
        assert fresh.indices().tolist() == ss[r].indices().tolist()


def elastic(q, old, new, epoch, k, drop_last=False, seed=11, **kw):
    """Serves k samples of `epoch` on `old` ranks, resumes on `new` ranks from rank 0's state;
    returns (what the old ranks served, what the new ranks serve, the new samplers)."""
    ss = samplers(q, old, seed=seed, drop_last=drop_last, **kw)
    for s in ss:
        s.set_epoch(epoch)
    served = served_until(ss, k)
    state = ss[0].state_dict()
    ms = samplers(q, new, **kw)
    for m in ms:
        m.load_state_dict(state)
        m.set_epoch(epoch)
    rest = [list(m) for m in ms]
    return ss, served, ms, rest


@pytest.mark.parametrize("old,new", [(4, 3), (3, 8), (8, 1), (1, 4)])
@pytest.mark.parametrize("drop_last", [False, True])
def test_elastic_resume_serves_every_remaining_sample_once(old, new, drop_last):
    q, epoch = 103, 2
    for k in (0, 5, 12, 13, 25):
        k = min(k, expected_len(q, old, drop_last))
        ss, served, ms, rest = elastic(q, old, new, epoch, k, drop_last=drop_last)
        lengths = {len(r) for r in rest}
        assert len(lengths) == 1, "ranks stay in step"
        done = Counter(i for part in served for i in part)
        real = Counter()
        for m, r in zip(ms, rest):
            real.update(r[: len(m.batch())])
        epoch_set = set()
        for s in ss:
            order = s.indices().tolist()
            n_real = min(len(s.batch()), len(order))
            epoch_set.update(order[:n_real])
        assert all(c == 1 for c in real.values())
        assert set(real) == epoch_set - set(done)
        assert all(i in set(m.batch().tolist()) for m, r in zip(ms, rest) for i in r)
        # The next epochs: a new chain over `new` ranks, every index exactly once.
        for m in ms:
            m.set_epoch(epoch + 1)
        check_epoch(ms, q, drop_last)
        assert ms[0].plan_summary()["kind"] == "initial"
        for m in ms:
            m.set_epoch(epoch + 2)
        check_epoch(ms, q, drop_last)


def test_elastic_twice_within_one_epoch():
    q, epoch = 97, 1
    ss = samplers(q, 4, seed=11)
    for s in ss:
        s.set_epoch(epoch)
    done = Counter(i for part in served_until(ss, 6) for i in part)
    # The job moves to 3 ranks, which serve 5 of the remainder, then to 8 ranks.
    ms = samplers(q, 3)
    for m in ms:
        m.load_state_dict(ss[0].state_dict())
    for m, p in zip(ms, served_until(ms, 5)):
        done.update(p[: len(m.batch())])
    state = ms[0].state_dict()
    final = samplers(q, 8)
    for f in final:
        f.load_state_dict(state)
    for f in final:
        done.update(list(f)[: len(f.batch())])
    assert sorted(done) == list(range(q)) and all(c == 1 for c in done.values())


def test_elastic_is_deterministic_and_rank_independent():
    _, _, _, a = elastic(200, 4, 3, 1, 9)
    _, _, _, b = elastic(200, 4, 3, 1, 9)
    assert a == b
    ss = samplers(200, 4, seed=11)
    for s in ss:
        s.set_epoch(1)
    served_until(ss, 9)
    states = [s.state_dict() for s in ss]
    outs = []
    for st_ in states:
        m = CodedShuffleSampler(200, num_replicas=3, rank=1)
        m.load_state_dict(st_)
        outs.append(list(m))
    assert all(o == outs[0] for o in outs)


def test_iterator_state_protocol_as_stateful_dataloader_uses_it():
    s = CodedShuffleSampler(60, num_replicas=2, rank=1, seed=2)
    s.set_epoch(1)
    it = iter(s)
    first = [next(it) for _ in range(7)]
    state = it.state_dict()
    assert state["position"] == 7 and state["epoch"] == 1
    # A fresh loader: restore the sampler, then the iterator (both, as torchdata may).
    t = CodedShuffleSampler(60, num_replicas=2, rank=1)
    t.load_state_dict(state)
    it2 = iter(t)
    it2.load_state_dict(state)
    rest = list(it2)
    assert first + rest == s.indices().tolist()
    assert t.state_dict()["position"] == len(s)
    assert len(t) == len(s), "a same-size resume keeps the epoch's length"


def test_pliable_choice_is_the_same_on_every_rank():
    kw = dict(scheme="pliable-greedy", candidates=3, seed=4, alpha=0.4)
    ss = samplers(400, 4, **kw)
    for s in ss:
        s.set_epoch(2)
    batches = [s.batch().tolist() for s in ss]
    again = samplers(400, 4, **kw)
    for s in again:
        s.set_epoch(2)
    assert batches == [s.batch().tolist() for s in again]
    check_epoch(ss, 400, drop_last=False)
    p = ss[0].plan_summary()
    assert p["made_by"].startswith("pliable") and p["transmissions"] <= p["uncoded_transmissions"]


def test_bad_arguments_raise_clear_one_line_errors():
    cases = [
        (lambda: CodedShuffleSampler(10), ValueError, "num_replicas and rank are needed"),
        (
            lambda: CodedShuffleSampler(10, num_replicas=2, rank=2),
            ValueError,
            "invalid rank 2: rank must lie in [0, 1]",
        ),
        (
            lambda: CodedShuffleSampler(3, num_replicas=4, rank=0),
            ValueError,
            "more ranks (4) than samples (3)",
        ),
        (
            lambda: CodedShuffleSampler(10, num_replicas=2, rank=0, policy="nope"),
            ValueError,
            'unknown policy "nope": the policies are local, partial-local and global',
        ),
        (
            lambda: CodedShuffleSampler(10, num_replicas=2, rank=0, policy="partial-local"),
            ValueError,
            "partial-local needs the fraction Q",
        ),
        (
            lambda: CodedShuffleSampler(10, num_replicas=2, rank=0, alpha=3.0),
            ValueError,
            "alpha must lie in (0, 1], got 3",
        ),
        (
            lambda: CodedShuffleSampler(10, num_replicas=2, rank=0, scheme="x"),
            ValueError,
            "invalid value 'x' for '--scheme': known schemes are",
        ),
        (
            lambda: CodedShuffleSampler(10, num_replicas=2, rank=0).set_epoch("1"),
            TypeError,
            "epoch must be an int, got str",
        ),
        (
            lambda: CodedShuffleSampler(10, num_replicas=2, rank=0).set_epoch(-1),
            ValueError,
            "epoch must be at least 0, got -1",
        ),
        (
            lambda: CodedShuffleSampler(10, num_replicas=2, rank=0).load_state_dict({}),
            ValueError,
            'the sampler state has no "version"',
        ),
    ]
    for call, kind, text in cases:
        with pytest.raises(kind) as info:
            call()
        assert text in str(info.value) and "\n" not in str(info.value), str(info.value)
    s = CodedShuffleSampler(10, num_replicas=2, rank=0)
    with pytest.raises(ValueError, match="dataset of 10 samples"):
        CodedShuffleSampler(12, num_replicas=2, rank=0).load_state_dict(s.state_dict())


def list_bytes(lists: int, ids: int) -> int:
    """The bytes of ``lists`` lists holding ``ids`` indices in all in a state: a u64 count, a
    u64 length per list and a u32 per index."""
    return 8 + 8 * lists + 4 * ids


def test_the_state_costs_four_bytes_an_index_and_four_more_a_cached_one():
    """As python/README says (about 5 MB for ImageNet caching the batch only): the batches take
    4 bytes an index, the caches (kept only with extra_cache or alpha) 4 more a cached index."""
    q, world = 1000, 4
    plain = CodedShuffleSampler(q, num_replicas=world, rank=0, seed=1)._at(2).state_dict()
    assert len(plain["before"]["batches"]) == list_bytes(world, q)
    assert plain["before"]["caches"] is None
    cached = CodedShuffleSampler(q, num_replicas=world, rank=0, seed=1, extra_cache=0.2)._at(2).state_dict()
    capacity = 250 + int(0.2 * 750)
    assert len(cached["before"]["batches"]) == list_bytes(world, q)
    assert len(cached["before"]["caches"]) == list_bytes(world, world * capacity)


def test_the_state_holds_plain_values_only():
    """torch.load(weights_only=True) and pickle keep it: no numpy, no custom classes."""

    def plain(v):
        if isinstance(v, dict):
            return all(isinstance(k, str) and plain(x) for k, x in v.items())
        if isinstance(v, list):
            return all(plain(x) for x in v)
        return isinstance(v, (int, float, str, bool, bytes, type(None))) and not isinstance(v, np.generic)

    s = CodedShuffleSampler(50, num_replicas=2, rank=0, alpha=0.6)
    s.set_epoch(2)
    assert plain(s.state_dict())
    # torch.save pickles with protocol 2 (bytes as _codecs.encode, which torch.load's
    # weights_only unpickler allows); the state survives it.
    t = CodedShuffleSampler(50, num_replicas=2, rank=1)
    t.load_state_dict(pickle.loads(pickle.dumps(s.state_dict(), protocol=2)))
    assert (
        t.epoch == 2
        and t.indices().tolist() == CodedShuffleSampler(50, 2, 1, alpha=0.6)._at(2).indices().tolist()
    )


@pytest.mark.parametrize(
    "policy,fraction,alpha,scheme",
    [
        ("partial-local", 0.3, None, "coded"),
        ("global", None, 0.4, "ubershuffle"),
        ("local", None, None, "auto"),
    ],
)
def test_plan_summary_is_the_cli_epoch_of_the_same_chain(policy, fraction, alpha, scheme):
    """Epoch e of the sampler (first segment) is epoch e of `ubershuffle plan --policy ...
    --epochs` (plan_epochs gives the command line's records; test_planning checks that)."""
    kw = dict(policy=policy, fraction=fraction, alpha=alpha, scheme=scheme)
    want = us.plan_epochs(6, 1200, epochs=3, seed=7, **kw)
    s = CodedShuffleSampler(1200, num_replicas=6, rank=0, seed=7, **kw)
    for e in range(1, 4):
        s.set_epoch(e)
        got = s.plan_summary()
        rec = want[e - 1]
        keys = ["transmissions", "uncoded_transmissions", "points_moved", "points_exchanged"]
        assert {k: got[k] for k in keys} == {k: rec[k] for k in keys}
    # The same after a state round trip (the epoch is drawn again from the saved chain).
    t = CodedShuffleSampler(1200, num_replicas=6, rank=3)
    t.load_state_dict(s.state_dict())
    assert t.plan_summary()["transmissions"] == want[2]["transmissions"]


@given(
    old=st.sampled_from([1, 3, 4, 8]),
    new=st.sampled_from([1, 3, 4, 8]),
    extra=st.integers(0, 90),
    epoch=st.integers(0, 3),
    frac=st.floats(0, 1),
    drop_last=st.booleans(),
    policy=st.sampled_from(POLICIES),
)
def test_elastic_resume_property(old, new, extra, epoch, frac, drop_last, policy):
    """Any world sizes, any position: the interrupted epoch's unserved samples are served
    exactly once by the new ranks, in step; the next epoch covers every index once."""
    q = max(old, new) + extra
    kw = dict(policy=policy[0], fraction=policy[1])
    k = int(frac * expected_len(q, old, drop_last))
    ss, served, ms, rest = elastic(q, old, new, epoch, k, drop_last=drop_last, **kw)
    assert len({len(r) for r in rest}) == 1
    epoch_set = set()
    for s in ss:
        order = s.indices().tolist()
        epoch_set.update(order[: min(len(s.batch()), len(order))])
    done = {i for part in served for i in part}
    real = Counter()
    for m, r in zip(ms, rest):
        full = m.indices().tolist()
        offset = len(full) - len(r)  # a same-size resume continues at k; a new size from 0
        assert full[offset:] == r
        real.update(r[: max(0, min(len(m.batch()), len(full)) - offset)])
    assert all(c == 1 for c in real.values()) and set(real) == epoch_set - done
    for m in ms:
        m.set_epoch(epoch + 1)
    check_epoch(ms, q, drop_last)


def test_corrupt_states_raise_value_errors():
    s = CodedShuffleSampler(40, num_replicas=4, rank=0, seed=1)
    s.set_epoch(2)
    good = s.state_dict()
    lists = "the sampler state is corrupt (its lists do not parse)"
    broken = [
        ({**good, "before": {**good["before"], "batches": good["before"]["batches"][:-3]}}, lists),
        ({**good, "before": {**good["before"], "batches": b"\xff" * 40}}, lists),
        ({**good, "world_size": 0}, "the sampler state is corrupt (world_size 0)"),
        ({**good, "version": 99}, "the sampler state has version 99; this ubershuffle reads version 1"),
        ({**good, "kind": "remainder", "lists": b"", "real": [1]}, lists),
    ]
    for state, message in broken:
        fresh = CodedShuffleSampler(40, num_replicas=4, rank=0)
        with pytest.raises(ValueError) as info:
            fresh.load_state_dict(state)
        assert str(info.value) == message


def test_pickle_and_deepcopy_keep_the_sampler():
    import copy

    s = CodedShuffleSampler(list(range(90)), num_replicas=3, rank=1, seed=4, alpha=0.5, drop_last=True)
    s.set_epoch(2)
    it = iter(s)
    first = [next(it) for _ in range(5)]
    for twin in (copy.deepcopy(s), pickle.loads(pickle.dumps(s))):
        assert twin.epoch == 2 and len(twin) == len(s) and twin.dataset == s.dataset
        assert first + list(twin) == s.indices().tolist()
        twin.set_epoch(3)
        s2 = CodedShuffleSampler(90, num_replicas=3, rank=1, seed=4, alpha=0.5, drop_last=True)
        s2.set_epoch(3)
        assert twin.indices().tolist() == s2.indices().tolist()
