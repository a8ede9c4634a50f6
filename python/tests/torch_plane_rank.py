"""One rank of a ShuffleGroup job, run by torchrun from test_torch_plane.py.

Usage: torchrun ... torch_plane_rank.py OUT_DIR [key=value ...]. Every rank writes
OUT_DIR/rank-R.json: per epoch, the indices it served and a checksum of the bytes it read
(through sg[i] in this process and in DataLoader worker processes), and the epoch's figures.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import pathlib
import signal
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset

from ubershuffle.sources import RecordSource
from ubershuffle.torch import ShuffleGroup, init_process_group
from ubershuffle.torch._state import state_bytes, state_from


def records(count: int, seed: int, scale: int = 1) -> list:
    """Records of uneven size (lognormal-ish, 0 bytes to a few KiB, times ``scale``), each a
    function of its index so any process can check one."""
    rng = np.random.default_rng(seed)
    sizes = np.minimum(rng.lognormal(6.5, 0.8, count).astype(np.int64), 20000) * scale
    sizes[::97] = 0
    return [expected(i, int(s)) for i, s in enumerate(sizes)]


def expected(i: int, size: int) -> bytes:
    return hashlib.shake_128(f"record {i}".encode()).digest(size) if size else b""


class Checked(Dataset):
    """Reads sg[i] and returns (i, crc of the bytes) — in DataLoader worker processes too."""

    def __init__(self, sg: ShuffleGroup) -> None:
        self.sg = sg

    def __len__(self) -> int:
        return len(self.sg)

    def __getitem__(self, i: int) -> tuple:
        data = self.sg[i]
        return i, int(hashlib.blake2b(data.tobytes(), digest_size=4).hexdigest(), 16)


def write_atomic(path: pathlib.Path, text: str) -> None:
    """Writes ``path`` whole or not at all (torchrun may kill this rank at any moment)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_log(path: pathlib.Path, log: dict) -> None:
    """This rank's log, written atomically."""
    write_atomic(path, json.dumps(log))


