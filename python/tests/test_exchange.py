"""The exchange: training ranks joined to a store outside the job receive exactly their
batches' bytes by coded delivery, in step with a sampler of the same settings, records of any
size; the next epoch arrives while a rank trains; a rank's store holds its cache; a rank with
another token is refused; a killed rank is named to the others, and the restarted job resumes
from its saved epoch and kept records, the store reading each record once; ``ubershuffle
serve`` serves Python ranks, and a restarted store reads nothing again; forked readers see new
records; a close from another thread ends a wait."""

from __future__ import annotations

import json
import multiprocessing
import os
import pathlib
import signal
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
    """A sampler of ``ex``'s rank built apart from the exchange, on the tests' chain; ``cache``:
    its cache setting (default ``alpha=exchange_rank.ALPHA``)."""
    cache = {"alpha": exchange_rank.ALPHA} if cache is None else cache
    kw = {"seed": exchange_rank.SEED, **cache, **kw}
    return us.CodedShuffleSampler(exchange_rank.POINTS, num_replicas=ex.world, rank=ex.rank, **kw)


def connect_all(address: str, n: int, **kw) -> list:
    """``n`` ranks joined at ``address`` (joining blocks until all have), by rank."""
    joined: dict = {}
    errors: list = []

    def join(rank: int) -> None:
        try:
            joined[rank] = us.Exchange.connect(address, rank=rank, world=n, token=TOKEN, **kw)
        except Exception as e:  # noqa: BLE001 (reported by the caller)
            errors.append(e)

    threads = [threading.Thread(target=join, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    return [joined[r] for r in range(n)]


def run_ranks(address: str, n: int, check, policy: str = "partial-local", cache=None, **kw) -> dict:
    """Runs ``n`` ranks on threads; ``check(ex, sampler, batch)`` on every delivered batch, the
    sampler built apart with ``policy`` and ``cache`` (see :func:`sampler_of`)."""
    results, errors = {}, []
    exchanges = connect_all(address, n, **kw)

    def rank(ex) -> None:
        try:
            with ex:
                s = sampler_of(ex, cache, policy=policy, fraction=0.3 if policy == "partial-local" else None)
                seen = []
                for batch in ex:
                    s.set_epoch(batch.epoch)
                    seen.append(check(ex, s, batch))
                results[ex.rank] = seen
        except Exception as e:  # noqa: BLE001 (reported by the test)
            errors.append(e)

    threads = [threading.Thread(target=rank, args=(ex,)) for ex in exchanges]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    return results


def hosted(data, workers: int, epochs: int, **kw) -> us.Host:
    """A store outside the job, on a thread, serving ``data`` with the tests' cache ratio, seed
    and token."""
    kw = {"alpha": exchange_rank.ALPHA, "seed": exchange_rank.SEED, "token": TOKEN, **kw}
    return us.Exchange.host(data, workers=workers, epochs=epochs, **kw)


def test_four_ranks_receive_exactly_their_batches_in_step_with_the_sampler():
    data = exchange_rank.data_set()
    host = hosted(data, 4, 3, policy="partial-local", fraction=0.3, scheme="coded")
    cache: dict = {}

    def check(ex, s, batch):
        assert np.array_equal(np.sort(s.batch()), batch.ids), "the sampler and the exchange disagree"
        assert np.array_equal(batch.records, data[batch.ids])
        assert batch.record(0).base is not None  # a view of the store, no copy
        f = batch.figures
        assert f.coded_packets + f.uncoded_packets == f.packets
        assert len(batch.cache) == ex.cache_capacity
        assert np.isin(batch.cache, ex.store.held()).all(), "the store holds the cache"
        if batch.epoch > 0:
            # Exactly what the batch lacks arrives: the batch minus the cache kept last epoch.
            assert np.array_equal(batch.new_ids, np.setdiff1d(batch.ids, cache[ex.rank]))
            assert f.new_records == len(batch.new_ids)
            # Records of one size are one segment each: every packet a rank takes in is one
            # record's width, whole from the store or in pieces relayed among its receivers.
            assert (
                f.bytes_received % data.shape[1] == 0
                and f.bytes_received >= len(batch.new_ids) * data.shape[1]
            )
            assert f.padding_bytes == 0
        cache[ex.rank] = batch.cache
        return batch.epoch, f.bytes_received

    results = run_ranks(host.address, 4, check)
    assert sorted(results) == [0, 1, 2, 3]
    assert all([e for e, _ in seen] == [0, 1, 2, 3] for seen in results.values())
    host.join(timeout=30)
    (attempt,) = host.attempts()
    assert attempt["end"] == "finished" and attempt["error"] is None
    served = {e["epoch"]: e for e in attempt["epochs"]}
    for epoch in (1, 2, 3):
        e = served[epoch]
        # Coded: fewer packets than records sent alone, each to the ranks that decode it.
        assert e["made_by"] == "coded" and 0 < e["coded_packets"] <= e["packets"] < e["uncoded_packets"], e
        received = sum(seen[epoch][1] for seen in results.values())
        assert received >= e["bytes_sent"], "relayed pieces come on top of the store's"
    assert sum(e["source_records"] for e in attempt["epochs"]) == exchange_rank.POINTS


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


def test_records_of_uneven_size_arrive_whole_in_step_with_the_sampler():
    """Records of uneven size arrive whole, coded in fixed-size segments whose padding is
    counted apart."""
    data = uneven_data_set()
    host = hosted(data, 3, 3, scheme="coded")

    def check(ex, s, batch):
        assert np.array_equal(np.sort(s.batch()), batch.ids)
        assert ex.store.record_size is None
        records = batch.records
        assert isinstance(records, list) and len(records) == len(batch)
        assert all(bytes(r) == data[i] for i, r in zip(batch.ids, records))
        assert np.isin(batch.cache, ex.store.held()).all()
        return batch.epoch, batch.figures.padding_bytes

    results = run_ranks(host.address, 3, check, policy="global")
    assert all([e for e, _ in seen] == [0, 1, 2, 3] for seen in results.values())
    assert all(sum(p for _, p in seen) > 0 for seen in results.values()), "coded segments carry padding"
    served = [e for e in host.join(timeout=30) if e["epoch"] in (1, 2, 3)]
    assert all(e["padding_bytes"] > 0 and e["segment_bytes"] < 20_000 for e in served), served


def test_the_next_epoch_arrives_while_the_rank_trains():
    """Once a rank has taken epoch 1, epoch 2's records reach its store without another call."""
    data = exchange_rank.data_set()
    host = hosted(data, 2, 3, timeout=30.0)
    arrived: dict = {}
    errors: list = []

    def rank(ex) -> None:
        try:
            with ex:
                ahead = sampler_of(ex)
                ex.next_epoch()
                batch = ex.next_epoch()
                ahead.set_epoch(batch.epoch + 1)
                coming = [int(i) for i in ahead.batch()]
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and not all(i in ex.store for i in coming):
                    time.sleep(0.02)  # "training" on epoch 1
                arrived[ex.rank] = all(i in ex.store for i in coming)
                assert np.array_equal(ex.next_epoch().ids, np.sort(coming))
                for _ in ex:
                    pass
        except Exception as e:  # noqa: BLE001 (checked below)
            errors.append(e)

    threads = [threading.Thread(target=rank, args=(ex,)) for ex in connect_all(host.address, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert arrived == {0: True, 1: True}
    host.join(timeout=30)


def test_close_from_another_thread_ends_a_wait():
    """A rank waits for an epoch the store cannot serve (the other rank never asks);
    ``close()`` from another thread ends the wait with ``ShuffleClosed`` (an
    ``ExchangeClosed``), and so does every call after it."""
    host = hosted(exchange_rank.data_set(), 2, 3, timeout=30.0)
    waiting, idle = connect_all(host.address, 2)
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
    waiting.close()  # from this thread, while the other waits
    waiter.join(10)
    assert time.monotonic() - started < 5
    assert len(outcome) == 1 and isinstance(outcome[0], us.ExchangeClosed), outcome
    assert isinstance(outcome[0], us._native.ShuffleClosed) and "\n" not in str(outcome[0])
    with pytest.raises(us.ExchangeClosed):
        waiting.next_epoch()
    idle.close()
    host.stop()


def _read_forever(store, requests, answers) -> None:
    """A persistent DataLoader-like reader: forked once, it reads the records asked for."""
    while (ids := requests.recv()) is not None:
        answers.send([bytes(store[int(i)]) for i in ids])


def test_a_forked_reader_sees_the_records_of_later_epochs():
    """A reader forked at the first epoch, as DataLoader forks its persistent workers (torch is
    not needed: multiprocessing's fork stands in), reads each later epoch's new records, not
    the zeros of a copy taken at fork."""
    data = exchange_rank.data_set()
    host = hosted(data, 2, 3)
    ex, other = connect_all(host.address, 2)
    drained = threading.Thread(target=lambda: [None for _ in other] and None)
    drained.start()
    with ex:
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
    drained.join(30)
    other.close()
    assert epochs == 4
    host.join(timeout=30)


def test_bad_arguments_are_one_line_errors(monkeypatch):
    monkeypatch.delenv("UBERSHUFFLE_TOKEN", raising=False)
    monkeypatch.delenv("UBERSHUFFLE_TOKEN_FILE", raising=False)
    data = np.zeros((8, 4), dtype=np.uint8)
    with pytest.raises(ValueError, match="no token"):
        us.Exchange.host(data, workers=2, alpha=0.5, epochs=1)
    with pytest.raises(ValueError, match="no token"):
        us.Exchange.connect("127.0.0.1:1")
    with pytest.raises(TypeError, match="must be 2-D uint8"):
        us.Exchange.host(np.zeros(8, dtype=np.uint8), workers=2, alpha=0.5, epochs=1, token=TOKEN)
    with pytest.raises(ValueError, match="at least one record"):
        us.Exchange.host([], workers=2, alpha=0.5, epochs=1, token=TOKEN)
    with pytest.raises(ValueError, match='unknown policy "sideways": the policies are'):
        us.Exchange.host(data, workers=2, alpha=0.5, epochs=1, token=TOKEN, policy="sideways")
    with pytest.raises(ValueError, match="alpha=0.01 cannot hold on 2 ranks"):
        us.Exchange.host(data, workers=2, alpha=0.01, epochs=1, token=TOKEN)
    with pytest.raises(ValueError, match="magic"):
        us.Exchange.host(data, workers=2, alpha=0.5, epochs=1, token=TOKEN, scheme="magic")
    with socket_port() as port:  # closed once bound: nothing listens there
        pass
    with pytest.raises(ConnectionError, match=f"cannot reach the store at 127.0.0.1:{port}: .*is it serving"):
        us.Exchange.connect(f"127.0.0.1:{port}", token=TOKEN, join_timeout=1)
    host = us.Exchange.host(data, workers=2, alpha=0.5, epochs=1, token=TOKEN, join_timeout=2)
    with pytest.raises(ConnectionError, match="refused a training rank.*token") as e:
        us.Exchange.connect(host.address, token="another job's token, as long as the real one")
    assert "\n" not in str(e.value)
    with pytest.raises(RuntimeError, match=r"waited 2 s in vain for training ranks \[0, 1\] to join"):
        host.join(timeout=30)


def rank_process(address: str, rank: int, world: int, *args: str) -> subprocess.Popen:
    env = {"UBERSHUFFLE_TOKEN": TOKEN, "PATH": "/usr/bin:/bin"}
    if "PYTHONPATH" in os.environ:  # a package installed with --target
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return subprocess.Popen(
        [
            sys.executable,
            str(HERE / "exchange_rank.py"),
            address,
            "--rank",
            str(rank),
            "--world",
            str(world),
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def lines_of(proc: subprocess.Popen) -> list:
    out, _ = proc.communicate(timeout=120)
    return [json.loads(line) for line in out.splitlines()]


def test_a_killed_rank_is_named_and_the_restarted_job_resumes_from_its_epoch_and_records(tmp_path):
    """SIGKILL of one rank: the others stop with one line naming it, within the timeout; the
    store waits for the job's next attempt, whose ranks (new processes) resume after the epoch
    they all saved, holding the records they kept in ``store_dir``, and finish; the store
    reads nothing again for the restarted job."""
    timeout, epochs = 2.0, 6
    host = hosted(exchange_rank.data_set(), 3, epochs, timeout=timeout)

    def start(hang: int | None = None, at: int = 0) -> list:
        procs = []
        for r in range(3):
            extra = ["--hang-after", str(hang)] if hang is not None and r == 1 else ["--start", str(at)]
            state = ["--state", str(tmp_path / f"state{r}"), "--store", str(tmp_path / "stores")]
            procs.append(rank_process(host.address, r, 3, *state, *extra))
        return procs

    first = start(hang=2)
    victim = first[1]
    while json.loads(victim.stdout.readline()).get("epoch", -1) < 2:
        pass
    victim.kill()
    killed_at = time.monotonic()
    survivors = [lines_of(first[r]) for r in (0, 2)]
    named_after = time.monotonic() - killed_at
    victim.wait()
    for out in survivors:
        assert out[-1].get("error"), out[-1]
        assert "rank 1" in out[-1]["message"] and "\n" not in out[-1]["message"], out[-1]
        assert all(line["agree"] and line["bytes_ok"] for line in out if "epoch" in line)
    assert named_after < timeout + 5, f"named {named_after:.2f} s after the kill"
    # The job resumes from the checkpoint its ranks share: after the last epoch all of them took.
    saved = min(json.loads((tmp_path / f"state{r}").read_text())["epoch"] for r in range(3))
    assert saved >= 2
    second = [lines_of(p) for p in start(at=saved + 1)]
    for out in second:
        assert out[0]["start"] == saved + 1 and out[0]["held"] > 0, out[0]
        taken = [line["epoch"] for line in out if "epoch" in line]
        assert taken == list(range(out[0]["start"], epochs + 1)), taken
        assert all(line["agree"] and line["bytes_ok"] for line in out if "epoch" in line)
        assert out[-1].get("done")
    host.join(timeout=30)
    attempts = host.attempts()
    assert [a["end"] for a in attempts] == ["failed", "finished"], attempts
    assert "rank 1" in attempts[0]["error"]
    # The store keeps what it read (it reads a record only when it lacks it): every record,
    # read before the failure, and nothing read again for the restarted job.
    assert len(host._store.held()) == exchange_rank.POINTS
    assert sum(e["source_records"] for e in attempts[1]["epochs"]) == 0


def serve_process(cli, records: list, address: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [str(cli), "serve", *records, "--workers", "2", "--alpha", str(exchange_rank.ALPHA),
         "--seed", str(exchange_rank.SEED), "--epochs", "2", "--listen", address, "--json", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={"UBERSHUFFLE_TOKEN": TOKEN},
    )  # fmt: skip


def find_cli_or_skip():
    from conftest import find_cli

    cli = find_cli()
    if cli is None:
        pytest.skip("the ubershuffle binary is not built (cargo build --release -p ubershuffle)")
    return cli


@pytest.mark.parametrize("layout", ["fixed", "folder", "blob"])
def test_ranks_receive_from_ubershuffle_serve(tmp_path, layout):
    """The store in a process of its own: `ubershuffle serve` over a file of records of one
    size, a folder of records of uneven size (sorted as `as_source` sorts them), or a blob of
    them with an index of u64 offsets."""
    cli = find_cli_or_skip()
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
    store = serve_process(cli, records, address)

    def check(ex, s, batch):
        assert np.array_equal(np.sort(s.batch()), batch.ids)
        assert [ex.store[int(i)].tobytes() for i in batch.ids] == [bytes(data[i]) for i in batch.ids]
        return batch.epoch

    results = run_ranks(address, 2, check, policy="global", join_timeout=30)
    out, _ = store.communicate(timeout=60)
    assert store.returncode == 0
    assert all(seen == [0, 1, 2] for seen in results.values())
    (attempt,) = json.loads(out)["attempts"]
    assert attempt["end"] == "finished"
    coded = [e for e in attempt["epochs"] if e["epoch"] in (1, 2)]
    assert all((e["padding_bytes"] > 0) == (layout != "fixed") for e in coded), coded


def test_a_restarted_ubershuffle_serve_reads_nothing_again(tmp_path):
    """`ubershuffle serve --store-dir` SIGKILLed mid-job: the ranks stop naming the store; a new
    `serve` over the same folder serves the restarted ranks without reading a record again."""
    cli = find_cli_or_skip()
    data = exchange_rank.data_set()
    (tmp_path / "data.bin").write_bytes(data.tobytes())
    records = ["--records", str(tmp_path / "data.bin"), "--record-size", str(exchange_rank.WIDTH)]
    keep = ["--store-dir", str(tmp_path / "store"), "--timeout", "2"]
    with socket_port() as port:
        address = f"127.0.0.1:{port}"
    store = serve_process(cli, records, address, *keep)
    ranks = [
        rank_process(address, r, 2, "--state", str(tmp_path / f"state{r}"), "--hang-after", "1")
        for r in range(2)
    ]
    for r in ranks:
        while json.loads(r.stdout.readline()).get("epoch", -1) < 1:
            pass
    store.send_signal(signal.SIGKILL)
    store.wait()
    for r in ranks:
        r.kill()
        r.wait()
    store = serve_process(cli, records, address, *keep)
    saved = min(json.loads((tmp_path / f"state{r}").read_text())["epoch"] for r in range(2))
    ranks = [rank_process(address, r, 2, "--start", str(saved + 1)) for r in range(2)]
    for r in ranks:
        out = lines_of(r)
        assert out[0]["start"] == saved + 1 and out[-1].get("done"), out
        assert all(line["agree"] and line["bytes_ok"] for line in out if "epoch" in line)
    out, _ = store.communicate(timeout=60)
    assert store.returncode == 0
    (attempt,) = json.loads(out)["attempts"]
    assert attempt["end"] == "finished"
    assert sum(e["source_records"] for e in attempt["epochs"]) == 0, "the kept store read nothing again"


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
