"""The coded exchange: 4 ranks receive exactly their batches' bytes by coded delivery, in step
with the sampler, records of any size; the next epoch arrives while a rank trains; a rank's
store holds its cache; a lost rank is named to the others, who keep the sampler's batches; a
crash of every process resumes; forked readers see new records; a close from another thread
ends a wait."""

from __future__ import annotations

import json
import multiprocessing
import os
import pathlib
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import ubershuffle as us
from ubershuffle.sources import as_source

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import exchange_rank  # noqa: E402

TOKEN = "exchange-test-token-5Fq8Rz2Lw7Kc4Nv9Bx3Hp"


def sampler_of(ex, cache=None, **kw) -> us.CodedShuffleSampler:
    """The sampler of ``ex``'s rank on the tests' chain; ``cache``: its cache setting (default
    ``alpha=exchange_rank.ALPHA``)."""
    cache = {"alpha": exchange_rank.ALPHA} if cache is None else cache
    kw = {"seed": exchange_rank.SEED, **cache, **kw}
    return us.CodedShuffleSampler(exchange_rank.POINTS, num_replicas=ex.world, rank=ex.rank, **kw)


def run_ranks(address: str, n: int, check, policy: str = "partial-local", cache=None, **kw) -> dict:
    """Runs ``n`` ranks on threads; ``check(ex, sampler, batch)`` on every delivered batch;
    ``cache``: the samplers' cache setting (see :func:`sampler_of`)."""
    results, errors = {}, []
    cache = {"alpha": exchange_rank.ALPHA} if cache is None else cache

    def rank() -> None:
        try:
            with us.Exchange.connect(address, token=TOKEN, **kw) as ex:
                s = sampler_of(ex, cache, policy=policy, fraction=0.3 if policy == "partial-local" else None)
                seen = [check(ex, s, ex.local_batch(s.batch()))]
                for batch in ex:
                    s.set_epoch(batch.epoch)
                    seen.append(check(ex, s, batch))
                results[ex.rank] = seen
        except Exception as e:  # noqa: BLE001 (reported by the test)
            errors.append(e)

    threads = [threading.Thread(target=rank) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    return results


def received_by_epoch(results: dict) -> dict:
    """``{epoch: the ranks' bytes_received summed}`` from ``run_ranks`` results whose ``check``
    returned ``(epoch, bytes_received)``."""
    total: dict = {}
    for seen in results.values():
        for epoch, received in seen:
            total[epoch] = total.get(epoch, 0) + received
    return total


def check_received_against_master(results: dict, epochs: list, workers: int) -> None:
    """What the ranks say they received, summed, is what the master sent them: every broadcast
    packet reaches every rank, every unicast packet one (payload bytes, headers apart)."""
    want = {e["epoch"]: workers * e["broadcast_bytes"] + e["unicast_bytes"] for e in epochs}
    assert received_by_epoch(results) == {0: 0, **want}


def hosted(data, workers: int, epochs: int, **kw) -> us.Host:
    """A master on a thread serving ``data`` with the tests' cache ratio, seed and token."""
    kw = {"alpha": exchange_rank.ALPHA, "seed": exchange_rank.SEED, "token": TOKEN, **kw}
    return us.Exchange.host(data, workers=workers, epochs=epochs, **kw)


def test_four_ranks_receive_exactly_their_batches_in_step_with_the_sampler():
    data = exchange_rank.data_set()
    host = hosted(data, 4, 3, policy="partial-local", fraction=0.3, scheme="coded")
    cache: dict = {}
    ahead: dict = {}

    def check(ex, s, batch):
        assert np.array_equal(np.sort(s.batch()), batch.ids), "the sampler and the exchange disagree"
        assert np.array_equal(batch.records, data[batch.ids])
        assert batch.record(0).base is not None  # a view of the store, no copy
        if batch.epoch > 0:
            # Exactly what the batch lacks arrives: the batch minus the cache kept last epoch.
            before = cache[ex.rank]
            assert np.array_equal(batch.new_ids, np.setdiff1d(batch.ids, before))
            assert batch.figures.new_records == len(batch.new_ids)
            assert batch.figures.coded_packets + batch.figures.uncoded_packets == batch.figures.packets
            # Records of one size are one segment each: a packet needed per new record, and
            # every packet that arrives (needed or not) is one record's width.
            assert batch.figures.packets == len(batch.new_ids)
            assert batch.figures.bytes_received % data.shape[1] == 0
            assert batch.figures.bytes_received >= batch.figures.packets * data.shape[1]
            assert batch.figures.padding_bytes == 0
            # The store holds the cache the master says, and besides at most records the last
            # epoch kept (being dropped now) and records of the next epoch (arriving while this
            # one trains).
            assert len(batch.cache) == ex.cache_capacity
            held = ex.store.held()
            assert np.isin(batch.cache, held).all()
            extra, allowed = ahead.get(ex.rank, (np.zeros(0), np.zeros(0)))
            assert np.isin(extra, np.union1d(allowed, batch.ids)).all()
            ahead[ex.rank] = (np.setdiff1d(held, batch.cache), before)
            cache[ex.rank] = batch.cache
        else:
            cache[ex.rank] = ex.store.held()
        return batch.epoch, batch.figures.bytes_received

    results = run_ranks(host.address, 4, check)
    assert sorted(results) == [0, 1, 2, 3]
    assert all([e for e, _ in seen] == [0, 1, 2, 3] for seen in results.values())
    epochs = host.join(timeout=30)
    check_received_against_master(results, epochs, 4)
    # The master sent what the planner predicts for the same chain: `ubershuffle plan --epochs`.
    planned = us.plan_epochs(
        4,
        exchange_rank.POINTS,
        policy="partial-local",
        fraction=0.3,
        alpha=exchange_rank.ALPHA,
        scheme="coded",
        epochs=3,
        seed=exchange_rank.SEED,
    )
    assert [e["transmissions"] for e in epochs] == [p["transmissions"] for p in planned]
    assert [e["uncoded_transmissions"] for e in epochs] == [p["uncoded_transmissions"] for p in planned]
    assert all(e["payload_bytes"] == e["transmissions"] * data.shape[1] for e in epochs)


def test_extra_cache_serves_the_samplers_chain_on_any_number_of_ranks():
    """The host and the samplers take the same extra_cache, on 2 ranks (where alpha=0.25, enough
    on 4, is below a batch): the same batches, and exactly what each batch lacks arrives."""
    data = exchange_rank.data_set()
    host = hosted(data, 2, 2, policy="global", alpha=None, extra_cache=0.2)
    cached: dict = {}

    def check(ex, s, batch):
        assert np.array_equal(np.sort(s.batch()), batch.ids), "the sampler and the exchange disagree"
        assert np.array_equal(batch.records, data[batch.ids])
        if batch.epoch > 0:
            assert np.array_equal(batch.new_ids, np.setdiff1d(batch.ids, cached[ex.rank]))
            assert np.array_equal(batch.new_ids, s.needs())
            assert len(batch.cache) == ex.cache_capacity
            cached[ex.rank] = batch.cache
        else:
            cached[ex.rank] = ex.store.held()
        return batch.epoch

    results = run_ranks(host.address, 2, check, policy="global", cache={"extra_cache": 0.2})
    assert all(seen == [0, 1, 2] for seen in results.values())
    host.join(timeout=30)
    points, batch = exchange_rank.POINTS, exchange_rank.POINTS // 2
    assert all(len(c) == batch + int(0.2 * (points - batch)) for c in cached.values())
    with pytest.raises(ValueError, match="pass extra_cache= "):
        us.Exchange.host(data, workers=2, epochs=1, token=TOKEN)
    with pytest.raises(ValueError, match="alpha=0.25 cannot hold on 2 ranks.*write extra_cache=E instead"):
        us.Exchange.host(data, workers=2, epochs=1, token=TOKEN, alpha=0.25)


def test_a_store_reads_records_of_one_size_as_rows_and_of_uneven_size_as_views(tmp_path):
    """Records of one size: rows, a view of the store for consecutive ids, a copy otherwise;
    of uneven size: a list of views. Either way read-only."""
    store = us.RecordStore(np.arange(0, 44, 4), tmp_path / "s")
    store.put_many([3, 4], np.arange(8, dtype=np.uint8))
    store.flush()
    again = us.RecordStore(np.arange(0, 44, 4), tmp_path / "s")
    assert again.record_size == 4
    consecutive, shuffled = again.records([3, 4]), again.records([4, 3])
    assert consecutive.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert shuffled.tolist() == [[4, 5, 6, 7], [0, 1, 2, 3]]
    assert np.shares_memory(consecutive, again[3]) and not consecutive.flags.writeable
    assert not np.shares_memory(shuffled, again[3]) and not np.shares_memory(shuffled, again[4])
    with pytest.raises(KeyError, match="5"):
        again.records([3, 5])
    uneven = us.RecordStore([0, 3, 3, 8])
    uneven.put_many([0, 2], np.frombuffer(b"abcdefgh", dtype=np.uint8))
    assert uneven.record_size is None
    views = uneven.records([2, 0])
    assert [bytes(r) for r in views] == [b"defgh", b"abc"]
    assert np.shares_memory(views[0], uneven[2]) and np.shares_memory(views[1], uneven[0])
    assert not any(v.flags.writeable for v in views)
    uneven.close()


def uneven_data_set() -> list[bytes]:
    """Records from 0 to about 3 KB, a few of 20 KB."""
    rng = np.random.default_rng(exchange_rank.SEED)
    sizes = rng.integers(0, 3000, size=exchange_rank.POINTS)
    sizes[::17] = 20_000
    return [rng.integers(0, 256, size=int(n), dtype=np.uint8).tobytes() for n in sizes]


SEGMENT = 512
"""The segment size of :func:`uneven_data_set` (the smallest default: a thirty-second of its
mean record is less)."""


def segments_of(data: list, ids) -> int:
    """The segments of ``SEGMENT`` bytes that records ``ids`` of ``data`` are cut into."""
    return sum(-(-len(data[i]) // SEGMENT) for i in ids)


def test_records_of_uneven_size_arrive_whole_in_step_with_the_sampler():
    """Records of uneven size arrive whole, one needed packet per segment of a new record; a
    rank's padding is at most its packets' bytes beyond its new records (all of it when no
    packet is coded), and the master's at most what the ranks count."""
    data = uneven_data_set()
    host = hosted(data, 3, 3)
    padding: dict = {}

    def check(ex, s, batch):
        assert np.array_equal(np.sort(s.batch()), batch.ids)
        assert ex.store.record_size is None
        records = batch.records
        assert isinstance(records, list) and len(records) == len(batch)
        assert all(bytes(r) == data[i] for i, r in zip(batch.ids, records))
        f = batch.figures
        if batch.epoch > 0:
            assert f.packets == segments_of(data, batch.new_ids)
            beyond = f.packets * SEGMENT - sum(len(data[i]) for i in batch.new_ids)
            assert 0 < f.padding_bytes <= beyond
            assert f.bytes_received % SEGMENT == 0 and f.bytes_received >= f.packets * SEGMENT
            assert np.isin(batch.cache, ex.store.held()).all()
            padding[batch.epoch] = padding.get(batch.epoch, 0) + f.padding_bytes
        return batch.epoch, f.bytes_received

    results = run_ranks(host.address, 3, check, policy="global")
    assert all([e for e, _ in seen] == [0, 1, 2, 3] for seen in results.values())
    epochs = host.join(timeout=30)
    check_received_against_master(results, epochs, 3)
    for e in epochs:
        # Packets of one segment size, padding counted apart: each packet's padding is its
        # segment beyond its longest piece, counted by every rank that needs it.
        assert e["payload_bytes"] == e["transmissions"] * SEGMENT
        assert 0 < e["padding_bytes"] <= padding[e["epoch"]]


def test_the_next_epoch_arrives_while_the_rank_trains():
    """Once a rank has taken epoch 1, epoch 2's records reach its store without another call
    (before, the master waited for the next call to hear that epoch 1 was taken)."""
    data = exchange_rank.data_set()
    host = hosted(data, 2, 3, timeout=30.0)
    arrived: dict = {}

    def rank() -> None:
        with us.Exchange.connect(host.address, token=TOKEN) as ex:
            ahead = sampler_of(ex)
            batch = ex.next_epoch()
            ahead.set_epoch(batch.epoch + 1)
            coming = [int(i) for i in ahead.batch()]
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not all(i in ex.store for i in coming):
                time.sleep(0.02)  # "training" on epoch 1
            arrived[ex.rank] = all(i in ex.store for i in coming)
            # What the rank no longer keeps is gone: the store holds its cache and the next batch.
            assert np.array_equal(ex.store.held(), np.union1d(batch.cache, coming))
            assert np.array_equal(ex.next_epoch().ids, np.sort(coming))
            for _ in ex:
                pass

    threads = [threading.Thread(target=rank) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert arrived == {0: True, 1: True}
    host.join(timeout=30)


def test_close_from_another_thread_ends_a_wait():
    """``next_epoch(timeout=)`` raises ``TimeoutError`` while the epoch cannot come (the master
    waits for the idle rank); ``close()`` from another thread ends a wait with
    ``ExchangeClosed``, and so does every call after it."""
    host = hosted(exchange_rank.data_set(), 2, 3, timeout=30.0)
    exchanges: list = []
    connected = [
        threading.Thread(target=lambda: exchanges.append(us.Exchange.connect(host.address, token=TOKEN)))
        for _ in range(2)
    ]
    for t in connected:
        t.start()
    for t in connected:
        t.join(60)
    waiting, idle = exchanges
    waiting.next_epoch()  # epoch 1; epoch 2 waits for the idle rank to take its epoch 1
    with pytest.raises(TimeoutError, match=r"^no epoch arrived within 0\.2 s$"):
        waiting.next_epoch(timeout=0.2)
    outcome: list = []

    def wait() -> None:
        try:
            waiting.next_epoch()
            outcome.append("an epoch")
        except Exception as e:  # noqa: BLE001 (checked below)
            outcome.append(e)

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.5)
    started = time.monotonic()
    waiting.close()  # from this thread, while the other waits: no "Already borrowed"
    waiter.join(10)
    assert time.monotonic() - started < 5
    assert len(outcome) == 1 and isinstance(outcome[0], us.ExchangeClosed), outcome
    assert str(outcome[0]) == "waiting for the next epoch: the exchange was closed"
    with pytest.raises(us.ExchangeClosed, match="the exchange was closed$"):
        waiting.next_epoch()
    idle.close()


def _read_forever(store, requests, answers) -> None:
    """A persistent DataLoader-like reader: forked once, it reads the records asked for."""
    while (ids := requests.recv()) is not None:
        answers.send([bytes(store[int(i)]) for i in ids])


def test_a_forked_reader_sees_the_records_of_later_epochs():
    """A reader forked at epoch 0, as DataLoader forks its persistent workers (torch is not
    needed: multiprocessing's fork stands in), reads each later epoch's new records, not the
    zeros of a copy taken at fork."""
    data = exchange_rank.data_set()
    host = hosted(data, 2, 3)
    other = threading.Thread(target=lambda: [None for _ in us.Exchange.connect(host.address, token=TOKEN)])
    other.start()
    with us.Exchange.connect(host.address, token=TOKEN) as ex:
        fork = multiprocessing.get_context("fork")
        requests, child_requests = fork.Pipe()
        answers, child_answers = fork.Pipe()
        reader = fork.Process(
            target=_read_forever, args=(ex.store, child_requests, child_answers), daemon=True
        )
        reader.start()
        epochs = 0
        for batch in ex:
            assert len(batch.new_ids) > 0
            requests.send(batch.new_ids)
            assert answers.recv() == [data[i].tobytes() for i in batch.new_ids], f"epoch {batch.epoch}"
            epochs += 1
        requests.send(None)
        reader.join(10)
    other.join(30)
    assert epochs == 3
    host.join(timeout=30)


def test_bad_arguments_are_one_line_errors(monkeypatch):
    monkeypatch.delenv("UBERSHUFFLE_TOKEN", raising=False)
    data = np.zeros((8, 4), dtype=np.uint8)
    with pytest.raises(ValueError, match="no token"):
        us.Exchange.host(data, workers=2, alpha=0.5, epochs=1)
    with pytest.raises(TypeError, match="must be 2-D uint8"):
        us.Exchange.host(np.zeros(8, dtype=np.uint8), workers=2, alpha=0.5, epochs=1, token=TOKEN)
    with pytest.raises(ValueError, match="at least one record"):
        us.Exchange.host([], workers=2, alpha=0.5, epochs=1, token=TOKEN)
    with pytest.raises(ValueError, match='unknown policy "sideways": the policies are'):
        us.Exchange.host(data, workers=2, alpha=0.5, epochs=1, token=TOKEN, policy="sideways")
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds below 1e9, got -1"):
        us.Exchange.connect("127.0.0.1:1", token=TOKEN, timeout=-1)
    with socket_port() as port:  # closed once bound: nothing listens there
        pass
    with pytest.raises(us.ExchangeClosed, match=f"^joining the master: cannot connect to 127.0.0.1:{port}: "):
        us.Exchange.connect(f"127.0.0.1:{port}", token=TOKEN, timeout=1, join_timeout=1)
    with pytest.raises(ValueError, match="alpha=0.01 cannot hold on 2 ranks"):
        us.Exchange.host(data, workers=2, alpha=0.01, epochs=1, token=TOKEN, join_timeout=1)
    with pytest.raises(ValueError, match="scheme 'magic': known schemes are"):
        us.Exchange.host(data, workers=2, alpha=0.5, epochs=1, token=TOKEN, scheme="magic")
    host = us.Exchange.host(data, workers=2, alpha=0.5, epochs=1, token=TOKEN, join_timeout=1)
    with pytest.raises(RuntimeError) as e:
        host.join(timeout=30)
    assert str(e.value) == "only 0 of 2 workers joined within 1s"


def rank_process(address: str, *args: str) -> subprocess.Popen:
    env = {"UBERSHUFFLE_TOKEN": TOKEN, "PATH": "/usr/bin:/bin"}
    if "PYTHONPATH" in os.environ:  # a package installed with --target
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return subprocess.Popen(
        [sys.executable, str(HERE / "exchange_rank.py"), address, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_a_killed_rank_is_named_to_the_others_within_the_timeout_and_a_new_process_rejoins():
    """A killed rank is named by RankLost to every survivor within the timeout of its death;
    its batches are not delivered until a new process takes its place at an epoch boundary,
    which then receives that rank's checked batches to the last epoch."""
    timeout, epochs = 2.0, 16
    host = hosted(exchange_rank.data_set(), 4, epochs, timeout=timeout)
    victim = rank_process(host.address, "--hang-after", "1", "--timeout", str(timeout))
    caught: list = []
    finished: list = []
    disagree: list = []

    def survivor() -> None:
        with us.Exchange.connect(host.address, token=TOKEN, timeout=timeout) as ex:
            s = sampler_of(ex)

            def follow(batch) -> int:
                # Every survivor keeps the sampler's batch, before and after the loss.
                s.set_epoch(batch.epoch)
                if not np.array_equal(np.sort(s.batch()), batch.ids):
                    disagree.append((ex.rank, batch.epoch))
                return batch.epoch

            try:
                while True:
                    follow(ex.next_epoch(timeout=10 * timeout))
            except Exception as e:  # noqa: BLE001 (checked below)
                caught.append((time.monotonic(), e))
            # The master goes on with the survivors to its last epoch (each epoch "trains" a
            # little, so that the replacement joins while the run goes on).
            last = None
            for batch in ex:
                last = follow(batch)
                time.sleep(0.25)
            finished.append(last)

    threads = [threading.Thread(target=survivor) for _ in range(3)]
    for t in threads:
        t.start()
    line = json.loads(victim.stdout.readline())  # the victim took epoch 1
    killed_rank = line["rank"]
    victim.kill()
    killed_at = time.monotonic()
    while len(caught) < 3 and time.monotonic() - killed_at < 10 * timeout:
        time.sleep(0.05)
    # A new process takes the lost place at an epoch boundary and receives checked records.
    replacement = rank_process(host.address, "--timeout", str(timeout))
    for t in threads:
        t.join(60)
    victim.wait()
    rejoined = [json.loads(line) for line in replacement.communicate(timeout=60)[0].splitlines()]
    assert rejoined[-1].get("done"), rejoined
    assert rejoined[0]["rank"] == killed_rank
    assert all(line["bytes_ok"] and line["agree"] for line in rejoined if "epoch" in line)
    assert disagree == [], "a survivor's batch left the sampler's"
    assert len(caught) == 3
    for at, e in caught:
        assert isinstance(e, us.RankLost), e
        assert e.ranks == [killed_rank]
        assert str(e) == f"rank {killed_rank} left the exchange: the master goes on without it"
        assert at - killed_at < timeout, f"named {at - killed_at:.2f} s after the kill"
    assert finished == [epochs] * 3
    master = host.join(timeout=30)
    assert host.lost_workers() == [killed_rank]
    check_rejoined_at_a_boundary(master, killed_rank, [line["epoch"] for line in rejoined if "epoch" in line])


def check_rejoined_at_a_boundary(master: list, rank: int, replacement_epochs: list) -> None:
    """The master lost ``rank`` once and took it back once, at an epoch boundary: no epoch
    between updated it, and every epoch from its return, each delivered to the replacement."""
    lost = [e["epoch"] for e in master if rank in e["lost_workers"]]
    back = [e["epoch"] for e in master if rank in e["rejoined_workers"]]
    assert len(lost) == 1 and len(back) == 1 and lost[0] < back[0], (lost, back)
    last = master[-1]["epoch"]
    assert replacement_epochs == list(range(back[0], last + 1))
    for e in master:
        assert (rank in e["updated_workers"]) == (e["epoch"] < lost[0] or e["epoch"] >= back[0]), e


MASTER = """
import sys, ubershuffle as us, exchange_rank
host = us.Exchange.host(exchange_rank.data_set(), workers=3, alpha=exchange_rank.ALPHA, epochs=6,
    seed=exchange_rank.SEED, token="TOKEN_HERE", timeout=2.0, checkpoint=sys.argv[1],
    resume=sys.argv[2] == "1")
print(host.address, flush=True)
host.join()
""".replace("TOKEN_HERE", TOKEN)


def test_sampler_state_and_record_store_resume_after_every_process_crashes(tmp_path):
    def start_master(resume: bool) -> tuple:
        master = subprocess.Popen(
            [sys.executable, "-c", MASTER, str(tmp_path / "master.ckpt"), "1" if resume else "0"],
            stdout=subprocess.PIPE,
            text=True,
            cwd=HERE,
        )
        return master, master.stdout.readline().strip()

    def start_ranks(address: str) -> list:
        return [
            rank_process(
                address, "--store", str(tmp_path / f"store{k}"), "--state", str(tmp_path / f"state{k}")
            )
            for k in range(3)
        ]

    master, address = start_master(False)
    ranks = start_ranks(address)
    for r in ranks:  # every rank has taken epoch 2
        while json.loads(r.stdout.readline()).get("epoch", 0) < 2:
            pass
    for proc in [master, *ranks]:  # a crash of every process
        proc.kill()
        proc.wait()
    master, address = start_master(True)
    ranks = start_ranks(address)
    lines = [[json.loads(line) for line in r.communicate(timeout=60)[0].splitlines()] for r in ranks]
    master.wait(timeout=30)
    for out in lines:
        assert out[0]["held"] and out[0]["resumed_at"] >= 2, out[0]
        epochs = [line for line in out if "epoch" in line]
        assert epochs and epochs[-1]["epoch"] == 6 and out[-1].get("done")
        assert all(line["agree"] and line["bytes_ok"] for line in epochs), epochs


@pytest.mark.parametrize("layout", ["fixed", "folder", "blob"])
def test_ranks_receive_from_ubershuffle_serve(tmp_path, layout):
    """The master in a process of its own: `ubershuffle serve` over a file of records of one
    size, a folder of records of uneven size (sorted as `as_source` sorts them), or a blob of
    them with an index of u64 offsets."""
    from conftest import find_cli

    cli = find_cli()
    if cli is None:
        pytest.skip("the ubershuffle binary is not built (cargo build --release -p ubershuffle)")
    if layout == "fixed":
        data = list(exchange_rank.data_set())
        (tmp_path / "data.bin").write_bytes(b"".join(r.tobytes() for r in data))
        records = ["--records", str(tmp_path / "data.bin"), "--record-size", str(exchange_rank.WIDTH)]
    else:
        data = uneven_data_set()
        folder = tmp_path / "records"
        for i, r in enumerate(data):
            (folder / f"{i % 7}").mkdir(parents=True, exist_ok=True)
            (folder / f"{i % 7}" / f"{i:04d}.bin").write_bytes(r)
        data = [as_source(folder).record(i).tobytes() for i in range(len(data))]  # in as_source's order
        records = ["--records-dir", str(folder)]
        if layout == "blob":
            (tmp_path / "blob.bin").write_bytes(b"".join(data))
            offsets = np.cumsum([0] + [len(r) for r in data]).astype("<u8")
            (tmp_path / "blob.u64").write_bytes(offsets.tobytes())
            records = ["--records", str(tmp_path / "blob.bin"), "--index", str(tmp_path / "blob.u64")]
    with socket_port() as port:
        address = f"127.0.0.1:{port}"
    master = subprocess.Popen(
        [str(cli), "serve", *records, "--workers", "2", "--alpha", str(exchange_rank.ALPHA),
         "--seed", str(exchange_rank.SEED), "--epochs", "2", "--listen", address, "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={"UBERSHUFFLE_TOKEN": TOKEN},
    )  # fmt: skip

    def check(ex, s, batch):
        assert np.array_equal(np.sort(s.batch()), batch.ids)
        assert [ex.store[int(i)].tobytes() for i in batch.ids] == [bytes(data[i]) for i in batch.ids]
        return batch.epoch

    results = run_ranks(address, 2, check, policy="global", join_timeout=30)
    out, _ = master.communicate(timeout=60)
    assert master.returncode == 0
    assert all(seen == [0, 1, 2] for seen in results.values())
    epochs = json.loads(out)["epochs"]
    assert [e["epoch"] for e in epochs] == [1, 2]
    assert all((e["padding_bytes"] > 0) == (layout != "fixed") for e in epochs)


def socket_port():
    """A context giving a free local port."""
    import contextlib
    import socket

    @contextlib.contextmanager
    def port():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            yield s.getsockname()[1]

    return port()
