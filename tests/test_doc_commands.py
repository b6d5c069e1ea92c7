"""Every shell command shown in the docs runs, as a reader would type it.

tests/test_docs.py runs the ```python blocks; this runs the ```sh (and
```bash, ```console, ```shell) blocks of the site's pages and of the READMEs.
Each command line is matched by exactly one rule of ``RULES``, which says how
the suite exercises it:

- ``Run``: the command itself, in a scratch copy of a reader's checkout, with
  the docs' placeholders (``mypkg.store:MyStore``, ``myport.py``, ``./myport``,
  ``path/to/store.py``, a fuzzer ``crash-...`` file) made real, and time budgets
  cut to a few seconds (``--max-time 60`` becomes ``--max-time 2``, ``--max-time 0``
  stays, and a ``verify`` with its default budget gets ``--max-time 2``; nothing
  else in the command changes; a command shown on several pages runs once). It must exit with the stated code and print
  no traceback.
- ``Elsewhere``: a named test file runs the same command (the long checks
  whose full cost the suite already pays once); the test file must exist
  and name the command.
- ``NotRun``: the command acts on the reader's own machine or history
  (installs, git commits, an older checkout, the suite itself), with the
  reason.

A command no rule matches fails ``test_every_command_has_a_rule``, so a new
example cannot land unexercised; a rule no command matches fails too.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from auxspec.engine.target import upstream_path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
_FENCE = re.compile(r"^```(?:sh|bash|console|shell)[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_TRACEBACK = "Traceback (most recent call last)"


def _pages() -> list[Path]:
    pages = sorted((ROOT / "docs").rglob("*.md"))
    pages += sorted(path for path in ROOT.rglob("README.md") if not {".venv", "node_modules", ".git"} & set(path.parts))
    return pages


@dataclass(frozen=True)
class Command:
    page: Path
    line: int  # of the command in the page
    text: str  # as shown, without its trailing comment

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def commands_of(page: Path) -> list[Command]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in _FENCE.finditer(text):
        first = text.count("\n", 0, match.start(1)) + 1
        pending, start = "", 0
        for offset, raw in enumerate(match.group(1).splitlines()):
            start = start if pending else offset
            pending += raw.rstrip()
            if pending.endswith("\\"):
                pending = pending[:-1] + " "
                continue
            shown = _without_comment(pending).strip()
            if shown:
                found.append(Command(page, first + start, shown if "'" in shown else " ".join(shown.split())))
            pending = ""
    return found


def _without_comment(line: str) -> str:
    """``line`` up to a ``#`` that starts a shell comment (outside quotes, after a blank)."""
    quote = ""
    for at, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (at == 0 or line[at - 1].isspace()):
            return line[:at]
    return line


ALL_COMMANDS = [command for page in _pages() for command in commands_of(page)]
# A command shown on several pages runs once, under its first place's name.
UNIQUE_COMMANDS = list({command.text: command for command in reversed(ALL_COMMANDS)}.values())[::-1]


# --- how each command is exercised ---------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """Run the command; ``exit_code`` is what a correct checkout gives."""

    exit_code: int = 0
    why: str = ""  # for an exit code other than 0
    needs_upstream: bool = False
    env: dict[str, str] = field(default_factory=dict)  # placeholders this command means differently


@dataclass(frozen=True)
class Elsewhere:
    test_file: str
    needle: str  # what the test file runs, as it spells it


@dataclass(frozen=True)
class NotRun:
    why: str


Plan = Run | Elsewhere | NotRun

