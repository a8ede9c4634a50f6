"""Every Python snippet of README.md and python/README.md runs as written, in the setting it
names in the comment right above it (``<!-- runs as: ... -->``, required on every snippet):

- ``python``: a script, from a folder holding ``target/release/`` with the example plugin (as
  a clone's root after ``cargo build --release -p pairwise-xor-plugin``);
- ``torchrun, N ranks``: ``torchrun --standalone --nproc-per-node N`` on CPU (skips where torch
  is not installed: CI keeps it out);
- ``N ranks beside: ubershuffle serve ...``: N processes of the snippet beside that command
  (the command line, with its data file written first);
- ``python beside an S3 server holding s3://BUCKET/PREFIX/``: a script, with the environment
  pointing at an S3 server on loopback (moto's) whose bucket holds 50 objects under the prefix
  (skips where boto3 or moto[server] is not installed);
- ``master of N ranks of the next snippet``: the snippet as the master, and N processes of the
  next one (``runs as: a rank of the master above``).

The one change made to a snippet: the port 7070 becomes a free one, so that tests can run
side by side.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import socket
import subprocess
import sys
from dataclasses import dataclass

import pytest
from conftest import ROOT, S3_UNSET, find_cli, find_plugin, s3_environment

DOCUMENTS = [ROOT / "README.md", ROOT / "python" / "README.md"]
SNIPPET = re.compile(r"(?:<!-- runs as: (?P<how>[^\n]*?) -->\n)?```python\n(?P<code>.*?)```", re.S)
TOKEN = "readme-snippet-token-0Yw3Lq8Zr5Tn2Vb6Hk9Mx"
PORT = "7070"


@dataclass
class Snippet:
    document: pathlib.Path
    line: int
    how: str | None
    code: str

    @property
    def name(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line}"


def snippets() -> list[Snippet]:
    found = []
    for document in DOCUMENTS:
        text = document.read_text()
        for m in SNIPPET.finditer(text):
            line = text.count("\n", 0, m.start("code"))
            found.append(Snippet(document, line, m.group("how"), m.group("code")))
    return found


KINDS = [
    ("python", re.compile(r"python")),
    ("s3", re.compile(r"python beside an S3 server holding s3://(?P<bucket>[^/\s]+)/(?P<prefix>\S*)")),
    ("torchrun", re.compile(r"torchrun, (?P<ranks>\d+) ranks")),
    ("serve", re.compile(r"(?P<ranks>\d+) ranks beside: (?P<command>ubershuffle serve .*)")),
    ("master", re.compile(r"master of (?P<ranks>\d+) ranks of the next snippet")),
    ("rank", re.compile(r"a rank of the master above")),
]


def kind(snippet: Snippet) -> tuple[str, dict]:
    for name, pattern in KINDS:
        m = pattern.fullmatch(snippet.how or "")
        if m:
            return name, m.groupdict()
    raise AssertionError(f"{snippet.name}: no `<!-- runs as: ... -->` this test knows: {snippet.how!r}")


def test_every_snippet_says_how_it_runs():
    """Every ```python fence of the documents is a snippet found (none missed by the pattern),
    each with a setting this test knows, and a rank's snippet follows its master's."""
    found = snippets()
    fences = sum(document.read_text().count("```python\n") for document in DOCUMENTS)
    assert len(found) == fences > 0, [s.name for s in found]
    for before, snippet in zip([None, *found], found):
        if kind(snippet)[0] == "rank":
            assert before is not None and kind(before)[0] == "master", f"{snippet.name}: no master above it"


