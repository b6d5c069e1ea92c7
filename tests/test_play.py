"""auxspec play, driven through its input: the states it prints, undo, the
profile switch, refusals, and the trace it saves (which verify replays)."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from auxspec import cli
from auxspec.engine import traces
from auxspec.engine.ops import Get, Put
from auxspec.models.sequential import Err, Kind, Ok
from auxspec.teach.play import Session, run


def _play(script: str, session: Session | None = None) -> tuple[Session, str]:
    session = session or Session()
    out = io.StringIO()
    assert run(session, io.StringIO(script), out, colour=False) == 0
    return session, out.getvalue()


def _afters(text: str) -> list[str]:
    """The "after" row printed for each step, as the keys between LRU and MRU."""
    return [" ".join(m.split()) for m in re.findall(r"^  after +LRU {2}(.*?) {2}MRU", text, re.MULTILINE)]


def test_a_session_prints_each_state(tmp_path: Path) -> None:
    saved = tmp_path / "session.jsonl"
    script = "\n".join(
        [
            "put a b --retain a",  # a pinned
            "put c",
            "get a",  # a moves to the most-recent end
            "put d",  # evicts b, the least recent unpinned key
            "undo",  # d back out, b back in
            "release a",  # a to zero: terminal, moves to the end
            "put d e",  # evicts b and c
            f"save {saved}",
            "quit",
            "put never-read",
        ]
    )
    session, text = _play(script)
    assert _afters(text) == [
        "+a*1! +b!",
        "a*1 b +c!",
        "b c a*1",
        "c a*1 +d!",
        "b c a*1",  # shown again after undo
        "b c a^",
        "a +d! +e!",
    ]
    assert "evicted: b: the least recent key with no pin" in text
    assert "undid put(['d'=2 B 6464])" in text
    assert "never-read" not in text.split("> quit")[1]
    assert len(session.ops) == 5  # six typed, one undone

    vector = traces.load(saved)
    assert vector.trace == session.trace
    assert vector.expected == (Ok(), Ok(), Ok(b"aa"), Ok(), Ok())
    assert vector.trace.ops[0] == Put((("a", b"aa"), ("b", b"bb")), ("a",))
    assert vector.trace.ops[2] == Get(("a",))


def test_the_saved_trace_is_replayed_by_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "s.jsonl"
    _play(f"put a --retain a\nput b c\nput d\nread a b\nstats\nin c\nlen\nsave {saved}\n")
    assert cli.main(["verify", "--vectors", str(saved), "--max-time", "0"]) == 0
    assert "1 vectors replayed" in capsys.readouterr().out
    assert cli.main(["vectors", "--check", str(saved), "--min-coverage", "0"]) == 0


def test_profiles_and_capacity_failure() -> None:
    script = "put a b --retain a b\nput c d --retain c --release a\nprofile upstream\nprofile strict\n"
    session, text = _play(script, Session(4, 2))
    strict_fail, upstream_replayed, strict_again = text.split("> put c d")[1].split("> profile")
    assert "error: capacity" in strict_fail and "strict: nothing changes at all" in strict_fail
    assert _afters(strict_fail) == ["a*1 b*1"]
    assert "upstream: pins and moves stay applied" in upstream_replayed
    assert _afters(upstream_replayed) == ["b*1 a^"]  # the release of a stayed applied and moved it
    assert _afters(strict_again) == ["a*1 b*1"]
    assert session.profile == "strict"


def test_refusals_change_nothing(tmp_path: Path) -> None:
    script = "\n".join(
        [
            "undo",
            "frobnicate a",
            "put a --pin a",
            "put a=zz",
            "in",
            "len 3",
            "store 1 2",
            'put "unclosed',
            "put a=616161",  # strict: a payload of the wrong length is an error outcome
            "profile upstream",  # which upstream leaves undefined: refused
            f"save {tmp_path}/no/such/dir/x.jsonl",
        ]
    )
    session, text = _play(script)
    assert text.count("refused:") == 9
    assert "nothing to undo" in text and "unknown command 'frobnicate'" in text
    assert "unknown option --pin" in text and "'zz' is not hex" in text
    assert "cannot read that line" in text
    assert "error: payload" in text
    assert "upstream leaves an op of this session undefined" in text
    assert session.profile == "strict" and len(session.ops) == 1


def test_upstream_refuses_undefined_inputs() -> None:
    session, text = _play("put a=6161\nput b=61\n", Session(profile="upstream"))
    assert "refused: the upstream profile leaves this input undefined" in text
    assert len(session.ops) == 1


def test_store_restarts_and_show_lists_everything() -> None:
    session, text = _play("put a\nstore 2 1\nput x y\nput z\nput p q r\nshow\ntrace\nhelp\n")
    assert "capacity 2; empty" in text
    assert _afters(text)[1:4] == ["+x! +y!", "y +z!", "y z"]  # x evicted; a batch of 3 cannot fit
    assert "2. put(['z'=1 B 7a])" in text and "error: capacity" in text
    assert "step 3/3  put(['p'=1 B 70" in text  # show: the whole session
    assert "save FILE" in text and session.max_bytes == 2


def test_close_and_reads_after_it() -> None:
    session, text = _play("put a\nclose\nget a\nclose\n")
    assert "close drops every key and pin" in text and "error: closed" in text
    assert "already closed" in text
    assert session.trace.ops[-1].name == "close"
    assert Err(Kind.CLOSED).kind.value == "closed"


def test_the_command_reads_stdin(tmp_path: Path) -> None:
    saved = tmp_path / "cmd.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "auxspec.cli", "play", "--max-bytes", "4", "--object-nbytes", "1"],
        input=f"put a b c d\nput e --retain e\nsave {saved}\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "\x1b[" not in done.stdout  # not a terminal: plain text
    assert _afters(done.stdout) == ["+a! +b! +c! +d!", "b c d +e*1!"]
    assert traces.load(saved).trace.max_bytes == 4
    bad = subprocess.run(
        [sys.executable, "-m", "auxspec.cli", "play", "--max-bytes", "1", "--object-nbytes", "2"],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2 and "cannot be built" in bad.stderr