REMOTE_VERIFY = "tests/test_remote_verify.py"  # verify --profile remote needs a live server, which it starts
# First match wins; each pattern is searched in the command as shown.
RULES: list[tuple[str, Plan]] = [
    (r"^make test$", NotRun("the command that runs this suite: CI runs it (.ci/run)")),
    (r"^make test-(long|all)$", NotRun("the long tier, which includes this suite's run: CI runs it (.ci/run)")),
    (r"^tools/peak_tree\.py make ", NotRun("measures the README's commands, which CI runs (test_peak_tree.py)")),
    (r"^\.venv/bin/pytest tests/", NotRun("a file of this suite, which runs it")),
    (r"^pip install -e ", NotRun("an install into the reader's own venv; `make`'s first run does the same")),
    (r"^git (add|commit) ", NotRun("commits to the reader's checkout")),
    (r"test_against_auxstore\.py", NotRun("vLLM's own tests from its sdist, not redistributed (docs/drop-in.md)")),
    (r"\$OLD", NotRun("needs a checkout of an older commit ($OLD) beside this one")),
    (r"stamina", NotRun("the stamina run, about 100 minutes of both cores; these fuzz/run flags run above")),
    (r"^make verify$", Elsewhere("tests/test_doc_commands.py", "test_make_verify_recipe_runs")),
    (r"fuzz/coverage --check --with-faults", Elsewhere("tests/test_fuzz_corpus.py", "--with-faults")),
    (r"^AUXSTORE_REDIS_URL=\S+ auxspec verify --profile remote --exec", Elsewhere(REMOTE_VERIFY, '"--exec", _serve(')),
    (r"^AUXSTORE_REDIS_URL=\S+ auxspec verify --profile remote", Elsewhere(REMOTE_VERIFY, '"remote", STORE')),
    (r"mooncake_master --rpc_port", NotRun("a server left running on fixed ports; test_remote_mooncake.py starts one")),
    (r"tests/ports/subtle/measure\.py", Elsewhere("tests/test_doc_commands.py", "test_measure_runs")),
    (r"tools/playground/measure_load\.py", Elsewhere("tests/test_playground.py", "tools/playground/measure_load.py")),
    # A tiny port that passes the first exercise only (docs/exercises.md).
    (r"^auxspec verify myport\.py --max-time", Run(1, "the exercises' tiny port passes only the first exercise")),
    (r"^auxspec explain divergence\.jsonl --target", Run(1, "the port still diverges there: explain says so")),
    (r"-minimize_crash=1", Run(1, "the stand-in crash file does not crash the correct port: libFuzzer says so")),
    (r"AUXSPEC_PROFILE=upstream", Run(needs_upstream=True, env={"PORT": "upstream"})),
    (r"vllm_store\.py|bench_\w+\.py", Run(needs_upstream=True)),  # every benchmark's baseline is vLLM's module
    (r".", Run()),
]


def plan_of(command: Command) -> Plan:
    return next(plan for pattern, plan in RULES if re.search(pattern, command.text))


# --- a reader's checkout -------------------------------------------------------------------------

# Budgets cut so that each command takes seconds; every other word stays.
_BUDGETS = {"--max-time": 2.0, "--time": 2.0, "--seconds": 0.2, "--runs": 50.0, "--repeat": 3.0}
_INLINE_BUDGETS = {"-max_total_time": 2.0, "-runs": 200.0}
_SHORT_RUNS = {
    # Scripts whose default run is long: the flags that make the same run short.
    "benchmarks/bench_store.py": "--quick",
    "benchmarks/bench_scale.py": "--quick",
    "benchmarks/bench_growth.py": "--quick",
    "benchmarks/bench_mooncake.py": "--quick",
    "fuzz/throughput": "--seconds 0.2 --runs 50 --inputs 20",
    "fuzz/run": "--time 2",
}
_OPERATORS = re.compile(r"&&|\|\||[|;]|2>&1")

PLAIN_PORT = '''"""A correct strict port written apart from auxstore (tests/ports/simple_port.py)."""
import sys
sys.path.insert(0, {ports!r})
from simple_port import make

MyStore = BlockObjectStore = make(None)
'''


def _tiny_port() -> str:
    text = (ROOT / "docs" / "exercises.md").read_text(encoding="utf-8")
    match = re.search(r"TINY_PORT = '''(.*?)'''", text, re.DOTALL)
    assert match, "docs/exercises.md no longer defines TINY_PORT"
    return match.group(1)


def _reader_checkout(where: Path, port: str) -> Path:
    """Links to the checkout, a copy of what commands write into, the docs' placeholders."""
    where.mkdir()
    copied = {"fuzz", "ports", "docs"}  # fuzz/run merges into fuzz/corpus/; make -C ports/c builds there; plots
    for entry in ROOT.iterdir():
        if entry.name.startswith(".") or entry.name in copied:
            continue
        (where / entry.name).symlink_to(entry)
    for name in copied:
        shutil.copytree(ROOT / name, where / name, ignore=shutil.ignore_patterns("artifacts", "__pycache__", "auxport"))
    (where / ".venv").symlink_to(BIN.parent)
    store = upstream_text() if port == "upstream" else PLAIN_PORT.format(ports=str(ROOT / "tests" / "ports"))
    for name in ("mypkg/store.py", "path/to/store.py", "path/to/port.py", "path/to/other/store.py"):
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(store if "other" not in name else upstream_text(), encoding="utf-8")
    (where / "mypkg" / "__init__.py").write_text("", encoding="utf-8")
    (where / "myport.py").write_text(_tiny_port(), encoding="utf-8")
    server = where / "myport"  # a process port: the plain port behind `auxspec serve`
    server.write_text(f'#!/bin/sh\nexec "{BIN}/auxspec" serve "{where}/mypkg/store.py"\n', encoding="utf-8")
    server.chmod(server.stat().st_mode | stat.S_IXUSR)
    subprocess.run(["make", "-C", "ports/c"], cwd=where, capture_output=True, check=True)  # as ports/c/README.md says
    crash = where / "fuzz" / "artifacts" / "store"
    crash.mkdir(parents=True)
    seed = sorted((ROOT / "fuzz" / "corpus" / "store").iterdir())[0]
    for name in ("crash-4f0c...", "crash-..."):
        shutil.copyfile(seed, crash / name)
    subprocess.run(  # what an earlier command would have left: a divergence of the tiny port
        [str(BIN / "auxspec"), "verify", "myport.py", "--vectors", "docs/exercises/2-recency", "--max-time", "0"],
        cwd=where,
        capture_output=True,
        check=False,
    )
    assert (where / "divergence.jsonl").is_file()
    return where


