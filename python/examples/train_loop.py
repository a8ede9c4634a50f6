"""The sampler in a training loop (numpy only, no torch): linear regression by SGD over 4
simulated data-parallel ranks, with a checkpoint of the sampler's state mid-epoch and a
resume that serves exactly the remaining samples.

Run: python python/examples/train_loop.py
"""

import pickle

import numpy as np

from ubershuffle import CodedShuffleSampler

rng = np.random.default_rng(0)
N, D, WORLD, BATCH = 20_000, 10, 4, 32
X = rng.normal(size=(N, D))
w_true = rng.normal(size=D)
y = X @ w_true + 0.01 * rng.normal(size=N)

# One sampler per rank (in a real job: one per process, num_replicas/rank from torch.distributed).
samplers = [
    CodedShuffleSampler(N, num_replicas=WORLD, rank=r, seed=7, alpha=0.4, scheme="coded")
    for r in range(WORLD)
]
w = np.zeros(D)
checkpoint = None
for epoch in range(3):
    for s in samplers:
        s.set_epoch(epoch)
    summary = samplers[0].plan_summary()  # planned only because we ask
    needs = sum(len(s.needs()) for s in samplers)
    print(
        f"epoch {epoch}: ranks receive {needs} samples; coded delivery {summary['transmissions']} "
        f"transmissions vs {summary['uncoded_transmissions']} uncoded ({summary['kind']})"
    )
    iters = [iter(s) for s in samplers]
    for step in range(len(samplers[0]) // BATCH):
        grads = []
        for it in iters:  # every rank takes a batch of its own indices
            idx = np.fromiter((next(it) for _ in range(BATCH)), dtype=np.int64, count=BATCH)
            grads.append(X[idx].T @ (X[idx] @ w - y[idx]) / BATCH)
        w -= 0.05 * np.mean(grads, axis=0)  # all-reduce
        if epoch == 1 and step == 40:
            checkpoint = pickle.dumps(samplers[0].state_dict())  # any rank's state suffices
    print(f"  loss {np.mean((X @ w - y) ** 2):.5f}")

# Resume at step 40 of epoch 1: every rank continues exactly where it stopped.
state = pickle.loads(checkpoint)
resumed = [CodedShuffleSampler(N, num_replicas=WORLD, rank=r) for r in range(WORLD)]
for s in resumed:
    s.load_state_dict(state)
    s.set_epoch(state["epoch"])  # the loop calls it again: the position is kept
left = len(list(resumed[0]))
print(f"resumed at epoch {state['epoch']}, position {state['position']}: {left} samples left on rank 0")