def main() -> None:
    out = pathlib.Path(sys.argv[1])
    opts = dict(a.split("=", 1) for a in sys.argv[2:])
    backend = opts.get("backend", "gloo")
    init_process_group(backend)
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    count = int(opts.get("records", 400))
    data = records(count, 1, int(opts.get("scale", 1)))
    sums = {i: int(hashlib.blake2b(r, digest_size=4).hexdigest(), 16) for i, r in enumerate(data)}
    epochs = int(opts.get("epochs", 3))
    kwargs = dict(mode=opts.get("mode", "peer"), seed=3, timeout=float(opts.get("timeout", 60)))
    if opts.get("policy"):
        kwargs["policy"] = opts["policy"]
    if opts.get("fraction"):
        kwargs["fraction"] = float(opts["fraction"])
    if opts.get("alpha"):
        kwargs["alpha"] = float(opts["alpha"])
    if opts.get("scheme"):
        kwargs["scheme"] = opts["scheme"]
    if opts.get("store_dir"):
        kwargs["store_dir"] = opts["store_dir"]
    if opts.get("round_bytes"):
        kwargs["round_bytes"] = int(opts["round_bytes"])
    if opts.get("segment_bytes"):
        kwargs["segment_bytes"] = int(opts["segment_bytes"])
    if opts.get("ddp"):
        kwargs["yield_to_gradients"] = opts["ddp"] == "yield"
    source = data
    if opts.get("source") in ("files", "blob"):
        # The records on disk, a copy per rank: a folder of files, or one blob and its offsets
        # (sources the engine reads itself, off the GIL).
        folder = out / f"source-{dist.get_rank()}"
        folder.mkdir(parents=True, exist_ok=True)
        if opts["source"] == "files":
            for i, r in enumerate(data):
                (folder / f"{i:06d}.bin").write_bytes(r)
            source = folder
        else:
            (folder / "blob").write_bytes(b"".join(data))
            offsets = [0, *itertools.accumulate(len(r) for r in data)]
            source = RecordSource.from_blob(folder / "blob", offsets)
    if kwargs["mode"] == "store" and dist.get_rank() != 0:
        source = None  # the training ranks learn the index from the store
    rank = dist.get_rank()
    log_path = out / f"rank-{rank}.json"
    try:
        sg = ShuffleGroup(source, **kwargs)
    except OSError as e:
        # No room for the rank's store (a small /dev/shm): the one-line error, and exit 1.
        write_log(log_path, {"error": str(e)})
        sys.stdout.flush()
        os._exit(1)  # at once: torchrun ends the job when the first rank exits
    checkpoint = out / "checkpoint.json"
    log: dict = {"epochs": {}, "figures": {}}
    first = 0
    restarted = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    if opts.get("resume") and checkpoint.exists():
        saved = json.loads(checkpoint.read_text())
        sg.load_state_dict(state_from(json.dumps(saved["state"]).encode()))
        first = saved["epoch"]
        if log_path.exists():
            log = json.loads(log_path.read_text())
            log["epochs"] = {e: v for e, v in log["epochs"].items() if int(e) < first}
    if sg.is_store:
        log["held_at_start"] = len(sg.held())
        served = sg.serve()
        log["served"] = [{k: v for k, v in f.items()} for f in served]
        write_log(log_path, log)
        return
    # Worker processes forked (the default) or spawned (the group is pickled into them as a
    # reader of the rank's store), persistent: they must read each epoch's records.
    context = "spawn" if opts.get("spawn") else None
    loader = DataLoader(
        Checked(sg),
        sampler=sg.sampler,
        batch_size=16,
        num_workers=2,
        persistent_workers=True,
        multiprocessing_context=context,
    )
    # With ddp=yield or ddp=flight every batch is a DDP step whose all-reduce the plane's hook
    # times (and, yielding, waits for).
    model = opt = None
    if opts.get("ddp"):
        torch.manual_seed(0)
        width = int(opts.get("width", 64))
        layer = torch.nn.Linear(width, width)
        model = sg.yield_to(DistributedDataParallel(layer, process_group=sg.train_group))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
    kill_at = int(opts.get("kill_at", -1))
    stall = int(opts.get("stall", -1))
    write_atomic(out / f"pid-{rank}", str(os.getpid()))
    for epoch in range(first, epochs):
        try:
            sg.set_epoch(epoch)
        except TimeoutError as e:
            # A rank stopped answering (the stall scenario): say who noticed what, end it.
            log["timeout"] = str(e)
            log["timeout_at"] = time.time()
            write_log(log_path, log)
            os.kill(int((out / f"pid-{stall}").read_text()), signal.SIGKILL)
            os._exit(3)
        if epoch == 0 and rank == stall:
            write_atomic(out / "stopped_at", repr(time.time()))
            os.kill(os.getpid(), signal.SIGSTOP)  # frozen, its delivery thread too
        sg.sampler.set_epoch(epoch)
        # ddp: the epoch's first steps come at once, as the next epoch's delivery (set_epoch
        # started it) begins, so that a plane not yielding posts beside their all-reduces
        # however fast the rest of the delivery goes.
        for _ in range(int(opts.get("first_steps", 0)) if model is not None else 0):
            opt.zero_grad()
            model(torch.ones(16, width)).square().mean().backward()
            opt.step()
        # The bytes of the epoch's batch as they arrived (the ids and every byte).
        digest = hashlib.blake2b(digest_size=16)
        for i in sg.sampler.batch():
            digest.update(int(i).to_bytes(8, "little") + sg[int(i)].tobytes())
        batch = digest.hexdigest()
        if kill_at == epoch and restarted == 0:
            if rank == 1:
                os._exit(17)  # a rank dies at the start of an epoch; torchrun restarts the job
            dist.barrier(group=sg.train_group)  # the others wait here until torchrun stops them
        served, bad = [], []
        for ids, crcs in loader:
            for i, c in zip(ids.tolist(), crcs.tolist()):
                served.append(i)
                if c != sums[i]:
                    bad.append(i)
            if model is not None:
                opt.zero_grad()
                model(torch.ones(len(ids), width)).square().mean().backward()
                opt.step()
        for i in sg.held():
            if sg[int(i)].tobytes() != data[i]:
                bad.append(int(i))
        log["epochs"][str(epoch)] = {"served": served, "bad": bad, "batch": batch}
        log["figures"][str(epoch)] = sg.figures(epoch)
        write_log(log_path, log)
        if opts.get("save_each") and rank == sg._trainers[0]:
            state = json.loads(state_bytes(sg.state_dict()))
            write_atomic(checkpoint, json.dumps({"epoch": epoch + 1, "state": state}))
        if stall < 0:
            dist.barrier(group=sg.train_group)
    log["held"] = len(sg.held())
    write_log(log_path, log)
    if model is not None:
        sg.wait_delivery()
    sg.close()
    if model is not None:
        # The last epoch's all-reduces are counted with the delivery that ran behind it.
        log["figures"][str(epochs)] = sg.figures(epochs)
        write_log(log_path, log)
    dist.destroy_process_group()


if __name__ == "__main__":
    torch.set_num_threads(1)
    if os.environ.get("UBS_DUMP_AFTER"):
        import faulthandler

        faulthandler.dump_traceback_later(float(os.environ["UBS_DUMP_AFTER"]), exit=True)
    main()
