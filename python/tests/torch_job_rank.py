"""One rank of a ShuffleGroup job as a real training job runs it, from test_torch_job.py.

Usage: torchrun ... torch_job_rank.py OUT_DIR scenario=NAME [key=value ...] (or started by the
test's own launcher, with torchrun's environment). Every rank writes OUT_DIR/rank-R.json. The
scenarios:

- ``long``: epochs that train ``train`` seconds each (sleeping beside a DataLoader over
  ``sg.dataset()`` with persistent workers) under a short ``timeout``;
- ``groups``: a training and a validation ShuffleGroup, then ``new_group`` over all ranks and
  a collective on it, as the job or a library does after them;
- ``mismatch``: rank 1 is given another ``seed`` (``what=seed``) or records of the same sizes
  but other bytes (``what=content``): every rank must fail with a one-line error;
- ``resume``: a StatefulDataLoader with workers, checkpointed after every batch; at attempt 0
  rank ``victim`` is SIGKILLed mid-epoch ``kill_epoch``, torchrun restarts the job, and it
  resumes at the batch saved;
- ``die``: rank ``victim`` is SIGKILLed a quarter into epoch 1 (of ``epochs``, 4 by default);
  the others, training on, must name it;
- ``close``: rank 0 closes its group from another thread while its ``set_epoch`` waits on rank
  1, then while a delivery no one asked for is in flight.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pathlib
import signal
import sys
import threading
import time

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset

from ubershuffle.torch import ShuffleGroup, init_process_group
from ubershuffle.torch._state import state_bytes, state_from

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from torch_plane_rank import records, write_atomic, write_log  # noqa: E402


def crc(data: np.ndarray) -> int:
    """A record's checksum: the transform the DataLoader's workers run."""
    return int(hashlib.blake2b(data.tobytes(), digest_size=4).hexdigest(), 16)


class Indexed(Dataset):
    """``(i, dataset[i])``: which record a worker read, beside what ``sg.dataset`` gave."""

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i: int) -> tuple:
        return i, self.dataset[i]


def group_of(opts: dict, data: list, rank: int, **extra) -> ShuffleGroup:
    """The scenario's ShuffleGroup (store mode: rank 0 is the store, the others read no source)."""
    mode = opts.get("mode", "peer")
    kwargs = dict(mode=mode, seed=3, timeout=float(opts.get("timeout", 60)))
    if mode == "store":
        kwargs["alpha"] = 0.5
    else:
        kwargs.update(policy="partial-local", fraction=0.3)
    kwargs.update(extra)
    return ShuffleGroup(data if mode == "peer" or rank == 0 else None, **kwargs)


def loader_of(sg: ShuffleGroup, opts: dict, kind: type = DataLoader) -> DataLoader:
    """A DataLoader over ``sg.dataset(crc)`` with 2 persistent workers (spawned with
    ``spawn=1``)."""
    return kind(
        Indexed(sg.dataset(crc)),
        sampler=sg.sampler,
        batch_size=8,
        num_workers=2,
        persistent_workers=True,
        multiprocessing_context="spawn" if opts.get("spawn") else None,
    )


def take(entry: dict, batch: tuple, sums: dict) -> None:
    """Adds a batch's indices to ``entry["served"]`` and those with wrong bytes to ``bad``."""
    ids, checks = batch
    for i, c in zip(ids.tolist(), checks.tolist()):
        entry["served"].append(i)
        if c != sums[i]:
            entry["bad"].append(i)


def long_epochs(sg: ShuffleGroup, opts: dict, sums: dict, log: dict, path: pathlib.Path) -> None:
    """The last rank trains ``train`` seconds per epoch, the others one: with no barrier of the
    job's own, the others' plane waits on it (and the store waits for its requests) far
    longer than ``timeout``."""
    if sg.is_store:
        log["served"] = sg.serve()
        return
    loader = loader_of(sg, opts)
    train = float(opts["train"]) if dist.get_rank() == dist.get_world_size() - 1 else 1.0
    for epoch in range(int(opts.get("epochs", 3))):
        sg.set_epoch(epoch)
        start = time.monotonic()
        entry = log["epochs"][str(epoch)] = {"served": [], "bad": []}
        for batch in loader:
            take(entry, batch, sums)
        time.sleep(max(0.0, train - (time.monotonic() - start)))
        log.setdefault("figures", {})[str(epoch)] = sg.figures(epoch)
        write_log(path, log)
    # The job's own end (a last checkpoint, the ranks together), then every rank closes.
    dist.barrier(group=sg.train_group)
    sg.close()


