"""A torch DDP training run on CPU (gloo backend) with CodedShuffleSampler in place of
DistributedSampler (CI runs it; torch is installed there for ubershuffle.torch's tests):

    pip install torch --index-url https://download.pytorch.org/whl/cpu
    python python/examples/ddp_gloo.py --world 2 --epochs 3

Each process builds the sampler without num_replicas/rank: they come from the initialised
process group. The script checks that the ranks together saw every sample exactly once per
epoch (before padding), then saves the sampler's state mid-epoch and resumes from it.
"""

import argparse
import os
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, TensorDataset

from ubershuffle import CodedShuffleSampler


def worker(rank: int, world: int, epochs: int, port: int, out_dir: str) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    n = 2000
    x = torch.randn(n, 8)
    y = x @ torch.arange(1.0, 9.0) + 0.01 * torch.randn(n)
    data = TensorDataset(torch.arange(n), x, y)
    # Ranks from torch.distributed; extra_cache holds on any --world (alpha=0.5 would not past 2)
    sampler = CodedShuffleSampler(data, seed=3, extra_cache=0.2, scheme="coded")
    loader = DataLoader(data, batch_size=50, sampler=sampler)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        seen = []
        for idx, xb, yb in loader:
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(xb).squeeze(1), yb)
            loss.backward()
            opt.step()
            seen.append(idx)
        seen = torch.cat(seen)[: len(sampler.batch())]  # without padding
        sizes = [torch.zeros(1, dtype=torch.long) for _ in range(world)]
        dist.all_gather(sizes, torch.tensor([len(seen)]))
        padded = torch.full((int(max(s.item() for s in sizes)),), -1, dtype=torch.long)
        padded[: len(seen)] = seen
        gathered = [torch.zeros_like(padded) for _ in range(world)]
        dist.all_gather(gathered, padded)
        if rank == 0:
            allseen = torch.cat(gathered)
            allseen = allseen[allseen >= 0]
            assert sorted(allseen.tolist()) == list(range(n)), "every sample exactly once"
            s = sampler.plan_summary()
            print(
                f"epoch {epoch}: loss {loss.item():.4f}; coded delivery {s['transmissions']} "
                f"vs {s['uncoded_transmissions']} uncoded ({s['kind']})"
            )
    # Mid-epoch checkpoint and resume of the sampler.
    sampler.set_epoch(epochs)
    it = iter(sampler)
    first = [next(it) for _ in range(100)]
    torch.save(sampler.state_dict(), os.path.join(out_dir, f"sampler{rank}.pt"))
    resumed = CodedShuffleSampler(data)
    resumed.load_state_dict(torch.load(os.path.join(out_dir, f"sampler{rank}.pt"), weights_only=True))
    assert first + list(resumed) == sampler.indices().tolist()
    if rank == 0:
        print("resumed mid-epoch: the rest of the epoch, exactly")
    # DDP holds the process group: let it go first, so that the group (and gloo's threads) ends
    # here rather than at the interpreter's exit.
    del model, opt
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--port", type=int, default=29517)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as out:
        mp.spawn(worker, args=(args.world, args.epochs, args.port, out), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()
