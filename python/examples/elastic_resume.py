"""Resuming on a different world size: a job of 4 ranks is interrupted mid-epoch and
continues on 3 ranks. The samples of the interrupted epoch that no rank served yet are
served exactly once by the 3 ranks; the next epochs continue the chain over 3 ranks.

Run: python python/examples/elastic_resume.py
"""

from collections import Counter

from ubershuffle import CodedShuffleSampler

N = 10_000
# extra_cache: the share of the samples outside its batch a rank also caches, on any number of
# ranks (alpha=0.4 caches as much on 4 ranks, but would be refused once a resume brings 2)
old = [CodedShuffleSampler(N, num_replicas=4, rank=r, seed=1, extra_cache=0.2) for r in range(4)]
for s in old:
    s.set_epoch(5)
served = Counter()
for s in old:
    it = iter(s)
    served.update(next(it) for _ in range(1000))  # every rank served 1000 samples, then the job stopped
state = old[0].state_dict()  # ranks advance in step: any one rank's state suffices

new = [CodedShuffleSampler(N, num_replicas=3, rank=r) for r in range(3)]
for s in new:
    s.load_state_dict(state)
    s.set_epoch(5)
rest = Counter()
for s in new:
    rest.update(list(s)[: len(s.batch())])  # what follows len(batch()) is padding
print(
    f"served before: {sum(served.values())}, after: {sum(rest.values())}, total distinct {len(served | rest)}"
)
assert len(served | rest) == N and all(c == 1 for c in (served + rest).values())
print("epoch 5 finished on 3 ranks:", new[0].plan_summary()["kind"])
for s in new:
    s.set_epoch(6)
print("epoch 6 on 3 ranks:", new[0].plan_summary())  # a new chain: one epoch without coding gain
for s in new:
    s.set_epoch(7)
print("epoch 7 on 3 ranks:", {k: v for k, v in new[0].plan_summary().items() if k != "epoch"})
