"""``auxspec verify --profile remote`` against a live Redis server that evicts.

The server is test_remote_redis's (``redis-server`` on a loopback port,
``maxmemory`` 2 MB, ``allkeys-lru``), and another tenant (``Noise``) writes
big objects meanwhile, so the server really evicts while verify runs; verify
also deletes the running store's keys between calls, as the profile allows an
engine to. The fast tier runs one short conforming run, one wrong store with
its printed commands run as printed, the --exec path both ways and the error
paths; the slow tier runs every wrong store at seeds 1-3 and the right ones
for the default time.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from auxspec import cli
from auxstore.remote import REDIS_URL_VARIABLE
from test_remote_judge import RIGHT, WRONG
from test_remote_redis import Noise, _evicted, _free_port, server  # noqa: F401  (server: the module's fixture)

TESTS = Path(__file__).resolve().parent
STORE = "auxstore.remote:RedisBlockObjectStore"
# A put split into one SET per object is wrong only when the server refuses a
# write halfway; a server that may evict never does (test_remote_judge's
# FlakyEngine does, and flags it there).
NEEDS_REFUSALS = {"OneKeyAtATime"}


@pytest.fixture
def engine(server: str, monkeypatch: pytest.MonkeyPatch) -> str:  # noqa: F811
    monkeypatch.setenv(REDIS_URL_VARIABLE, server)
    monkeypatch.setenv("PYTHONPATH", str(TESTS))  # the wrong stores, for the commands verify prints
    return server


def _figure(pattern: str, text: str) -> int:
    found = re.search(pattern, text)
    assert found is not None, f"no {pattern!r} in:\n{text}"
    return int(found.group(1))


def _wrong(name: str) -> type:
    return next(cls for cls in WRONG if cls.__name__ == name)


def _label(cls: type) -> str:
    return f"test_remote_judge:{cls.__name__}"


def _shell(line: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(line, shell=True, capture_output=True, text=True, timeout=300, cwd="/")


def _printed(out: str, label: str) -> str:
    """The command printed after ``label`` (continued over lines by backslashes)."""
    lines = out.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(label))
    words = [lines[start][len(label) :]]
    index = start
    while words[-1].endswith("\\"):
        words[-1] = words[-1][:-1]
        index += 1
        words.append(lines[index])
    return " ".join(word.strip() for word in words)


# ---------------------------------------------------------------- fast tier


def test_the_redis_store_conforms_while_the_server_evicts(
    engine: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    before = _evicted(engine)
    with Noise(engine):
        code = cli.main(["verify", "--profile", "remote", STORE, "--seed", "1", "--max-traces", "60", "--json"])
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    print(captured.err)
    assert code == 0 and report["result"] == "conforms", captured.err
    scope = report["scope"]
    assert scope["traces"] == 60 and scope["ended_by"] == "count"
    # The server evicted during the run, the report counted it (the delta of INFO evicted_keys), and reads
    # met evictions (verify's deletions) and also returned objects: the verdict judged something.
    assert 0 < scope["server_evicted"] <= _evicted(engine) - before
    assert scope["reads_of_gone"] > 0 and scope["read_hits"] > 0 and scope["deleted_between_calls"] > 0
    assert f"the redis engine evicted {scope['server_evicted']} keys for memory" in captured.err
    assert "model options: none" in captured.err and report["options"] == [] and report["engine"] == "redis"


def test_a_wrong_store_is_flagged_and_its_printed_commands_run_as_printed(
    engine: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_file = tmp_path / "found.jsonl"
    wrong = _label(_wrong("KeepsALocalIndex"))  # wrong only once the engine has evicted
    code = cli.main(["verify", "--profile", "remote", wrong, "--seed", "1", "--out", str(out_file)])
    out = capsys.readouterr().out
    assert code == 1, out
    assert re.search(r"^DIVERGES \(found by the remote search, seed 1, trace \d+\): step \d+, ", out, re.M), out
    assert re.search(r"^scope: seed 1, \d+ traces", out, re.M) and "evictions: the redis engine evicted" in out
    assert f"written to {out_file}" in out and out_file.is_file()
    shrunk = _figure(r"shrunk from \d+ to (\d+) ops", out)
    assert shrunk <= 6, out
    again = _shell(_printed(out, "reproduce:"))
    assert again.returncode == 1 and "DIVERGES (found by reproduce)" in again.stdout, again.stdout + again.stderr
    shown = _shell(_printed(out, "explain:  "))
    assert shown.returncode == 1 and "NOT ALLOWED" in shown.stdout, shown.stdout + shown.stderr
    # The right store on the same trace, with the same deletions: every outcome allowed.
    right = _shell(f"cd / && {shlex.quote(sys.executable)} -m auxspec.command reproduce {out_file} --target {STORE}")
    assert right.returncode == 0 and "every outcome was one the remote profile allows" in right.stdout, right.stderr


def _serve(target: str) -> str:
    return f"{shlex.quote(sys.executable)} -m auxspec.command serve {target}"


def test_a_port_process_serving_the_redis_store_conforms(engine: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["verify", "--profile", "remote", "--exec", _serve(STORE), "--seed", "2", "--max-traces", "40"])
    out = capsys.readouterr().out
    assert code == 0 and "conforms: 40 traces" in out and "verifying process" in out, out
    assert _figure(r"(\d+) reads returned every object", out) > 0


def test_a_wrong_store_served_to_a_port_process_is_flagged(
    engine: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_file = tmp_path / "port.jsonl"
    served = _serve(_label(_wrong("FirstWriteWins")))
    code = cli.main(["verify", "--profile", "remote", "--exec", served, "--seed", "1", "--out", str(out_file)])
    out = capsys.readouterr().out
    assert code == 1 and "DIVERGES" in out and out_file.is_file(), out
    again = _shell(_printed(out, "reproduce:"))
    assert again.returncode == 1, again.stdout + again.stderr


@pytest.mark.parametrize(
    ("url", "says"),
    [
        (None, "needs an engine: set AUXSTORE_REDIS_URL"),
        ("down", "cannot reach the Redis server AUXSTORE_REDIS_URL="),
        ("http://127.0.0.1:1", "is not a Redis URL"),
    ],
    ids=["unset", "server down", "not a Redis URL"],
)
def test_no_server_is_one_line_and_exit_2(
    url: str | None, says: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("AUXSTORE_MOONCAKE_MASTER", raising=False)
    if url is None:
        monkeypatch.delenv(REDIS_URL_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(REDIS_URL_VARIABLE, f"redis://127.0.0.1:{_free_port()}/0" if url == "down" else url)
    assert cli.main(["verify", "--profile", "remote", STORE, "--max-time", "5"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and says in captured.err, captured.err


# ---------------------------------------------------------------- slow tier


@pytest.mark.slow  # 3 x 3 runs of 10 s
@pytest.mark.parametrize("seed", (1, 2, 3))
@pytest.mark.parametrize("right", RIGHT, ids=lambda c: c.__name__)
def test_right_stores_conform(engine: str, right: type, seed: int, capsys: pytest.CaptureFixture[str]) -> None:
    label = STORE if right.__name__ == "RedisBlockObjectStore" else _label(right)
    with Noise(engine):
        code = cli.main(["verify", "--profile", "remote", label, "--seed", str(seed), "--max-time", "10"])
    out = capsys.readouterr().out
    assert code == 0 and "conforms" in out, out
    assert _figure(r"the redis engine evicted (\d+) keys", out) > 0 and _figure(r"(\d+) met an eviction", out) > 0


@pytest.mark.slow  # the default --max-time under --profile remote (60 s) on the shipped store
def test_the_redis_store_conforms_for_the_default_time(engine: str, capsys: pytest.CaptureFixture[str]) -> None:
    with Noise(engine):
        code = cli.main(["verify", "--profile", "remote", STORE, "--seed", "1"])
    out = capsys.readouterr().out
    assert code == 0 and "(ended by time)" in out, out
    assert _figure(r"the redis engine evicted (\d+) keys", out) > 0


# A count budget, so that the sweep is the same on a loaded machine: NormalizesKeys needs the most,
# 2,143 traces at seed 2 (about 20 s unloaded; 30 s were 1,499 traces at load 8).
WRONG_TRACES = 3000


@pytest.mark.slow  # about 1 minute in all
@pytest.mark.parametrize("seed", (1, 2, 3))
@pytest.mark.parametrize("wrong", [c for c in WRONG if c.__name__ not in NEEDS_REFUSALS], ids=lambda c: c.__name__)
def test_each_wrong_store_is_flagged(
    engine: str, wrong: type, seed: int, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_file = tmp_path / "found.jsonl"
    budget = ["--seed", str(seed), "--max-traces", str(WRONG_TRACES), "--out", str(out_file)]
    code = cli.main(["verify", "--profile", "remote", _label(wrong), *budget])
    out = capsys.readouterr().out
    assert code == 1 and "DIVERGES (found by the remote search" in out and out_file.is_file(), out
