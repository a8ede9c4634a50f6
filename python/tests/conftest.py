"""Shared fixtures: the repository root, the `ubershuffle` command line when built, and an S3
server on loopback (moto) when boto3 and moto[server] are installed."""

from __future__ import annotations

import itertools
import json
import logging
import os
import pathlib
import subprocess
from dataclasses import dataclass
from typing import Any

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


S3_SECRET = "s3-test-secret-kY7pWq2Rz9Lm4Xv"
"""The secret access key the S3 tests use: no message or pickle may carry it."""


def s3_environment(endpoint: str) -> dict:
    """The environment variables that point boto3 at ``endpoint`` with dummy credentials, and
    away from this machine's own configuration (the others: unset)."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "s3-test-key",
        "AWS_SECRET_ACCESS_KEY": S3_SECRET,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
    }


S3_UNSET = ("AWS_ENDPOINT_URL_S3", "S3_ENDPOINT_URL", "AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION")


@pytest.fixture(scope="session")
def s3_endpoint():
    """The URL of an S3 server (moto's, a real HTTP server) on loopback for the session (skips
    when boto3 or moto[server] is not installed: `pip install boto3 'moto[server]'`)."""
    pytest.importorskip("boto3", reason="boto3 is not installed: pip install boto3 'moto[server]'")
    server_module = pytest.importorskip(
        "moto.server", reason="moto[server] is not installed: pip install boto3 'moto[server]'"
    )
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@dataclass
class Bucket:
    """A bucket of the test S3 server, and a client of it."""

    client: Any
    name: str

    def put(self, key: str, data: bytes) -> str:
        """Uploads ``data`` as ``key``; returns its ``s3://`` URL."""
        self.client.put_object(Bucket=self.name, Key=key, Body=data)
        return self.url(key)

    def url(self, key: str = "") -> str:
        """``s3://bucket/key``."""
        return f"s3://{self.name}/{key}"


_buckets = itertools.count()


@pytest.fixture
def s3(s3_endpoint, monkeypatch) -> Bucket:
    """A new, empty bucket of its own on the session's S3 server, with the environment
    pointing at the server."""
    import boto3

    for name, value in s3_environment(s3_endpoint).items():
        monkeypatch.setenv(name, value)
    for name in S3_UNSET:
        monkeypatch.delenv(name, raising=False)
    bucket = Bucket(boto3.session.Session().client("s3"), f"test-bucket-{next(_buckets)}")
    bucket.client.create_bucket(Bucket=bucket.name)
    return bucket
