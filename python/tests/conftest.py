"""Shared fixtures: the repository root, and the `ubershuffle` command line when built."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

import pytest
from hypothesis import settings

# Property tests: 30 examples each by default (CI); UBERSHUFFLE_HYPOTHESIS=thorough runs 300.
settings.register_profile("default", max_examples=30, deadline=None)
settings.register_profile("thorough", max_examples=300, deadline=None)
settings.load_profile(os.environ.get("UBERSHUFFLE_HYPOTHESIS", "default"))

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _target_dirs() -> list:
    dirs = []
    if os.environ.get("CARGO_TARGET_DIR"):
        dirs.append(pathlib.Path(os.environ["CARGO_TARGET_DIR"]))
    dirs.append(ROOT / "target")
    return dirs


def find_cli():
    """The `ubershuffle` binary: $UBERSHUFFLE_CLI, else target/release or target/debug."""
    if os.environ.get("UBERSHUFFLE_CLI"):
        return pathlib.Path(os.environ["UBERSHUFFLE_CLI"])
    for d in _target_dirs():
        for profile in ("release", "debug"):
            path = d / profile / "ubershuffle"
            if path.is_file():
                return path
    return None


def find_plugin():
    """The example plugin library (examples/plugins/pairwise-xor), when built."""
    for d in _target_dirs():
        for profile in ("release", "debug"):
            for name in ("libpairwise_xor.so", "libpairwise_xor.dylib", "pairwise_xor.dll"):
                path = d / profile / name
                if path.is_file():
                    return path
    return None


@pytest.fixture(scope="session")
def cli():
    """Runs the command line with --json and returns the parsed output (skips when the binary
    is not built: `cargo build --release -p ubershuffle`, or set UBERSHUFFLE_CLI)."""
    path = find_cli()
    if path is None:
        pytest.skip("the ubershuffle binary is not built (cargo build --release -p ubershuffle)")

    def run(*args: str):
        out = subprocess.run([str(path), *args], capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise RuntimeError(out.stderr.strip())
        return json.loads(out.stdout)

    return run


@pytest.fixture(scope="session")
def cli_error():
    """Runs the command line expecting failure; returns its one-line message without 'error: '."""
    path = find_cli()
    if path is None:
        pytest.skip("the ubershuffle binary is not built (cargo build --release -p ubershuffle)")

    def run(*args: str) -> str:
        out = subprocess.run([str(path), *args], capture_output=True, text=True, check=False)
        assert out.returncode != 0, out.stdout
        return out.stderr.strip().removeprefix("error: ")

    return run
