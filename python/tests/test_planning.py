"""Planning from Python gives the command line's numbers; bad input raises one-line errors."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from conftest import find_plugin

import ubershuffle as us

# The UberShuffle paper's running example (n = 3, q = 9), as ShuffleInstance::paper_example.
PAPER_CACHE = [[1, 2, 3, 7], [5, 6, 7, 8], [0, 2, 3, 4]]
PAPER_ASSIGNMENT = [[2, 4, 7], [0, 3, 8], [1, 5, 6]]

COUNTS = [
    "transmissions",
    "uncoded_transmissions",
    "lower_bound",
    "lower_bound_kind",
    "verified",
    "cache_size",
]

# `ubershuffle plan -n 8 -q 4000 -a 0.4 --scheme coded --seed 1 --json`, recorded.
KNOWN_CODED = {"transmissions": 1083, "uncoded_transmissions": 2427, "lower_bound": 730, "cache_size": 1600}


def test_import_does_not_import_torch():
    code = "import sys, ubershuffle; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_help_shows_docstrings():
    for f in (us.plan, us.plan_epochs, us.plan_instance, us.verify, us.lower_bound, us.schemes):
        assert f.__doc__ and len(f.__doc__.strip()) > 40, f.__name__
    assert "DistributedSampler" in us.CodedShuffleSampler.__doc__


def test_known_cli_output_without_the_binary():
    r = us.plan(8, 4000, 0.4, "coded", seed=1)
    assert {k: getattr(r, k) for k in KNOWN_CODED} == KNOWN_CODED
    assert r.verified and r.made_by == "coded"


# `ubershuffle plan --policy partial-local --fraction 0.3 --scheme coded -n 6 -q 1200 --epochs 3
# --seed 7 --json`'s per_epoch, recorded (the epoch chain of core's EpochChain).
KNOWN_EPOCHS = [
    (1, 360, 360, 202, 360),
    (2, 360, 360, 205, 360),
    (3, 360, 360, 206, 360),
]


def test_known_cli_epochs_without_the_binary():
    got = us.plan_epochs(
        6, 1200, policy="partial-local", fraction=0.3, alpha=None, scheme="coded", epochs=3, seed=7
    )
    keys = ["epoch", "points_exchanged", "points_moved", "transmissions", "uncoded_transmissions"]
    assert [tuple(e[k] for k in keys) for e in got] == KNOWN_EPOCHS
    assert all(e["verified"] for e in got)


def test_schemes_match_the_cli(cli):
    assert us.schemes() == cli("schemes", "--json")


@pytest.mark.parametrize(
    "scheme,n,q,alpha,seed",
    [
        ("coded", 8, 4000, 0.4, 1),
        ("ubershuffle", 5, 1000, 0.5, 3),
        ("ubershuffle-opt", 6, 2000, 0.3, 0),
        ("clique-cover", 40, 4000, 0.2, 2),
        ("auto", 10, 3000, 0.35, 4),
        ("uncoded", 3, 300, 0.5, 5),
        ("cycle-packing", 6, 600, None, 3),
        ("pliable-greedy", 10, 2000, 0.3, 1),
    ],
)
def test_plan_matches_the_cli(cli, scheme, n, q, alpha, seed):
    args = ["plan", "--scheme", scheme, "-n", str(n), "-q", str(q), "--seed", str(seed), "--json"]
    if alpha is not None:
        args += ["-a", str(alpha)]
    want = cli(*args)
    got = us.plan(n, q, alpha, scheme, seed=seed)
    assert {k: getattr(got, k) for k in COUNTS} == {k: want[k] for k in COUNTS}
    assert got.made_by == want.get("auto_winner", want.get("made_by", want["scheme"]))
    assert got.parts == want["parts"]


def packets_of_arrays(r) -> list:
    """``r``'s packets rebuilt from its numpy arrays: packet ``t`` is the (point, worker) pairs
    between ``packet_offsets[t]`` and ``packet_offsets[t + 1]``."""
    off, points, workers = r.packet_offsets, r.packet_points, r.packet_workers
    return [
        [(int(p), int(w)) for p, w in zip(points[off[t] : off[t + 1]], workers[off[t] : off[t + 1]])]
        for t in range(len(off) - 1)
    ]


def test_plan_packets_are_numpy_and_verify():
    """The arrays and ``packets()`` are the same plan, and it was verified."""
    r = us.plan(6, 600, 0.5, "ubershuffle", seed=2)
    assert r.packet_offsets.dtype == np.int64 and len(r.packet_offsets) == r.transmissions + 1
    assert r.packet_offsets[0] == 0 and r.packet_offsets[-1] == r.parts
    assert len(r.packet_points) == len(r.packet_workers) == r.parts
    assert r.packets() == packets_of_arrays(r)
    assert len(r.packets()) == r.transmissions and r.verified
    paper = us.plan_instance(PAPER_CACHE, PAPER_ASSIGNMENT, "ubershuffle")
    assert paper.packets() == packets_of_arrays(paper)


@pytest.mark.parametrize(
    "policy,fraction,alpha,scheme",
    [
        ("partial-local", 0.3, None, "coded"),
        ("global", None, 0.4, "ubershuffle"),
        ("local", None, None, "auto"),
    ],
)
def test_plan_epochs_matches_the_cli(cli, policy, fraction, alpha, scheme):
    args = ["plan", "--policy", policy, "--scheme", scheme, "-n", "6", "-q", "1200", "--epochs", "4"]
    args += ["--seed", "7", "--json"]
    if fraction is not None:
        args += ["--fraction", str(fraction)]
    if alpha is not None:
        args += ["-a", str(alpha)]
    want = cli(*args)["per_epoch"]
    got = us.plan_epochs(
        6, 1200, policy=policy, fraction=fraction, alpha=alpha, scheme=scheme, epochs=4, seed=7
    )
    assert got == want


def test_plan_instance_on_the_paper_example():
    counts = {
        s: us.plan_instance(PAPER_CACHE, PAPER_ASSIGNMENT, s).transmissions for s in ("uncoded", "coded")
    }
    assert counts == {"uncoded": 6, "coded": 4}
    arrays = [np.array(c, dtype=np.int32) for c in PAPER_CACHE]
    r = us.plan_instance(arrays, np.array(PAPER_ASSIGNMENT), "ubershuffle")
    assert r.transmissions == 3 and r.verified
    assert us.verify(PAPER_CACHE, PAPER_ASSIGNMENT, r).valid
    assert us.verify(PAPER_CACHE, PAPER_ASSIGNMENT, r.packets()).valid


def test_verify_reports_what_is_missing():
    v = us.verify(PAPER_CACHE, PAPER_ASSIGNMENT, [[(4, 0), (1, 2)]])
    assert not v.valid and not v
    assert v.missing == {1: [0, 3], 2: [5, 6]}


def test_lower_bound():
    """The paper example's bound, as `ubershuffle plan --instance` gives it (recorded): 3, the
    most any worker needs, which ubershuffle's 3 transmissions meet."""
    b = us.lower_bound(PAPER_CACHE, PAPER_ASSIGNMENT)
    assert (b.value, b.kind, b.uncoded_transmissions) == (3, "max-need", 6)
    r = us.plan_instance(PAPER_CACHE, PAPER_ASSIGNMENT, "ubershuffle")
    assert (r.lower_bound, r.lower_bound_kind) == (b.value, b.kind) and r.transmissions == b.value


