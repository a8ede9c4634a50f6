"""Planning in a notebook-sized script: compare schemes on one seeded instance, look at the
packets, verify a plan, and plan a few epochs of partial-local shuffling.

Run: python python/examples/plan_notebook.py
"""

import ubershuffle

# Every scheme the package knows (as `ubershuffle schemes --json`).
for s in ubershuffle.schemes():
    print(f"{s['name']:>22}  {s['description']}")

# One epoch of 20 workers, 100 000 points, each caching 40 % (as `ubershuffle plan ... --json`).
for scheme in ["uncoded", "coded", "ubershuffle", "auto"]:
    r = ubershuffle.plan(20, 100_000, 0.4, scheme, seed=1, time_budget=2)
    print(
        f"{scheme:>12}: {r.transmissions:>6} transmissions ({r.made_by}), uncoded {r.uncoded_transmissions}, "
        f"lower bound {r.lower_bound} ({r.lower_bound_kind}), planned in {r.plan_seconds:.2f} s"
    )

# The packets are numpy arrays: transmission t XORs packet_points[offsets[t]:offsets[t+1]].
r = ubershuffle.plan(4, 40, 0.5, "coded", seed=3)
print("first packets as (point, worker) pairs:", r.packets()[:3])

# A hand-made instance: caches and assignment as lists (or numpy arrays), then verify.
caches = [[1, 2, 3, 7], [5, 6, 7, 8], [0, 2, 3, 4]]
assignment = [[2, 4, 7], [0, 3, 8], [1, 5, 6]]
r = ubershuffle.plan_instance(caches, assignment, "ubershuffle")
print(
    "paper example:",
    r.transmissions,
    "transmissions; verified:",
    ubershuffle.verify(caches, assignment, r).valid,
)
print("lower bound:", ubershuffle.lower_bound(caches, assignment))

# Partitioned data, exchanging 30 % per epoch (as `ubershuffle plan --policy ... --epochs 5 --json`).
for e in ubershuffle.plan_epochs(
    8, 8000, policy="partial-local", fraction=0.3, alpha=0.25, scheme="coded", epochs=5
):
    print(e)
