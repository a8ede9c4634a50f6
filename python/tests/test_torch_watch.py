"""The liveness watch's word between ranks, on an in-process key-value store (torch's
HashStore, no process group): a rank that gives up says why, a rank that closes does not, and
what a peer wrote is read as one bounded line. Skipped when torch is not installed."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the watch tests need it")

from ubershuffle.torch import PeerClosed, PeerFailed, ShuffleTimeout  # noqa: E402
from ubershuffle.torch._watch import REASON_CHARS, Watch  # noqa: E402


def pair(prefix: str) -> tuple:
    """Rank 0's and rank 1's watches over one store (a long timeout: nobody goes silent)."""
    store = torch.distributed.HashStore()
    return store, Watch(store, prefix, 2, 0, 60.0), Watch(store, prefix, 2, 1, 60.0)


def test_a_rank_that_gives_up_is_named_with_its_reason_and_a_closed_one_without():
    _, me, peer = pair("give-up")
    peer.give_up(ShuffleTimeout("rank 7 has not been heard from for 4.0 s\n(it died)"))
    me.refresh()
    with pytest.raises(PeerFailed) as failed:
        me.check([1], "receiving round 3")
    first = (
        "rank 1 stopped while rank 0 was receiving round 3, because "
        "rank 7 has not been heard from for 4.0 s (it died)"
    )
    assert str(failed.value) == first, "the reason in one line"
    peer.give_up(RuntimeError("a second reason"))  # once is enough
    me.refresh()
    with pytest.raises(PeerFailed) as again:
        me.check([1], "receiving round 3")
    assert str(again.value) == first, "the first reason stays"
    me.close()

    _, me, peer = pair("close")
    peer.close()
    me.refresh()
    with pytest.raises(PeerClosed, match="rank 1 closed its ShuffleGroup while rank 0 was waiting"):
        me.check([1], "waiting")
    me.close()


def test_an_error_without_a_message_is_named_by_its_type():
    _, me, peer = pair("no-message")
    peer.give_up(KeyboardInterrupt())
    me.refresh()
    with pytest.raises(PeerFailed, match="because KeyboardInterrupt$"):
        me.check([1], "waiting")
    me.close()


def test_what_a_peer_wrote_as_its_reason_is_one_bounded_line():
    store, me, peer = pair("hostile")
    peer.close()
    store.set("hostile/why/1", "x\n" * (10 * REASON_CHARS))
    me.refresh()
    with pytest.raises(PeerFailed) as failed:
        me.check([1], "waiting")
    # Its words on one line, cut at REASON_CHARS characters.
    reason = ("x " * REASON_CHARS)[:REASON_CHARS]
    assert str(failed.value) == f"rank 1 stopped while rank 0 was waiting, because {reason}"
    me.close()