def upstream_text() -> str:
    """vLLM's module (the commands that need it skip without it)."""
    upstream = upstream_path()
    return upstream.read_text(encoding="utf-8") if upstream is not None and _upstream_available() else "# vLLM absent\n"


def _cut(match: re.Match[str], budgets: dict[str, float]) -> str:
    flag, separator, value = match.group(1), match.group(2), match.group(3)
    short = min(float(value), budgets[flag])  # cut, never raised
    return f"{flag}{separator}{short:g}"


def _shell(command: str, where: Path) -> str:
    """``command`` as run here: budgets cut, vLLM's module and /tmp/ found where they are."""
    flags = "|".join(re.escape(flag) for flag in _BUDGETS)
    text = re.sub(rf"(?<!\S)({flags})(\s+)(\d+(?:\.\d+)?)", lambda m: _cut(m, _BUDGETS), command)
    inline = "|".join(re.escape(flag) for flag in _INLINE_BUDGETS)
    text = re.sub(rf"(?<!\S)({inline})(=)(\d+)", lambda m: _cut(m, _INLINE_BUDGETS), text)
    # /tmp/ first: vLLM's module may itself lie under /tmp/ (a checkout cloned there), and its path is quoted
    # (a checkout's path may hold a space).
    text = re.sub(r"(?<![\w.])/tmp/", f"{where}/tmp/", text)
    upstream = upstream_path()
    if upstream is not None:
        text = text.replace("../shared/upstream/vllm_store.py", shlex.quote(str(upstream)))
    if not _OPERATORS.search(text):
        for script, extra in _SHORT_RUNS.items():
            named = re.search(rf"(?<!\S){re.escape(script)}(?!\S)", text)
            if named and not {word for word in extra.split() if word.startswith("-")} & set(text.split()):
                text += " " + extra
        words = text.split()
        if "verify" in words and "--max-time" not in words and words[0].endswith("auxspec"):
            text += " --max-time 2"  # verify's default budget (30 s), cut like the others
    (where / "tmp").mkdir(exist_ok=True)
    return text


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """A reader's checkout per port behind the placeholders ("plain" or "upstream"), made once."""
    base = tmp_path_factory.mktemp("reader")
    made: dict[str, Path] = {}

    def get(port: str) -> Path:
        if port not in made:
            made[port] = _reader_checkout(base / port, port)
        return made[port]

    return get


def _upstream_available() -> bool:
    upstream = upstream_path()
    return upstream is not None and upstream.is_file()


# Commands whose shortest run still takes minutes on a loaded 2-core machine (every fuzzing harness started
# once or more, the benchmarks' timed loops, the corpus under coverage): the long tier (make test-long) runs them.
SLOW_COMMANDS = re.compile(r"fuzz/(run|throughput|coverage)\b|benchmarks/bench_\w+\.py|-minimize_crash")


def _params(commands: list[Command]) -> list[object]:
    return [
        pytest.param(command, id=command.name, marks=[pytest.mark.slow] if SLOW_COMMANDS.search(command.text) else [])
        for command in commands
    ]