def free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def run(args: list, cwd: pathlib.Path, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def write(tmp_path: pathlib.Path, code: str, port: str) -> pathlib.Path:
    path = tmp_path / "snippet.py"
    path.write_text(code.replace(f"127.0.0.1:{PORT}", f"127.0.0.1:{port}"))
    return path


def environment() -> dict:
    return {**os.environ, "UBERSHUFFLE_TOKEN": TOKEN}


def spawn(args: list, cwd: pathlib.Path) -> subprocess.Popen:
    return subprocess.Popen(
        args, cwd=cwd, env=environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def ranks(script: pathlib.Path, n: int, cwd: pathlib.Path) -> list[subprocess.Popen]:
    return [spawn([sys.executable, str(script)], cwd) for _ in range(n)]


def finish(processes: list[subprocess.Popen], what: str) -> None:
    for p in processes:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, f"{what} failed: {err}"


def run_python(snippet: Snippet, tmp_path: pathlib.Path) -> None:
    if "libpairwise_xor" in snippet.code:
        plugin = find_plugin()
        if plugin is None:
            pytest.skip("the example plugin is not built (cargo build --release -p pairwise-xor-plugin)")
        (tmp_path / "target" / "release").mkdir(parents=True)
        (tmp_path / "target" / "release" / "libpairwise_xor.so").symlink_to(plugin)
    out = run([sys.executable, str(write(tmp_path, snippet.code, PORT))], tmp_path, environment())
    assert out.returncode == 0, out.stderr


def run_beside_s3(snippet: Snippet, bucket: str, prefix: str, endpoint: str, tmp_path: pathlib.Path) -> None:
    import boto3

    env = {k: v for k, v in environment().items() if k not in S3_UNSET} | s3_environment(endpoint)
    client = boto3.session.Session().client(
        "s3", endpoint_url=endpoint, aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1"
    )
    try:
        client.create_bucket(Bucket=bucket)
    except client.exceptions.BucketAlreadyOwnedByYou:
        pass
    for i in range(50):
        client.put_object(Bucket=bucket, Key=f"{prefix}{i:03}.jpg", Body=os.urandom(100 + 37 * i))
    out = run([sys.executable, str(write(tmp_path, snippet.code, PORT))], tmp_path, env)
    assert out.returncode == 0, out.stderr


def run_torchrun(snippet: Snippet, n: int, tmp_path: pathlib.Path) -> None:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed (CI keeps it out); the snippet needs torchrun")
    script = write(tmp_path, snippet.code, PORT)
    args = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={n}",
        str(script),
    ]
    out = run(args, tmp_path, environment(), timeout=600)
    assert out.returncode == 0, out.stderr


def run_beside_serve(snippet: Snippet, n: int, command: str, tmp_path: pathlib.Path) -> None:
    cli = find_cli()
    if cli is None:
        pytest.skip("the ubershuffle binary is not built (cargo build --release -p ubershuffle)")
    port = free_port()
    args = command.replace(f"127.0.0.1:{PORT}", f"127.0.0.1:{port}").split()[1:]
    records, size = args[args.index("--records") + 1], int(args[args.index("--record-size") + 1])
    (tmp_path / records).write_bytes(os.urandom(300 * size))
    master = spawn([str(cli), *args], tmp_path)
    try:
        finish(ranks(write(tmp_path, snippet.code, port), n, tmp_path), "a rank")
        finish([master], "the master")
    finally:
        master.kill()


def run_master_and_ranks(snippet: Snippet, rank: Snippet, n: int, tmp_path: pathlib.Path) -> None:
    port = free_port()
    (tmp_path / "master").mkdir()
    master = spawn([sys.executable, str(write(tmp_path / "master", snippet.code, port))], tmp_path / "master")
    try:
        finish(ranks(write(tmp_path, rank.code, port), n, tmp_path), "a rank")
        finish([master], "the master")
    finally:
        master.kill()


RUNNABLE = [s for s in snippets() if not KINDS[-1][1].fullmatch(s.how or "")]


@pytest.mark.parametrize("snippet", RUNNABLE, ids=[s.name for s in RUNNABLE])
def test_the_snippet_runs_as_written(snippet, tmp_path, request):
    how, given = kind(snippet)
    if how == "python":
        run_python(snippet, tmp_path)
    elif how == "s3":
        endpoint = request.getfixturevalue("s3_endpoint")  # skips without boto3 and moto[server]
        run_beside_s3(snippet, given["bucket"], given["prefix"], endpoint, tmp_path)
    elif how == "torchrun":
        run_torchrun(snippet, int(given["ranks"]), tmp_path)
    elif how == "serve":
        run_beside_serve(snippet, int(given["ranks"]), given["command"], tmp_path)
    else:
        found = snippets()
        rank = found[found.index(snippet) + 1]
        run_master_and_ranks(snippet, rank, int(given["ranks"]), tmp_path)
