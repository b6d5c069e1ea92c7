"""The tools against hostile files and ports (issue 30): one test per class
of the issue's "done when", each over the commands that read files.

1. every file reader is bounded: a 1 GiB line, ``/dev/zero``,
   ``/dev/urandom``, a FIFO nobody writes to and a 75 MB valid vector end
   with exit 2 and one line naming the file (and the line) and the limit,
   in a fresh interpreter whose peak memory is measured;
2. a key with a lone surrogate (and controls, a bidirectional override)
   goes through explain (text, colour, HTML), reproduce, vectors --check
   and verify, and the command verify prints, escaped where printed;
3. a valid vector of a store of 2**40 bytes, or of one 2**40-byte object,
   runs on the bundled store and through ``serve``;
4. explain and reproduce show a long batch in text whose size does not
   grow with it (the views are linear, the text bounded);
5. no command raises on the cases the issue lists, nor on what Hypothesis
   draws for each command's file and flags;
6. a port's children end with it, and its stderr tail is the documented
   2,000 bytes.

Class 7 (the background store closes its inner store once at every
injection point) is the owner-call sweep of tests/test_background_injection.py.
Wall-clock time is printed, never asserted (machines are noisy); the
subprocesses' timeouts only guard against a hang.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auxspec import cli
from auxspec.drivers.protocol import STDERR_TAIL, serve
from auxspec.engine import traces
from auxspec.teach.timeline import LIST_SHOWN

PY = sys.executable
PORTS = Path(__file__).parent / "ports"
PEAK_KIB = 300 * 1024  # the issue's bound on a reader's peak memory
HEADER = {"format": "auxspec-trace", "version": 1, "name": "h", "description": "", "profile": "strict",
          "max_bytes": 4, "object_nbytes": 2, "expect_new": {"ok": None}}  # fmt: skip
SURROGATE_KEY = "a\ud800\u202e\x1b[31m"  # a lone surrogate, a bidi override, a colour escape

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="/dev/zero, FIFOs, /proc: Linux")


def _vector(path: Path, ops: list[dict[str, Any]], **header: Any) -> Path:
    lines = [json.dumps({**HEADER, **header})] + [json.dumps(op) for op in ops]
    path.write_text("\n".join(lines) + "\n")
    return path


# ------------------------------------------------------------- 1. readers


def _readers_cases(tmp_path: Path) -> list[tuple[str, list[str]]]:
    huge = tmp_path / "huge.jsonl"
    with huge.open("wb") as file:
        file.truncate(1 << 30)  # a sparse 1 GiB line of NUL bytes: no disk, no memory to make
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    long = tmp_path / "long.jsonl"  # 75 MB, every line valid
    put = json.dumps({"op": "put", "objects": [["a", "0a0b"]], "expect": {"ok": None}})
    with long.open("w") as file:
        file.write(json.dumps(HEADER) + "\n")
        file.write((put + "\n") * (75_000_000 // (len(put) + 1)))
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "huge.jsonl").symlink_to(huge)
    cases = []
    for name in (str(huge), "/dev/zero", "/dev/urandom", str(fifo), str(long)):
        cases += [
            (name, ["explain", name]),
            (name, ["reproduce", name]),
            (name, ["verify", "--vectors", name, "--max-time", "0", "--large-stores", "off"]),
        ]
    cases.append((str(folder), ["vectors", "--check", str(folder)]))
    return cases


@pytest.mark.timeout(240)
def test_every_reader_ends_hostile_files_with_exit_2_in_bounded_memory(tmp_path: Path) -> None:
    cases = _readers_cases(tmp_path)
    script = textwrap.dedent(
        f"""
        import contextlib, io, json, sys, time
        from auxspec import cli
        for name, argv in {cases!r}:
            err, out = io.StringIO(), io.StringIO()
            started = time.monotonic()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
                code = cli.main(argv)
            print(json.dumps([argv[0], name, code, err.getvalue(), round(time.monotonic() - started, 2)]))
        status = open("/proc/self/status").read()
        print("PEAK", int(status.split("VmHWM:", 1)[1].split()[0]))
        """
    )
    done = subprocess.run([PY, "-c", script], capture_output=True, text=True, timeout=220, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    *rows, peak_line = done.stdout.strip().splitlines()
    peak = int(peak_line.split()[1])
    for row in rows:
        command, name, code, err, seconds = json.loads(row)
        print(f"{command} {name}: exit {code} in {seconds} s: {err.strip()[:160]}")
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and "Traceback" not in err, (command, name, err)
        line = lines[0]
        assert name in line or Path(name).name in line, line
        if "fifo" in name:
            assert "fifo.jsonl:1: empty file" in line  # no writer: read as empty, not waited for
        elif name.startswith("/dev/") and command != "verify":  # no .jsonl: read whole as a fuzzer input
            assert f"longer than {traces.MAX_FILE} bytes" in line and traces.FILE_VARIABLE in line
        elif name == "/dev/urandom":  # its first line is random bytes, found before the limit
            assert "/dev/urandom:1: not UTF-8" in line or "/dev/urandom:1: not JSON" in line, line
        elif "long.jsonl" in name:
            assert f"the file goes past {traces.MAX_FILE} bytes here" in line and traces.FILE_VARIABLE in line
            assert line.startswith(f"auxspec: {name}:") and line.split(":")[2].strip().isdigit()  # the line
        else:
            assert f":1: line longer than {traces.MAX_LINE} bytes" in line, line
    print(f"peak RSS over {len(rows)} cases: {peak} KiB")
    assert peak < PEAK_KIB


def test_the_file_limit_can_be_raised_and_a_bad_value_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _vector(tmp_path / "v.jsonl", [{"op": "get", "keys": [], "expect": {"ok": ""}}] * 40)
    monkeypatch.setenv(traces.FILE_VARIABLE, "500")  # lower than the file: refused at the line that passes it
    assert cli.main(["reproduce", str(path)]) == 2
    assert re.search(r"v\.jsonl:\d+: the file goes past 500 bytes here", capsys.readouterr().err)
    monkeypatch.setenv(traces.FILE_VARIABLE, str(10 * traces.MAX_FILE))
    assert cli.main(["reproduce", str(path)]) == 0
    monkeypatch.setenv(traces.LINE_VARIABLE, "12ab")
    assert cli.main(["explain", str(path)]) == 2
    assert f"{traces.LINE_VARIABLE}='12ab': give a positive number of bytes" in capsys.readouterr().err


def test_explain_and_reproduce_hold_a_bounded_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # They keep every op (explain a view of each): past the op limit the file
    # is refused at the line that passes it, past the held keys at the step.
    ops = [{"op": "put", "objects": [[f"k{i}", "0102"]], "expect": {"ok": None}} for i in range(30)]
    path = _vector(tmp_path / "v.jsonl", ops, max_bytes=20, object_nbytes=2)
    monkeypatch.setenv(traces.OPS_VARIABLE, "25")
    for command in ("explain", "reproduce"):
        assert cli.main([command, str(path)]) == 2
        assert "v.jsonl:27: more than 25 ops" in capsys.readouterr().err
    assert cli.main(["verify", "--vectors", str(path), "--max-time", "0", "--out", str(tmp_path / "d")]) == 0
    monkeypatch.delenv(traces.OPS_VARIABLE)
    monkeypatch.setenv(traces.KEYS_VARIABLE, "100")  # steps of 1 op and up to 10 keys: 11 each, then more
    assert cli.main(["explain", str(path)]) == 2
    assert "v.jsonl: step 14: the steps so far hold more than 100 keys and pins" in capsys.readouterr().err
    monkeypatch.setenv(traces.KEYS_VARIABLE, "1000")
    assert cli.main(["explain", str(path)]) == 0


# ----------------------------------------------------------- 2. any key


def test_a_key_with_a_lone_surrogate_goes_through_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # capsys writes UTF-8 strictly: an unescaped surrogate would raise here.
    folder = tmp_path / "vectors"
    folder.mkdir()
    ops: list[dict[str, Any]] = [
        {"op": "put", "objects": [[SURROGATE_KEY, "0102"]], "expect": {"ok": None}},
        {"op": "get", "keys": [SURROGATE_KEY], "expect": {"ok": "0102"}},
    ]
    vector = _vector(folder / "surrogate.jsonl", ops)  # json.dumps writes the surrogate as \\ud800
    shown = "a\\ud800\\u202e\\x1b[31m"

    assert cli.main(["explain", str(vector), "--html", str(tmp_path / "s.html")]) == 0
    assert shown in capsys.readouterr().out
    assert shown in (tmp_path / "s.html").read_text(encoding="utf-8")
    assert cli.main(["explain", str(vector), "--target", "--color", "always"]) == 0
    assert shown in capsys.readouterr().out
    assert cli.main(["reproduce", str(vector)]) == 0
    assert shown in capsys.readouterr().out
    assert cli.main(["vectors", "--check", str(folder), "--min-coverage", "0"]) == 0
    capsys.readouterr()

    # A port that encodes keys as UTF-8 cannot store this one: verify finds
    # it, prints the divergence and the explain command, which runs too.
    port = str(PORTS / "subtle" / "g_keys_utf8_32_bytes.py")
    out = tmp_path / "divergence.jsonl"
    assert cli.main(["verify", port, "--vectors", str(folder), "--max-time", "0", "--out", str(out)]) == 1
    printed = capsys.readouterr().out
    assert shown in printed and "\ud800" not in printed and "\x1b[31m" not in printed
    lines = printed.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("explain:"))
    parts = [lines[start].removeprefix("explain:")]
    while parts[-1].endswith("\\"):  # a long command continues on the next line
        start += 1
        parts[-1] = parts[-1][:-1]
        parts.append(lines[start])
    command = " ".join(part.strip() for part in parts)  # as printed: cd, then the auxspec that ran
    ran = subprocess.run(["/bin/sh", "-c", command], cwd="/", capture_output=True, text=True, check=False)
    assert ran.returncode == 1, (command, ran.stdout, ran.stderr)
    assert shown in ran.stdout and "Traceback" not in ran.stderr


def test_the_console_script_escapes_what_a_command_left_unescaped() -> None:
    # The last guard (auxspec.command): a surrogate that reaches stdout is a
    # backslash escape, not a UnicodeEncodeError.
    script = "import sys; from auxspec import command; sys.stdout.reconfigure(errors='strict'); "
    script += "import auxspec.cli; auxspec.cli.main = lambda: print('k\\ud800') or 0; sys.exit(command.main())"
    done = subprocess.run([PY, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stdout == "k\\ud800\n", done.stderr


# ------------------------------------------------------- 3. huge sizes


@pytest.mark.parametrize("sizes", [(2**40, 2**40), (2**40, 2)], ids=["object-2**40", "store-2**40"])
def test_a_valid_vector_of_a_huge_store_runs_on_the_bundled_store(
    tmp_path: Path, sizes: tuple[int, int], capsys: pytest.CaptureFixture[str]
) -> None:
    from auxstore import BlockObjectStore

    max_bytes, object_nbytes = sizes
    fits = object_nbytes == 2
    ops: list[dict[str, Any]] = [
        {"op": "put", "objects": [["a", "0102"]], "expect": {"ok": None} if fits else {"error": "payload"}},
        {"op": "get", "keys": ["b"], "expect": {"error": "missing"}},
        {"op": "put", "objects": [], "retain": ["b"], "expect": {"ok": None}},
        {"op": "close", "expect": {"ok": None}},
    ]
    path = _vector(tmp_path / "huge.jsonl", ops, max_bytes=max_bytes, object_nbytes=object_nbytes)
    verify = [
        "verify",
        "--vectors",
        str(path),
        "--max-time",
        "0",
        "--large-stores",
        "off",
        "--out",
        str(tmp_path / "d"),
    ]
    assert cli.main(verify) == 0
    assert cli.main(["reproduce", str(path)]) == 0
    assert cli.main(["explain", str(path), "--target"]) == 0
    capsys.readouterr()
    store = BlockObjectStore(max_bytes=max_bytes, object_nbytes=object_nbytes)
    assert store._chunks == [] and store._allocated == 0  # nothing mapped before a key is stored
    store.check_invariants()
    requests = io.StringIO(
        "\n".join(json.dumps({"id": n, **op}) for n, op in enumerate(
            [{"op": "new", "max_bytes": max_bytes, "object_nbytes": object_nbytes}, *ops], 1))
        + "\n"
    )  # fmt: skip
    answers = io.StringIO()
    assert serve(lambda m, o: BlockObjectStore(max_bytes=m, object_nbytes=o), requests, answers) == 0
    got = [json.loads(line) for line in answers.getvalue().splitlines()]
    assert [{k: v for k, v in a.items() if k != "id"} for a in got] == [{"ok": None}] + [op["expect"] for op in ops]


_ADDRESS_SPACE = 700 * 2**20  # room for Python and auxspec, not for a 1 GiB mapping


def _limited(limit: int) -> None:  # in the child: a machine with this much address space
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def test_a_vector_this_machine_cannot_map_is_not_runnable_here_never_a_divergence(tmp_path: Path) -> None:
    """A valid vector whose store the bundled store cannot map (here an
    address-space limit; elsewhere a small machine): exit 4 with the bytes it
    needs, from reproduce, verify in process and through the protocol (serve
    answers the protocol's ``resources`` error), never a divergence or a traceback."""
    nbytes = 4 * 2**20  # one stored object; the store's first chunk (1 GiB) is what cannot be mapped
    ops = [{"op": "put", "objects": [["k", "31" * nbytes]], "expect": {"ok": None}}]
    path = _vector(tmp_path / "big.jsonl", ops, max_bytes=256 * nbytes, object_nbytes=nbytes)
    auxspec = [PY, "-m", "auxspec.cli"]
    runs = {
        "reproduce": [*auxspec, "reproduce", str(path)],
        "verify": [*auxspec, "verify", "--vectors", str(path), "--max-time", "0", "--large-stores", "off",
                   "--depth", "off", "--out", str(tmp_path / "d")],
        "exec": [*auxspec, "verify", "--exec", shlex.join([*auxspec, "serve"]), "--vectors", str(path),
                 "--max-time", "0", "--out", str(tmp_path / "e")],
    }  # fmt: skip
    for name, argv in runs.items():
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=120, preexec_fn=lambda: _limited(_ADDRESS_SPACE)
        )
        said = done.stdout + done.stderr
        assert done.returncode == cli.NOT_RUNNABLE, (name, said[-2000:])
        assert "not runnable here (max_bytes=1073741824, object_nbytes=4194304" in said, (name, said[-2000:])
        assert "MemoryError" in said and "Traceback" not in said and "divergence" not in said, (name, said[-2000:])
    assert "its store holds up to 4,194,304 bytes at once" in subprocess.run(
        runs["reproduce"], capture_output=True, text=True, timeout=120, preexec_fn=lambda: _limited(_ADDRESS_SPACE)
    ).stderr
    served = subprocess.run(
        [*auxspec, "serve"],
        input=json.dumps({"id": 1, "op": "new", "max_bytes": 256 * nbytes, "object_nbytes": nbytes})
        + "\n"
        + json.dumps({"id": 2, "op": "put", "objects": [["k", "31" * nbytes]]})
        + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: _limited(_ADDRESS_SPACE),
    )
    answers = [json.loads(line) for line in served.stdout.splitlines()]
    assert served.returncode == 0 and answers[0] == {"id": 1, "ok": None}, served.stderr
    assert answers[1]["error"] == "resources" and "MemoryError" in answers[1]["message"]