@pytest.mark.parametrize("command", _params(UNIQUE_COMMANDS))
def test_doc_command(command: Command, checkout: Callable[[str], Path]) -> None:
    plan = plan_of(command)
    if isinstance(plan, NotRun):
        pytest.skip(f"not run: {plan.why}")
    if isinstance(plan, Elsewhere):
        source = (ROOT / plan.test_file).read_text(encoding="utf-8")
        assert plan.needle in source, f"{plan.test_file} no longer runs {command.text!r}"
        return
    if plan.needs_upstream and not _upstream_available():
        pytest.skip("needs vLLM's module (set AUXSTORE_UPSTREAM or add ../shared/upstream)")
    where = checkout(plan.env.get("PORT", "plain"))
    _run_expecting(_shell(command.text, where), where, plan.exit_code, plan.why)


def _run_expecting(command: str, where: Path, exit_code: int, why: str = "") -> str:
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    result = subprocess.run(
        ["bash", "-c", command], cwd=where, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    output = result.stdout + result.stderr
    assert _TRACEBACK not in output, f"{command}\n{output[-4000:]}"
    assert result.returncode == exit_code, (
        f"{command} exited {result.returncode}, expected {exit_code} {why}\n{output[-4000:]}"
    )
    return output


def _verify_recipe() -> list[str]:
    lines = (ROOT / "Makefile").read_text(encoding="utf-8").splitlines()
    start = lines.index(next(line for line in lines if line.startswith("verify:")))
    recipe = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip().replace("$(BIN)/", ".venv/bin/"))
    return recipe


def test_make_verify_recipe_runs(checkout: Callable[[str], Path]) -> None:
    # `make verify` is three commands: CrossHair over the model, whose whole run
    # tests/test_crosshair_teeth.py makes (check_models must pass on the model), and
    # two commands run here as the reader's checkout would, the verify budget cut.
    recipe = _verify_recipe()
    assert recipe[0] == ".venv/bin/python -m auxspec.checks.crosshair", recipe
    assert "check_models" in (ROOT / "tests" / "test_crosshair_teeth.py").read_text(encoding="utf-8")
    assert [line.split()[1] for line in recipe[1:]] == ["vectors", "verify"], recipe
    where = checkout("plain")
    for line in recipe[1:]:
        output = _run_expecting(_shell(line, where), where, 0)
        assert "conforms" in output or "match the spec" in output, output[-2000:]


def test_measure_runs(checkout: Callable[[str], Path]) -> None:
    # measure.py as verifying-a-port.md shows it, on one buggy port and one rewrite
    # (every port is run by the suite's port tests); the table names both.
    where = checkout("plain")
    script = "tests/ports/subtle/measure.py"
    command = f".venv/bin/python {script} --seeds 1 --max-time 60 --only c_count_saturates_at_7 r_plain --out table.md"
    output = _run_expecting(_shell(command, where), where, 0)
    table = (where / "table.md").read_text(encoding="utf-8")
    assert "c_count_saturates_at_7" in table and "r_plain" in table, table + output[-2000:]


def test_every_command_has_a_rule() -> None:
    # Every command has a plan (the catch-all runs it), and every rule but the last names a command.
    assert ALL_COMMANDS, "no shell commands found in the docs"
    used = {next(pattern for pattern, _ in RULES if re.search(pattern, command.text)) for command in ALL_COMMANDS}
    dead = [pattern for pattern, _ in RULES[:-1] if pattern not in used]
    assert not dead, f"rules that match no command in the docs: {dead}"


def test_command_extraction(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "x\n```sh\n# a comment\nauxspec verify a.py \\\n  --max-time 60   # one minute\n\n```\n"
        "```python\nprint(1)\n```\n```bash\nmake -C ports/c\n```\n",
        encoding="utf-8",
    )
    assert [(c.line, c.text) for c in commands_of(page)] == [
        (4, "auxspec verify a.py --max-time 60"),
        (12, "make -C ports/c"),
    ]


@pytest.mark.parametrize("tier", ["fast", pytest.param("long", marks=pytest.mark.slow)])
def test_no_command_wrote_into_the_tracked_tree(tier: str, checkout: Callable[[str], Path]) -> None:
    # Last in this file: after every command above (of this tier) ran in the reader's checkout, the copied
    # tracked folders hold exactly the tracked files (fuzzing and verifying write into ignored folders or /tmp/).
    where = checkout("plain")
    tracked = subprocess.run(
        ["git", "ls-files", "fuzz", "docs"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout: the tracked files are unknown")
    ignored = re.compile(r"(^|/)(__pycache__|artifacts)(/|$)")
    present = {
        str(path.relative_to(where))
        for folder in ("fuzz", "docs")
        for path in (where / folder).rglob("*")
        if path.is_file() and not ignored.search(str(path.relative_to(where)))
    }
    assert present - set(tracked) == set(), "commands left untracked files in the tracked tree"
