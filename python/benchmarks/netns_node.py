"""What every rank script of ``cargo xtask netns-*`` checks first: that torchrun's c10d
rendezvous gave this node the rank the launcher meant (xtask/src/netns/ranks.rs), so that the
store, the ranks and their logs sit on the nodes the report names."""

from __future__ import annotations

import os
import sys


def check_node_rank() -> None:
    """Exits with a one-line error when ``RANK`` is not ``UBERSHUFFLE_NETNS_RANK`` (set by the
    launcher; nothing is checked without it)."""
    meant = os.environ.get("UBERSHUFFLE_NETNS_RANK")
    given = os.environ.get("RANK")
    if meant is not None and meant != given:
        sys.exit(f"error: this node was meant to be rank {meant}, torchrun's rendezvous made it rank {given}")