def groups(opts: dict, rank: int, log: dict) -> None:
    """A training and a validation group, each checked as a job checks its data (every index
    of every epoch served once across the ranks, every record's bytes), the store serving both
    on threads whose errors are logged; then new groups over all ranks."""
    sets = {"train": records(400, 1), "valid": records(150, 2)}
    made = {
        "train": group_of(opts, sets["train"], rank),
        "valid": group_of(opts, sets["valid"], rank, seed=4),
    }
    errors: list = []

    def serve(sg: ShuffleGroup) -> None:
        try:
            sg.serve()
        except BaseException as e:  # noqa: BLE001 (the test reads it from the log)
            errors.append(f"{type(e).__name__}: {e}")

    servers = [threading.Thread(target=serve, args=(sg,)) for sg in made.values() if sg.is_store]
    for thread in servers:
        thread.start()
    if not made["train"].is_store:
        for name, sg in made.items():
            sums = {i: crc(np.frombuffer(r, dtype=np.uint8)) for i, r in enumerate(sets[name])}
            for epoch in range(2):
                sg.set_epoch(epoch)
                entry = log.setdefault(name, {})[str(epoch)] = {"served": [], "bad": []}
                for i in sg.sampler:
                    entry["served"].append(int(i))
                    if crc(sg[i]) != sums[i]:
                        entry["bad"].append(int(i))
    everyone = list(range(dist.get_world_size()))
    total = torch.ones(1)
    dist.all_reduce(total, group=dist.new_group(everyone))
    log["new_group_sum"] = float(total[0])
    dist.all_reduce(total, group=dist.new_group(everyone, use_local_synchronization=True))
    log["library_group_sum"] = float(total[0])
    if not made["train"].is_store:
        for sg in made.values():
            sg.close()
    for thread in servers:
        thread.join()
    log["serve_errors"] = errors


def resume(sg: ShuffleGroup, opts: dict, sums: dict, log: dict, out: pathlib.Path, rank: int) -> None:
    """Exact mid-epoch resume through StatefulDataLoader: every rank saves its loader's state
    and the group's state (as of the epoch's start) after every batch, in step with the others."""
    if sg.is_store:
        log["served"] = len(sg.serve())
        return
    from torchdata.stateful_dataloader import StatefulDataLoader

    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    mine = out / f"checkpoint-{rank}.json"
    loader = loader_of(sg, opts, StatefulDataLoader)
    saved = state_from(mine.read_bytes()) if mine.exists() else None
    first = 0
    if saved is not None:
        sg.load_state_dict(saved["group"])
        first = saved["epoch"]
        log["resumed_at"] = [saved["epoch"], saved["served"]]
    for epoch in range(first, int(opts.get("epochs", 3))):
        sg.set_epoch(epoch)
        group_state = sg.state_dict()
        entry = log["epochs"].setdefault(str(epoch), {"served": [], "bad": []})
        if saved is not None:
            loader.load_state_dict(saved["loader"])
            entry["served"] = entry["served"][: saved["served"]]
            saved = None
        for k, batch in enumerate(loader):
            take(entry, batch, sums)
            dist.barrier(group=sg.train_group)  # every rank has batch k: save in step
            write_log(out / f"rank-{rank}.json", log)
            state = {"epoch": epoch, "group": group_state, "served": len(entry["served"])}
            state["loader"] = loader.state_dict()
            write_atomic(mine, state_bytes(state).decode())
            dist.barrier(group=sg.train_group)
            if attempt == 0 and epoch == int(opts["kill_epoch"]) and k == 3 and rank == int(opts["victim"]):
                os.kill(os.getpid(), signal.SIGKILL)  # mid-epoch; torchrun restarts the job
        write_log(out / f"rank-{rank}.json", log)
    sg.close()