def test_a_small_store_that_fails_for_memory_is_a_divergence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Below ``MEMORY_FLOOR`` any machine holds the store: a target that
    raises ``MemoryError`` there (a size computed wrong) is judged, not excused."""
    (tmp_path / "greedy.py").write_text(
        "from auxstore import BlockObjectStore\n"
        "class Store(BlockObjectStore):\n"
        "    def put(self, *args, **kwargs):\n"
        "        raise MemoryError('asked for 2**50 bytes')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    path = _vector(tmp_path / "small.jsonl", [{"op": "put", "objects": [["a", "0102"]], "expect": {"ok": None}}])
    assert cli.main(["reproduce", str(path), "--target", "greedy:Store"]) == 1
    assert "unexpected MemoryError: asked for 2**50 bytes" in capsys.readouterr().out


# ---------------------------------------------------- 4. long batches


@pytest.mark.parametrize("count", [2_000, 60_000])
def test_explain_and_reproduce_show_a_long_batch_in_bounded_text(
    tmp_path: Path, count: int, capsys: pytest.CaptureFixture[str]
) -> None:
    objects = [[f"k{i}", "0102"] for i in range(count)]
    ops: list[dict[str, Any]] = [
        {"op": "put", "objects": objects, "retain": [f"k{i}" for i in range(count // 2)], "expect": {"ok": None}},
        {"op": "put", "objects": [], "release": [f"k{i}" for i in range(count // 2)], "expect": {"ok": None}},
        {"op": "put", "objects": [[f"n{i}", "0304"] for i in range(count)], "expect": {"ok": None}},
    ]
    path = _vector(tmp_path / "batch.jsonl", ops, max_bytes=2 * count, object_nbytes=2)
    started = time.process_time()
    assert cli.main(["explain", str(path), "--html", str(tmp_path / "b.html")]) == 0
    text = capsys.readouterr().out
    middle = time.process_time()
    assert cli.main(["reproduce", str(path)]) == 0
    replayed = capsys.readouterr().out
    print(f"{count} objects: explain {middle - started:.1f} s, reproduce {time.process_time() - middle:.1f} s CPU")
    # Rows show their ends and lists their first LIST_SHOWN keys: the text
    # does not grow with the batch (60,000 keys would be megabytes).
    assert len(text) < 40_000 and (tmp_path / "b.html").stat().st_size < 400_000
    assert f"… {count - 64:,} more" in text and f"… {count - LIST_SHOWN:,} more evicted" in text
    assert len(replayed) < 100 * count  # describe() names every key of an op once: linear


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_600_000_object_batch_explains_and_reproduces(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    count = 600_000
    _vector(path, [{"op": "put", "objects": [[f"k{i}", "0102"] for i in range(count)], "expect": {"ok": None}}],
            max_bytes=2 * count, object_nbytes=2)  # fmt: skip
    for command in ("explain", "reproduce"):
        started = time.monotonic()
        done = subprocess.run(
            [str(Path(PY).parent / "auxspec"), command, str(path)], capture_output=True, text=True, timeout=280
        )
        print(f"{command} of {count:,} objects: {time.monotonic() - started:.1f} s wall")
        assert done.returncode == 0, done.stderr[-2000:]


# ----------------------------------------------------- 5. no traceback


def test_the_cases_the_issue_lists_exit_with_a_documented_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    get = [{"op": "get", "keys": [], "expect": {"ok": ""}}]
    for size in ("NaN", "1e999", "-Infinity"):
        path = tmp_path / f"h-{size}.jsonl"
        path.write_text(json.dumps(HEADER).replace('"max_bytes": 4', f'"max_bytes": {size}') + "\n")
        assert cli.main(["reproduce", str(path)]) == 0  # the store cannot be built: no op runs, both agree
        assert "the store cannot be built" in capsys.readouterr().out
    deep = tmp_path / "deep"
    deep.write_text("[" * 100_000)
    assert cli.main(["explain", str(deep)]) == 0  # no .jsonl, not a trace: a fuzzer input
    deep_trace = tmp_path / "deep.jsonl"
    deep_trace.write_text("[" * 100_000)
    assert cli.main(["explain", str(deep_trace)]) == 2
    assert "nested deeper than 16" in capsys.readouterr().err
    malformed = _vector(tmp_path / "bad.jsonl", get)
    malformed.write_text(malformed.read_text() + "{not json\n")
    assert cli.main(["explain", str(malformed)]) == 2
    assert "bad.jsonl:3: not JSON" in capsys.readouterr().err
    assert cli.main(["explain", str(malformed), "--fuzz"]) == 0  # asked to read raw fuzzer bytes
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli.main(["verify", "--vectors", str(empty), "--max-time", "0"]) == 2
    assert "no vector file" in capsys.readouterr().err
    for command in (["explain", str(malformed), "--exec", "true"], ["reproduce", str(malformed), "--exec", "true"]):
        with pytest.raises(SystemExit) as exit_:
            cli.main([*command, "--op-timeout", "1e308"])
        assert exit_.value.code == 2
    assert "up to 86400" in capsys.readouterr().err


# Any text, or a key holding one lone surrogate, control or format character
# (a bidi override); two surrogates side by side would read back as one pair.
_KEYS = st.one_of(st.text(max_size=4), st.characters(categories=["Cs", "Cc", "Cf"]).map(lambda c: f"k{c}"))
_OPS = st.one_of(
    st.builds(
        lambda key, payload: json.dumps({"op": "put", "objects": [[key, payload]], "expect": {"ok": None}}),
        _KEYS,
        st.sampled_from(["0102", "0304", "01", "zz"]),
    ),
    st.builds(lambda key: json.dumps({"op": "get", "keys": [key], "expect": {"error": "missing"}}), _KEYS),
)
_LINES = st.one_of(
    _OPS,
    st.just(json.dumps(HEADER)),
    st.builds(lambda v: json.dumps({**HEADER, "max_bytes": v}), st.one_of(st.floats(), st.integers(), st.text())),
    st.text(max_size=40),
    st.just("[" * 2000),
)
_CONTENTS = st.one_of(
    # A valid header and then op lines (their expectations may be stale), or any lines.
    st.lists(_OPS, max_size=4).map(lambda ops: "\n".join([json.dumps(HEADER), *ops]).encode()),
    st.lists(_LINES, max_size=4).map(
        lambda lines: "\n".join([json.dumps(HEADER), *lines]).encode("utf-8", "surrogatepass")
    ),
    st.lists(_LINES, max_size=5).map(lambda lines: "\n".join(lines).encode("utf-8", "surrogatepass")),
    st.binary(max_size=200),
)
_FLAGS = st.lists(
    st.sampled_from(
        [["--profile", "upstream"], ["--op-timeout", "nan"], ["--op-timeout", "1e308"], ["--op-timeout", "0.5"]]
    ),
    max_size=2,
)


@pytest.mark.timeout(300)
@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(
    content=_CONTENTS,
    suffix=st.sampled_from([".jsonl", ""]),
    command=st.sampled_from(["explain", "explain --fuzz", "reproduce", "reproduce --raw", "vectors", "verify"]),
    flags=_FLAGS,
)
def test_no_command_raises_on_any_file_or_flag(
    tmp_path_factory: pytest.TempPathFactory, content: bytes, suffix: str, command: str, flags: list[list[str]]
) -> None:
    folder = tmp_path_factory.mktemp("fuzz")
    path = folder / f"input{suffix}"
    path.write_bytes(content)
    name, *extra = command.split()
    if name == "vectors":
        argv = ["vectors", "--check", str(folder), "--min-coverage", "0"]
    elif name == "verify":
        argv = [
            "verify",
            "--vectors",
            str(path),
            "--max-time",
            "0",
            "--large-stores",
            "off",
            "--out",
            str(folder / "d"),
        ]
    else:
        argv = [name, str(path), *extra]
    for flag in flags:
        if name in ("explain", "reproduce") or (flag[0] == "--profile" and name == "verify"):
            argv += flag
    # Written through strict UTF-8, as a terminal would take it: an
    # unescaped lone surrogate fails here.
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    code: object
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            code = cli.main(argv)
        except SystemExit as exit_:  # argparse: a usage error
            code = exit_.code
        out.flush()
    assert code in (0, 1, 2)


_SIZES = st.one_of(st.integers(-2, 2**70), st.floats(), st.text(max_size=3), st.none(), st.booleans())
_REQUESTS = st.one_of(
    st.builds(lambda m, o: {"op": "new", "max_bytes": m, "object_nbytes": o}, _SIZES, _SIZES),
    st.just({"op": "new", "max_bytes": 2**40, "object_nbytes": 2**40}),
    st.just({"op": "hello", "protocol": 2}),
    _OPS.map(json.loads).map(lambda op: {k: v for k, v in op.items() if k != "expect"}),
    st.sampled_from([{"op": "snapshot"}, {"op": "len"}, {"op": "stats"}, {"op": "close"}, {"op": "nope"}]),
)


@pytest.mark.timeout(300)
@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(requests=st.lists(_REQUESTS, max_size=6), garbage=st.one_of(st.none(), st.binary(max_size=40)))
def test_serve_answers_any_request_or_exits_with_a_documented_status(
    requests: list[dict[str, Any]], garbage: bytes | None
) -> None:
    from auxspec.drivers.protocol import offer_of
    from auxspec.engine.target import load_target

    target = load_target(None)  # the bundled store, as `auxspec serve` runs it
    lines = [json.dumps({"id": number, **request}).encode() for number, request in enumerate(requests, 1)]
    if garbage is not None:
        lines.append(garbage)
    out, err = io.StringIO(), io.StringIO()
    code = serve(target.factory, io.BytesIO(b"\n".join(lines) + b"\n"), out, err, offer_of(target))
    # 1 would be the bundled store raising what no error kind stands for (a MemoryError, say): a bug here.
    assert code in (0, 3), err.getvalue()
    for answer in map(json.loads, out.getvalue().splitlines()):
        assert set(answer) <= {"id", "ok", "error", "message"}


# --------------------------------------------------------- 6. ports


_FORKING_PORT = """
import subprocess, sys
child = subprocess.Popen(["sleep", "300"])
open(sys.argv[1], "w").write(str(child.pid))
sys.stderr.write("x" * 2500 + "END")
sys.stderr.flush()
sys.exit(4)  # before answering anything: a broken port
"""


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")  # killed, not yet reaped by whoever inherited it


@pytest.mark.timeout(120)
def test_a_port_and_everything_it_started_end_with_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = tmp_path / "port.py"
    port.write_text(_FORKING_PORT)
    pid_file = tmp_path / "child.pid"
    command = f"{shlex.quote(PY)} {shlex.quote(str(port))} {shlex.quote(str(pid_file))}"
    assert cli.main(["verify", "--exec", command, "--max-time", "0", "--op-timeout", "2"]) == 2
    err = capsys.readouterr().err
    child = int(pid_file.read_text())
    end = time.monotonic() + 10
    while not _gone(child) and time.monotonic() < end:  # SIGKILL is delivered asynchronously
        time.sleep(0.05)
    assert _gone(child), f"the port's child {child} outlived verify"
    # The stderr tail: its last STDERR_TAIL bytes, not 500.
    tail = err.split("its stderr ends: ", 1)[1].strip()
    assert tail.endswith("END") and len(tail) == STDERR_TAIL, len(tail)


@pytest.mark.timeout(300)
def test_a_port_in_its_own_process_group_still_conforms() -> None:
    auxspec = str(Path(PY).parent / "auxspec")
    done = subprocess.run(
        [auxspec, "verify", "--exec", f"{shlex.quote(str(auxspec))} serve", "--max-time", "1",
         "--large-stores", "off", "--seed", "1"],
        capture_output=True, text=True, timeout=280, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


_SLOW_PORT = """
import json, sys, time
for number, line in enumerate(sys.stdin, 1):
    time.sleep(1.5)  # before every answer: the first includes the port's start, the later ones do not
    print(json.dumps({"id": json.loads(line)["id"], "error": "unsupported"}), flush=True)
"""


@pytest.mark.timeout(120)
def test_the_first_request_waits_for_the_start_and_later_ones_the_op_timeout(tmp_path: Path) -> None:
    from auxspec.drivers.protocol import START_TIMEOUT, V1, PortProcess, ProtocolError

    port = tmp_path / "slow.py"
    port.write_text(_SLOW_PORT)
    process = PortProcess(f"{shlex.quote(PY)} {shlex.quote(str(port))}", op_timeout=0.5)
    try:
        assert process.hello() == V1  # answered after 1.5 s: within START_TIMEOUT (protocol.md, Limits)
        with pytest.raises(ProtocolError, match=r"no answer within 0\.5 s"):
            process.request({"op": "new", "max_bytes": 4, "object_nbytes": 2})
    finally:
        process.kill()
    doc = (Path(__file__).parents[1] / "docs" / "protocol.md").read_text()
    assert f"`--op-timeout` seconds, but at least {START_TIMEOUT:g}" in doc  # what protocol.md states