def test_plan_instance_matches_the_cli_on_an_instance_file(cli, tmp_path):
    path = tmp_path / "inst.json"
    subprocess.run(
        [str(_cli_path()), "instance", "-n", "5", "-q", "500", "-a", "0.4", "--seed", "3", "-o", str(path)],
        check=True,
    )
    import json

    inst = json.loads(path.read_text())
    want = cli("plan", "--instance", str(path), "--scheme", "ubershuffle", "--json")
    got = us.plan_instance(inst["cache"], inst["assignment"], "ubershuffle", points=inst["points"])
    assert {k: getattr(got, k) for k in COUNTS} == {k: want[k] for k in COUNTS}
    bound = us.lower_bound(inst["cache"], inst["assignment"])
    assert (bound.value, bound.kind, bound.uncoded_transmissions) == (
        want["lower_bound"],
        want["lower_bound_kind"],
        want["uncoded_transmissions"],
    )


def _cli_path():
    from conftest import find_cli

    return find_cli()


@pytest.mark.parametrize(
    "call,args",
    [
        (lambda: us.plan(0, 100, 0.5), ["plan", "-n", "0", "-q", "100", "-a", "0.5"]),
        (lambda: us.plan(4, 100, 2.0), ["plan", "-n", "4", "-q", "100", "-a", "2"]),
        (lambda: us.plan(4, 100, 0.1), ["plan", "-n", "4", "-q", "100", "-a", "0.1"]),
        (
            lambda: us.plan(4, 100, 0.5, "codde"),
            ["plan", "--scheme", "codde", "-n", "4", "-q", "100", "-a", "0.5"],
        ),
        (
            lambda: us.plan(4, 100, 0.5, "coded", time_budget=-1),
            ["plan", "--time-budget=-1", "-n", "4", "-q", "100", "-a", "0.5"],
        ),
        (
            lambda: us.plan_epochs(4, 100, policy="partial-local", alpha=None, scheme="coded", epochs=2),
            ["plan", "--policy", "partial-local", "-n", "4", "-q", "100", "--epochs", "2"],
        ),
        (
            lambda: us.plan_epochs(4, 100, policy="global", alpha=None, scheme="coded", epochs=0),
            ["plan", "--policy", "global", "-n", "4", "-q", "100", "--epochs", "0"],
        ),
    ],
)
def test_bad_input_raises_the_cli_message(cli_error, call, args):
    with pytest.raises(ValueError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message
    assert message == cli_error(*args)


def test_bad_input_is_one_line_without_the_binary():
    cases = [
        (lambda: us.plan(0, 100, 0.5), ValueError, "--workers must be at least 1"),
        (
            lambda: us.plan(4, 100, 0.5, "codde"),
            ValueError,
            "invalid value 'codde' for '--scheme': known schemes are",
        ),
        (
            lambda: us.plan(-1, 100, 0.5),
            ValueError,
            "invalid value '-1' for '--workers': must be a non-negative integer",
        ),
        (lambda: us.plan("4", 100, 0.5), TypeError, "workers must be an int, got str"),
        (lambda: us.plan(4, 100, "x"), TypeError, "alpha must be a number, got str"),
        (
            lambda: us.plan_instance([[0]], [[0], [1]]),
            ValueError,
            '"cache" has 1 lists but there are 2 workers',
        ),
        (
            lambda: us.plan_instance([[0], [1]], [[0], [5]], points=2),
            ValueError,
            '"assignment" of worker 1 names point 5, but ids run from 0 to 1',
        ),
        (
            lambda: us.plan_instance([[0.5], [1]], [[0], [1]]),
            TypeError,
            "cache of worker 0 must hold integer point ids, got float64",
        ),
        (
            lambda: us.plan(4, 100, 0.5, "coded", candidates=3),
            ValueError,
            "apply to the pliable schemes (pliable-greedy, pliable-hierarchical), not coded",
        ),
        (
            lambda: us.schemes(plugin="/nonexistent/libx.so"),
            ValueError,
            "cannot open plugin /nonexistent/libx.so",
        ),
    ]
    for call, kind, text in cases:
        with pytest.raises(kind) as info:
            call()
        assert text in str(info.value) and "\n" not in str(info.value), str(info.value)


def test_a_rust_panic_becomes_runtime_error():
    with pytest.raises(
        RuntimeError, match=r"^internal error in ubershuffle \(a Rust panic\): a deliberate panic$"
    ):
        us._panic_for_test()


def stamps_during(call) -> tuple:
    """Runs ``call`` on a thread while this thread notes the time every millisecond or so;
    returns ``(start, end, stamps)``: when the call began and ended (read on its thread) and
    the times this thread ran meanwhile. A stamp is read with the GIL held, so none falls
    inside a call that holds the GIL, but for the first switch interval (5 ms) after ``start``."""
    span: list = []
    stamps: list = []

    def work() -> None:
        start = time.perf_counter()
        call()
        span.extend([start, time.perf_counter()])

    t = threading.Thread(target=work)
    t.start()
    while t.is_alive():
        stamps.append(time.perf_counter())
        time.sleep(0.001)
    t.join()
    return span[0], span[1], stamps


def test_planning_releases_the_gil():
    """Python runs on another thread while a plan runs: this thread notes the time in the middle
    half of the plan (well past the switch interval), which a plan holding the GIL forbids."""
    start, end, stamps = stamps_during(lambda: us.plan(20, 800_000, 0.4, "coded", seed=1))
    quarter = (end - start) / 4
    assert quarter > 0.01, f"the plan took {end - start:.3f} s: too short to tell"
    inside = [t for t in stamps if start + quarter < t < end - quarter]
    assert inside, f"no Python ran during the middle half of a {end - start:.3f} s plan"


def test_plugin_from_python_as_from_the_cli(cli):
    plugin = find_plugin()
    if plugin is None:
        pytest.skip("the example plugin is not built (cargo build --release -p pairwise-xor-plugin)")
    assert us.schemes(plugin=plugin) == cli("schemes", "--plugin", str(plugin), "--json")
    want = cli("plan", "--plugin", str(plugin), "-n", "6", "-q", "600", "-a", "0.4", "--json")
    got = us.plan(6, 600, 0.4, plugin=plugin)
    assert {k: getattr(got, k) for k in COUNTS} == {k: want[k] for k in COUNTS}