class Noticed(logging.Handler):
    """Notes when and what the plane first logged as an error (a rank it watches died)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.first: tuple | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.first is None:
            self.first = (time.time(), record.getMessage())


def die(sg: ShuffleGroup, opts: dict, log: dict, out: pathlib.Path, rank: int) -> None:
    """Rank ``victim`` is SIGKILLed while the others train epoch 1; each of the others logs
    when and how its plane named it (the watch's log, or a wait or set_epoch that raised)."""
    noticed = Noticed()
    logging.getLogger("ubershuffle.torch").addHandler(noticed)
    victim, train, epochs = int(opts["victim"]), float(opts["train"]), int(opts.get("epochs", 4))
    write_atomic(out / f"pid-{rank}", str(os.getpid()))
    try:
        if sg.is_store:
            sg.serve()
        else:
            for epoch in range(epochs):
                sg.set_epoch(epoch)
                if epoch == 1 and rank == victim:
                    time.sleep(train / 4)
                    # The engine beats on its connections at least every period before this.
                    write_atomic(out / "last_beat", repr(("kill", time.time())))
                    os.kill(os.getpid(), signal.SIGKILL)
                time.sleep(train)  # training, with no collective that would fail on its own
    except Exception as e:  # noqa: BLE001 (what the plane raised is the point)
        log["raised"] = [time.time(), f"{type(e).__name__}: {e}"]
    if noticed.first is not None:
        log["logged"] = list(noticed.first)
    write_log(out / f"rank-{rank}.json", log)
    os._exit(0)  # the plane's group is broken: end without tearing it down


def close_from_a_thread(opts: dict, data: list, rank: int, log: dict, out: pathlib.Path) -> None:
    """Rank 0 closes its group from another thread (1) while its set_epoch waits on rank 1,
    (2) while the delivery of an epoch no one asked for waits on a stopped rank 1."""
    sg = group_of(opts, data, rank)
    if rank == 1:
        time.sleep(3)  # late to its first epoch
        try:
            sg.set_epoch(0)  # its own batch comes from the source: it needs nothing of rank 0
            sg.set_epoch(1)  # the delivery from rank 0 does
            log["second_rank"] = "set_epoch returned"
        except Exception as e:  # noqa: BLE001 (rank 0 closed: what does rank 1 hear?)
            log["second_rank"] = f"{type(e).__name__}: {e}"
        sg.close()
    else:
        timer = threading.Timer(1.0, sg.close)
        timer.start()
        try:
            sg.set_epoch(0)
            log["set_epoch"] = "returned"
        except Exception as e:  # noqa: BLE001
            log["set_epoch"] = f"{type(e).__name__}: {e}"
        log["set_epoch_after_close"] = time.monotonic()
        timer.join()
        for probe, call in (("getitem", lambda: sg[0]), ("contains", lambda: 0 in sg)):
            try:
                call()
                log[probe] = "returned"
            except RuntimeError as e:
                log[probe] = str(e)
    dist.barrier()
    # (2) A delivery in flight: rank 1 stops (SIGSTOP) right after epoch 0, so rank 0's
    # delivery of epoch 1 (every record changes rank, in many small rounds) cannot end; rank 0
    # closes and must not wait for it.
    sg = group_of(opts, records(400, 1, 16), rank, policy="global", fraction=None, round_bytes=16384)
    sg.set_epoch(0)
    write_atomic(out / f"pid-{rank}", str(os.getpid()))
    dist.barrier()
    if rank == 1:
        os.kill(os.getpid(), signal.SIGSTOP)
        try:
            sg.set_epoch(1)
            log["after_stop"] = "set_epoch returned"
        except Exception as e:  # noqa: BLE001
            log["after_stop"] = f"{type(e).__name__}: {e}"
    else:
        time.sleep(0.5)
        log["in_flight"] = sg._delivery_in_flight()
        start = time.monotonic()
        sg.close()
        log["close_seconds"] = time.monotonic() - start
        os.kill(int((out / "pid-1").read_text()), signal.SIGCONT)
    write_log(out / f"rank-{rank}.json", log)
    os._exit(0)


def main() -> None:
    out = pathlib.Path(sys.argv[1])
    opts = dict(a.split("=", 1) for a in sys.argv[2:])
    init_process_group("gloo")
    rank = dist.get_rank()
    path = out / f"rank-{rank}.json"
    data = records(400, 1)
    sums = {i: crc(np.frombuffer(r, dtype=np.uint8)) for i, r in enumerate(data)}
    log: dict = json.loads(path.read_text()) if path.exists() else {"epochs": {}}
    scenario = opts["scenario"]
    if scenario == "groups":
        groups(opts, rank, log)
    elif scenario == "close":
        close_from_a_thread(opts, data, rank, log, out)
    elif scenario == "mismatch":
        extra: dict = {}
        if rank == 1 and opts["what"] == "seed":
            extra["seed"] = 4
        if rank == 1 and opts["what"] == "content":
            data = [hashlib.shake_128(r + b"other").digest(len(r)) for r in data]
        try:
            group_of(opts, data, rank, **extra).close()
            log["error"] = None
        except ValueError as e:
            log["error"] = str(e)
    else:
        sg = group_of(opts, data, rank)
        if scenario == "long":
            long_epochs(sg, opts, sums, log, path)
        elif scenario == "resume":
            resume(sg, opts, sums, log, out, rank)
        elif scenario == "die":
            die(sg, opts, log, out, rank)
    write_log(path, log)
    dist.destroy_process_group()


if __name__ == "__main__":
    torch.set_num_threads(1)
    if os.environ.get("UBS_DUMP_AFTER"):
        import faulthandler

        dump = open(pathlib.Path(sys.argv[1]) / f"dump-{os.environ.get('RANK', '0')}.txt", "w")  # noqa: SIM115
        faulthandler.dump_traceback_later(float(os.environ["UBS_DUMP_AFTER"]), file=dump)
    main()
