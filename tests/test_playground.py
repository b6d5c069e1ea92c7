"""The docs site's playground (docs/playground.md): ``auxspec.teach.playground``
checked against the reference store, the semantics page's links into it, and
the built page in a real headless Chromium, served from a loopback static
server, played op by op and held against the reference store at every op.

The browser test needs Debian's ``chromium`` and ``chromium-driver`` and
``npm`` (the site build fetches Pyodide with it); it skips where one is
missing, except under CI, where a missing tool is a failure.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

from _site import CHROMIUM, DRIVER, chromium, mkdocs_build, served
from auxspec import ReferenceStore, cli
from auxspec.engine import traces
from auxspec.engine.compare import apply
from auxspec.engine.ops import Close, Get, Op, Put, ReadInto, Trace
from auxspec.engine.table import kind_of
from auxspec.models import remote
from auxspec.teach import playground, remote_play
from auxspec.teach.play import Session, parse_op

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
EXAMPLE = DOCS / "playground" / "example.jsonl"
SIZES = {"max_bytes": 6, "object_nbytes": 2}  # capacity 3


def _objects(*keys: str) -> tuple[tuple[str, bytes], ...]:
    return tuple((key, key.encode() * 2) for key in keys)  # a command's payload: the key repeated


# Each command as the page takes it, with the op it must stand for, written out
# here by hand (not parsed), and how the browser test enters it. The trace
# pins, evicts, fails for capacity, misses, reads into a buffer, releases to
# zero and closes.
TRACE: list[tuple[str, Op, str]] = [
    ("put a b --retain a", Put(_objects("a", "b"), ("a",)), "click"),
    ("put c", Put(_objects("c")), "type"),
    ("get b", Get(("b",)), "click"),
    ("put d", Put(_objects("d")), "type"),  # evicts c: a is pinned, b was read after c
    ("retain b", Put((), ("b",)), "click"),
    ("put e f --retain x", Put(_objects("e", "f"), ("x",)), "click"),  # a, b pinned, e, f protected: only d can go
    ("read a d", ReadInto(("a", "d"), 4), "click"),
    ("release a", Put((), (), ("a",)), "click"),
    ("put e f", Put(_objects("e", "f")), "type"),
    ("get c", Get(("c",)), "type"),
    ("close", Close(), "click"),
    ("get a", Get(("a",)), "type"),
]
COMMANDS = [command for command, _, _ in TRACE]


def _request(profile: str, commands: list[str], **sizes: int) -> str:
    return json.dumps({"profile": profile, **(sizes or SIZES), "commands": commands})


def _state(snapshot: Any) -> dict[str, Any]:
    return {
        "entries": [[key, payload.hex()] for key, payload in snapshot.entries],
        "references": [[key, count] for key, count in snapshot.references],
        "closed": snapshot.closed,
    }


def reference_run(profile: str, ops: list[Op], **sizes: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Each op's outcome (as a trace writes it) and the state after it, from the reference store."""
    store = ReferenceStore(**(sizes or SIZES), profile=profile)
    seen = []
    for op in ops:
        outcome = apply(store, op)
        seen.append((traces.outcome_to_json(outcome), _state(store.snapshot())))
    return seen


# --------------------------------------------------------------- the module


@pytest.mark.parametrize("profile", ["strict", "upstream"])
def test_each_step_is_the_reference_stores(profile: str) -> None:
    view = json.loads(playground.view(_request(profile, COMMANDS)))
    assert view["refused"] is None and view["capacity"] == 3
    expected = reference_run(profile, [op for _, op, _ in TRACE])
    got = [(step["outcome"], step["state"]) for step in view["steps"]]
    assert got == expected
    outcomes = [outcome for outcome, _ in expected]
    # The trace does what it is for, under both profiles.
    assert {"error": "capacity"} in outcomes and {"error": "missing"} in outcomes
    assert outcomes[-1] == {"error": "closed"}
    assert [step["evicted"] for step in view["steps"]][3] == ["c"]
    assert view["steps"][4]["state"]["references"] == [["a", 1], ["b", 1]]
    for step, command in zip(view["steps"], COMMANDS, strict=True):
        assert step["command"] == command
        assert step["html"].startswith('<section class="step"') and "<svg" in step["html"]


def test_the_profiles_differ_where_the_spec_says() -> None:
    strict, upstream = (json.loads(playground.view(_request(p, COMMANDS)))["steps"] for p in ("strict", "upstream"))
    # A strict capacity failure changes nothing; upstream keeps the pins it took (DESIGN, two profiles).
    assert strict[5]["outcome"] == upstream[5]["outcome"] == {"error": "capacity"}
    assert strict[5]["state"] == strict[4]["state"]
    assert upstream[5]["state"]["references"] == [["a", 1], ["b", 1], ["x", 1]]


def test_a_refused_command_ends_the_session_there() -> None:
    for profile, commands, index, why in (
        ("strict", ["put a", "undo", "put b"], 1, "unknown command 'undo'"),
        ("strict", ["put a", "read a --buffer x"], 1, "--buffer takes a number"),
        ("strict", ["put a", "put 'b"], 1, "No closing quotation"),
        ("strict", ["put a", "  "], 1, "an empty command"),
        ("upstream", ["put a", "put b=00", "put c"], 1, "upstream profile leaves this input undefined"),
    ):
        view = json.loads(playground.view(_request(profile, commands)))
        assert view["refused"]["index"] == index and view["refused"]["command"] == commands[index]
        assert why in view["refused"]["why"]
        assert len(view["steps"]) == index
    # Under strict the same payload is an ordinary error that changes nothing.
    strict = json.loads(playground.view(_request("strict", ["put a", "put b=00"])))
    assert strict["refused"] is None and strict["steps"][1]["outcome"] == {"error": "payload"}


def test_a_store_that_cannot_be_built_has_no_steps() -> None:
    view = json.loads(playground.view(_request("strict", ["put a"], max_bytes=1, object_nbytes=2)))
    assert view["capacity"] is None and view["steps"] == [] and "not built" in view["header"]


@pytest.mark.parametrize(
    "request_json",
    [
        json.dumps(["strict", 6, 2]),
        json.dumps({"profile": "lax", **SIZES, "commands": []}),
        json.dumps({"profile": "strict", "max_bytes": "6", "object_nbytes": 2, "commands": []}),
        json.dumps({"profile": "strict", "max_bytes": True, "object_nbytes": 2, "commands": []}),
        json.dumps({"profile": "strict", **SIZES, "commands": "put a"}),
        json.dumps({"profile": "strict", **SIZES, "commands": ["len"] * (playground.MAX_COMMANDS + 1)}),
    ],
)
def test_a_request_the_page_never_sends_is_refused(request_json: str) -> None:
    with pytest.raises(playground.BadSession):
        playground.view(request_json)


@pytest.mark.parametrize("profile", ["strict", "upstream"])
def test_the_export_is_a_vector_of_the_session(profile: str, tmp_path: Path) -> None:
    text = playground.export(_request(profile, [*COMMANDS, "bogus", "put z"]))
    vector = traces.loads(text)
    assert vector.trace == Trace(profile, SIZES["max_bytes"], SIZES["object_nbytes"], tuple(op for _, op, _ in TRACE))
    reference = reference_run(profile, list(vector.trace.ops))
    assert [traces.outcome_to_json(o) for o in vector.expected] == [outcome for outcome, _ in reference]
    assert "put a b --retain a; put c" in vector.description
    if profile == "strict":  # the bundled store is strict
        path = tmp_path / "playground.jsonl"
        path.write_text(text, encoding="utf-8")
        assert cli.main(["reproduce", str(path)]) == 0


def test_the_committed_example_is_the_playgrounds_export() -> None:
    """docs/playground.md's commands replay docs/playground/example.jsonl (tests/test_doc_commands.py runs them)."""
    assert EXAMPLE.read_text(encoding="utf-8") == playground.export(_request("strict", COMMANDS))


def test_the_page_path_imports_neither_rich_nor_hypothesis() -> None:
    """The page imports the module from the wheel in Pyodide, where neither is installed."""
    code = (
        "import sys\n"
        "sys.modules.update({name: None for name in ('rich', 'hypothesis')})\n"
        "from auxspec.teach import playground\n"
        'print(playground.view(\'{"profile": "strict", "max_bytes": 4, "object_nbytes": 2, '
        '"commands": ["put a"]}\'))\n'
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["steps"][0]["state"]["entries"] == [["a", "6161"]]


def test_the_script_finds_every_element_it_uses() -> None:
    script = (DOCS / "playground" / "playground.js").read_text(encoding="utf-8")
    page = (DOCS / "playground.md").read_text(encoding="utf-8")
    used = set(re.findall(r"\$\('(pg-[\w-]+)'\)", script)) | set(re.findall(r"'(pg-[\w-]+)': \(\)", script))
    assert len(used) > 20
    missing = sorted(name for name in used if f'id="{name}"' not in page)
    assert not missing


def _sections() -> list[tuple[str, str]]:
    text = (DOCS / "semantics.md").read_text(encoding="utf-8")
    parts = re.split(r"^## ", text, flags=re.MULTILINE)[1:]
    return [(part.splitlines()[0], part) for part in parts]


NO_PLAYGROUND = {"Reading the pictures"}  # the key to the pictures: no rule, so no example


def section_links() -> list[tuple[str, str, dict[str, Any]]]:
    """Each section's title, its playground link's fragment and the session it decodes to."""
    found = []
    for title, body in _sections():
        links = re.findall(r"\]\(playground\.md#([^)]+)\)", body)
        if title in NO_PLAYGROUND:
            assert not links, title
            continue
        assert len(links) == 1, f"section {title!r} has no playground link"
        fields = parse_qsl(links[0], keep_blank_values=True)  # as the page's URLSearchParams reads it
        given = dict(fields)
        assert set(given) == {"profile", "max_bytes", "object_nbytes", "op"}, title
        session = {
            "profile": given["profile"],
            "max_bytes": int(given["max_bytes"]),
            "object_nbytes": int(given["object_nbytes"]),
            "commands": [value for name, value in fields if name == "op"],
        }
        found.append((title, links[0], session))
    return found


def _remote_replay(session: dict[str, Any]) -> list[tuple[list[str], dict[str, Any], dict[str, Any]]]:
    """Each op of a remote session on the remote model itself: the outcomes it allows, the one the
    link picks (``--outcome``, else the first) and the model's state after it."""
    state = remote.new(session["max_bytes"], session["object_nbytes"])
    assert isinstance(state, remote.State)
    seen = []
    play = Session(session["max_bytes"], session["object_nbytes"])
    for command in session["commands"]:
        words = command.split()
        picked = words[words.index("--outcome") + 1] if "--outcome" in words else None
        op = parse_op(play, words[: words.index("--outcome")] if picked else words)
        allowed = kind_of(op).step(remote, state, op)
        names = [remote_play.outcome_name(o) for o in allowed.outcomes()]
        taken = allowed.outcomes()[names.index(picked) if picked else 0]
        state = allowed.after(taken)
        stored = {"objects": [[k, v.hex()] for k, v in state.objects], "gone": [list(g) for g in state.gone]}
        seen.append((names, traces.outcome_to_json(taken), {**stored, "closed": state.closed}))
    return seen


def test_every_section_of_the_semantics_opens_the_playground_with_its_example() -> None:
    links = section_links()
    assert len(links) == len(_sections()) - len(NO_PLAYGROUND) >= 13
    profiles = set()
    for title, _, session in links:
        profiles.add(session["profile"])
        view = json.loads(playground.view(json.dumps(session)))
        assert view["refused"] is None and len(view["steps"]) == len(session["commands"]) >= 2, title
        got = [(step["outcome"], step["state"]) for step in view["steps"]]
        if session["profile"] == "remote":
            replayed = _remote_replay(session)
            assert [step["allowed"] for step in view["steps"]] == [names for names, _, _ in replayed], title
            assert got == [(outcome, state) for _, outcome, state in replayed], title
            continue
        # The decoded trace replayed on the reference store: each step the page shows is the store's.
        vector = traces.loads(playground.export(json.dumps(session)))
        sizes = {"max_bytes": session["max_bytes"], "object_nbytes": session["object_nbytes"]}
        assert got == reference_run(session["profile"], list(vector.trace.ops), **sizes), title
    assert profiles == {"strict", "upstream", "remote"}


def test_section_12_shows_a_call_from_inside_a_call_refused() -> None:
    """Its link's ops call back into the store from their key lists; the reference store refuses each inner
    call (compare.apply raises if one returns), the outer call goes on, and the page says why, with the rule."""
    ((_, _, session),) = [link for link in section_links() if link[0].startswith("12.")]
    view = json.loads(playground.view(json.dumps(session)))
    forms = [getattr(op, "form", "list") for op in traces.loads(playground.export(json.dumps(session))).trace.ops]
    assert {"reenter-close", "reenter-put", "reenter-get"} <= set(forms)
    for step, form in zip(view["steps"], forms, strict=True):
        if form.startswith("reenter-") and not step["state"]["closed"]:
            assert "raises ReentrantCallError and changes nothing" in step["html"]
            assert "section 12" in step["html"]
    assert view["steps"][0]["state"] == {"entries": [["a", "6161"]], "references": [["a", 1]], "closed": False}
    assert "never made" in view["steps"][-1]["html"]  # closed: the call fails before its caller code runs


def test_remote_steps_offer_every_allowed_outcome_and_refuse_the_others() -> None:
    base = {"profile": "remote", "max_bytes": 64, "object_nbytes": 2}
    view = json.loads(playground.view(json.dumps({**base, "commands": ["put a", "get a", "get a --outcome missing"]})))
    assert [step["allowed"] for step in view["steps"]] == [["ok", "capacity"], ["ok", "missing"], ["ok", "missing"]]
    assert view["steps"][-1]["state"]["objects"] == []  # a single key seen missing is gone for good
    commands = ["put a", "get a --outcome missing", "get a --outcome ok"]
    after = json.loads(playground.view(json.dumps({**base, "commands": commands})))
    assert after["refused"]["index"] == 2 and "allows missing" in after["refused"]["why"]  # R3: it never comes back
    for command, why in (("len", "not part of the remote profile"), ("get a --from-inside put", "no call from inside")):
        refused = json.loads(playground.view(json.dumps({**base, "commands": ["put a", command]})))["refused"]
        assert refused["index"] == 1 and why in refused["why"]
    assert playground.export(json.dumps({**base, "commands": ["put a"]})) == playground.NO_VECTOR


# --------------------------------------------------------------- the build step


def _build_tool() -> Any:
    spec = importlib.util.spec_from_file_location("playground_build", ROOT / "tools" / "playground" / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # as MkDocs loads a hook: by path
    return module


def test_without_npm_the_site_builds_and_leaves_the_runtime_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """`mkdocs build --strict` must pass where npm is missing: the hook logs at INFO, not WARNING."""
    build = _build_tool()
    monkeypatch.setattr(build, "CACHE", tmp_path / "cache")  # nothing fetched before
    monkeypatch.setattr(build.shutil, "which", lambda name: None)
    site = tmp_path / "site"
    with caplog.at_level(logging.DEBUG, logger="mkdocs.plugins.playground"):
        build.on_post_build({"site_dir": str(site)})
    assert not (site / "playground" / "runtime.json").exists()
    assert [(r.levelno, "npm not found" in r.getMessage()) for r in caplog.records] == [(logging.INFO, True)]
    assert build.main([str(site)]) == 1


def test_without_node_the_page_gets_no_snapshot_and_starts_python_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The snapshot is a speed-up only: without Node the build says so at INFO and the manifest names none,
    so the page unpacks the wheel and imports the spec itself; a snapshot left from an earlier build goes."""
    build = _build_tool()
    monkeypatch.setattr(build, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(build.shutil, "which", lambda name: None)
    (tmp_path / "runtime").mkdir()
    monkeypatch.setattr(build, "pyodide", lambda: tmp_path / "runtime")
    wheel = tmp_path / "cache" / "wheel-0" / "auxstore-0-py3-none-any.whl"
    wheel.parent.mkdir(parents=True)
    wheel.write_bytes(b"PK")
    monkeypatch.setattr(build, "wheel", lambda: wheel)
    stale = tmp_path / "site" / "playground" / build.SNAPSHOT
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"an earlier build's")
    with caplog.at_level(logging.DEBUG, logger="mkdocs.plugins.playground"):
        build.vendor(tmp_path / "site")
    manifest = json.loads((tmp_path / "site" / "playground" / "runtime.json").read_text(encoding="utf-8"))
    assert manifest == {"pyodide": build.PYODIDE_VERSION, "wheel": wheel.name, "snapshot": None}
    assert not stale.exists()
    assert [(r.levelno, "node not found" in r.getMessage()) for r in caplog.records] == [(logging.INFO, True)]


# --------------------------------------------------------------- the browser


NPM = shutil.which("npm")


def _need_tools() -> None:
    missing = [name for name, found in (("chromium", CHROMIUM), ("chromedriver", DRIVER), ("npm", NPM)) if not found]
    if not missing:
        return
    why = f"{', '.join(missing)} not found (.ci/run installs chromium, chromium-driver and npm)"
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the playground's browser test: {why}")
    pytest.skip(why)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _need_tools()
    built = tmp_path_factory.mktemp("site")
    done = mkdocs_build(built, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    runtime = built / "playground" / "runtime.json"
    assert runtime.is_file(), f"the build did not vendor the playground's runtime:\n{done.stderr}"
    return built


@pytest.fixture(scope="module")
def server(site: Path) -> Iterator[str]:
    """The built site over HTTP on the loopback interface, for this module's tests only."""
    with served(site) as url:
        yield url


@pytest.fixture(scope="module")
def browser(server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    driver = chromium(tmp_path_factory.mktemp("chromium-profile"), "1000,1600")
    try:
        yield driver
    finally:
        driver.quit()


def _wait(driver: Any, what: Any, seconds: float = 60) -> None:
    WebDriverWait(driver, seconds).until(lambda d: what(d))


def _root(driver: Any) -> Any:
    return driver.find_element(By.ID, "playground-app")


def _steps(driver: Any) -> int:
    return int(_root(driver).get_attribute("data-steps") or 0)


def _enter(driver: Any, command: str, how: str) -> None:
    """Type the command, or click it together from the op buttons as a learner would."""

    def field(name: str, value: str) -> None:
        box = driver.find_element(By.ID, name)
        box.clear()
        if value:
            box.send_keys(value)

    if how == "type":
        field("pg-command", command)
        driver.find_element(By.ID, "pg-command").send_keys(Keys.ENTER)
        return
    name, *rest = command.split()
    cut = rest.index("--retain") if "--retain" in rest else len(rest)
    keys, retain = rest[:cut], rest[cut + 1 :]
    field("pg-keys", " ".join(keys))
    field("pg-retain", " ".join(retain))
    field("pg-release", "")
    button = {"put": "pg-put", "get": "pg-get", "read": "pg-read", "retain": "pg-retain-op", "release": "pg-release-op"}
    driver.find_element(By.ID, button.get(name, "pg-close")).click()


def _shown(driver: Any, number: int) -> dict[str, Any]:
    """What the page shows for step ``number``: its data, and the picture's last row."""
    section = driver.find_element(By.CSS_SELECTOR, f'#pg-steps section.step[data-step="{number}"]')
    after = section.find_elements(By.CSS_SELECTOR, 'g.row[data-row="after"] g.slot:not(.unstored)')
    return {
        "visible": section.is_displayed(),
        "outcome": json.loads(section.get_attribute("data-outcome-json") or "null"),
        "state": json.loads(section.get_attribute("data-state") or "null"),
        "drawn": [g.get_attribute("data-key") for g in after],
        "drawn_pinned": [g.get_attribute("data-key") for g in after if "pinned" in (g.get_attribute("class") or "")],
        "marked_evicted": sorted(
            g.get_attribute("data-key") for g in section.find_elements(By.CSS_SELECTOR, "g.slot.evicted")
        ),
        "text": section.text,
    }


def _check_step(
    driver: Any, number: int, expected: tuple[dict[str, Any], dict[str, Any]], before: dict[str, Any]
) -> None:
    outcome, state = expected
    shown = _shown(driver, number)
    assert shown["visible"], f"step {number} is not the one shown"
    assert (shown["outcome"], shown["state"]) == (outcome, state), f"step {number}: {COMMANDS[number - 1]}"
    # The picture draws that state: the stored keys least recent first, the pinned ones badged.
    stored = [key for key, _ in state["entries"]]
    pinned = {key for key, _ in state["references"]}
    assert shown["drawn"] == stored
    assert shown["drawn_pinned"] == [key for key in stored if key in pinned]
    gone = sorted({key for key, _ in before["entries"]} - set(stored))
    succeeded_put = COMMANDS[number - 1].startswith("put") and "ok" in outcome
    assert shown["marked_evicted"] == (gone if succeeded_put else [])
    if "error" in outcome:
        assert f"error: {outcome['error']}" in shown["text"]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_playing_a_trace_in_the_browser(browser: Any, server: str, tmp_path: Path) -> None:
    started = time.monotonic()
    browser.get(f"{server}/playground/")
    _wait(browser, lambda d: _root(d).get_attribute("data-state") != "loading", 120)
    message = browser.find_element(By.ID, "pg-message").text
    assert _root(browser).get_attribute("data-state") == "ready", message
    ready_ms = browser.execute_script("return performance.getEntriesByName('pg-ready')[0].startTime")
    print(f"the page was ready after {time.monotonic() - started:.1f} s ({ready_ms:.0f} ms from navigation)")
    assert _steps(browser) == 0 and "capacity 3" in browser.find_element(By.ID, "pg-header").text
    # Offline: everything the page loaded (Pyodide, its standard library, the wheel, the theme) came from the site.
    loaded = browser.execute_script("return performance.getEntriesByType('resource').map((e) => e.name)")
    assert any(name.endswith(".whl") for name in loaded) and any(name.endswith(".wasm") for name in loaded)
    assert [name for name in loaded if not name.startswith(f"{server}/")] == []

    strict = reference_run("strict", [op for _, op, _ in TRACE])
    empty: dict[str, Any] = {"entries": [], "references": [], "closed": False}
    shot = tmp_path / "playground.png"
    for number, (command, _, how) in enumerate(TRACE, 1):
        _enter(browser, command, how)
        _wait(browser, lambda d, n=number: _steps(d) == n, 30)
        assert browser.find_element(By.ID, "pg-message").text == ""
        _check_step(browser, number, strict[number - 1], strict[number - 2][1] if number > 1 else empty)
        if number == 6:  # an error comes with the rule that raised it, as auxspec explain says it
            assert "too few can be evicted, so the put fails" in _shown(browser, 6)["text"]
        if number == 4:  # undo takes the eviction back; the same put evicts again
            browser.find_element(By.ID, "pg-undo").click()
            _wait(browser, lambda d: _steps(d) == 3, 30)
            assert _shown(browser, 3)["state"] == strict[2][1]
            _enter(browser, command, how)
            _wait(browser, lambda d: _steps(d) == 4, 30)
            _check_step(browser, 4, strict[3], strict[2][1])
            _root(browser).screenshot(str(shot))  # the eviction, as docs/playground/screenshot.png shows it
    assert shot.stat().st_size > 10_000

    # Export: the spec's vector of the session, which `auxspec reproduce` replays.
    exported = browser.find_element(By.ID, "pg-vector").get_attribute("textContent")
    assert exported == EXAMPLE.read_text(encoding="utf-8")
    path = tmp_path / "exported.jsonl"
    path.write_text(exported, encoding="utf-8")
    assert cli.main(["reproduce", str(path)]) == 0

    # The link holds the session: open an empty one, then the link, in the same page.
    link = browser.find_element(By.ID, "pg-share").get_attribute("href")
    assert link.startswith(f"{server}/playground/#profile=strict&max_bytes=6&object_nbytes=2&op=put+a+b+--retain+a")
    browser.execute_script("location.hash = '#profile=strict&max_bytes=6&object_nbytes=2'")
    _wait(browser, lambda d: _steps(d) == 0, 30)
    browser.get(link)
    _wait(browser, lambda d: _steps(d) == len(TRACE), 30)
    assert _shown(browser, len(TRACE))["state"] == strict[-1][1]

    # The other profile replays the same commands; every step is the upstream reference store's.
    Select(browser.find_element(By.ID, "pg-profile")).select_by_value("upstream")
    _wait(browser, lambda d: "profile='upstream'" in d.find_element(By.ID, "pg-header").text, 30)
    upstream = reference_run("upstream", [op for _, op, _ in TRACE])
    for number in range(1, len(TRACE) + 1):
        browser.find_elements(By.CSS_SELECTOR, "#pg-history button")[number - 1].click()
        _check_step(browser, number, upstream[number - 1], upstream[number - 2][1] if number > 1 else empty)
    assert "profile=upstream" in browser.current_url

    # Undo twice reopens the store; a payload the spec leaves undefined under upstream is then refused.
    for left in (len(TRACE) - 1, len(TRACE) - 2):
        browser.find_element(By.ID, "pg-undo").click()
        _wait(browser, lambda d, n=left: _steps(d) == n, 30)
    _check_step(browser, len(TRACE) - 2, upstream[-3], upstream[-4][1])
    _enter(browser, "put z=00", "type")
    _wait(browser, lambda d: d.find_element(By.ID, "pg-message").text.startswith("refused"), 30)
    assert "undefined" in browser.find_element(By.ID, "pg-message").text
    assert _steps(browser) == len(TRACE) - 2
    # A link the spec cannot replay changes nothing, and says why.
    browser.execute_script("location.hash = '#profile=lax&max_bytes=6&object_nbytes=2&op=put+a'")
    _wait(browser, lambda d: "not 'lax'" in d.find_element(By.ID, "pg-message").text, 30)
    assert _steps(browser) == len(TRACE) - 2
    if os.environ.get("AUXSPEC_PLAYGROUND_SCREENSHOT"):  # how docs/playground/screenshot.png is made
        shutil.copy(shot, os.environ["AUXSPEC_PLAYGROUND_SCREENSHOT"])


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_each_section_link_preloads_its_example(browser: Any, server: str) -> None:
    """Every semantics.md link, opened in the page: its steps are the ones the spec computes for it (the fast
    test above holds those against the reference store), section 12's refusal is said with its rule, and a
    remote step's outcomes are buttons that replay the session with the engine's pick."""
    browser.get(f"{server}/playground/")
    _wait(browser, lambda d: _root(d).get_attribute("data-state") != "loading", 120)
    assert _root(browser).get_attribute("data-state") == "ready", browser.find_element(By.ID, "pg-message").text
    # The page's own control for section 12: a put whose batch calls close() on the store first.
    browser.find_element(By.ID, "pg-keys").send_keys("a")
    Select(browser.find_element(By.ID, "pg-inside")).select_by_value("close")
    browser.find_element(By.ID, "pg-put").click()
    _wait(browser, lambda d: _steps(d) == 1)
    assert browser.find_element(By.CSS_SELECTOR, "#pg-history button").text.startswith("put a --from-inside close")
    first = _shown(browser, 1)
    assert "close() on the same store: that inner call raises ReentrantCallError" in first["text"]
    assert first["state"] == {"entries": [["a", "6161"]], "references": [], "closed": False}  # the put went on
    for title, fragment, session in section_links():
        browser.get(f"{server}/playground/#{fragment}")
        header = f"profile={session['profile']!r}"
        wanted = len(session["commands"])
        _wait(browser, lambda d, h=header, n=wanted: h in d.find_element(By.ID, "pg-header").text and _steps(d) == n)
        assert browser.find_element(By.ID, "pg-message").text == "", title
        expected = json.loads(playground.view(json.dumps(session)))["steps"]
        for number, step in enumerate(expected, 1):
            section = browser.find_element(By.CSS_SELECTOR, f'#pg-steps section.step[data-step="{number}"]')
            shown = json.loads(section.get_attribute("data-state") or "null")
            assert (json.loads(section.get_attribute("data-outcome-json") or "null"), shown) == (
                step["outcome"],
                step["state"],
            ), f"{title}: step {number}"
        if title.startswith("12."):
            browser.find_elements(By.CSS_SELECTOR, "#pg-history button")[0].click()
            assert "raises ReentrantCallError and changes nothing" in _shown(browser, 1)["text"]
        if title.startswith("13."):
            assert browser.find_element(By.ID, "pg-download").get_attribute("disabled") is not None
            browser.find_elements(By.CSS_SELECTOR, "#pg-history button")[1].click()
            engine_kept = '#pg-steps section.step[data-step="2"] button[data-outcome="ok"]'
            browser.find_element(By.CSS_SELECTOR, engine_kept).click()
            _wait(browser, lambda d: "--outcome+ok" in d.current_url)
            picked = {**session, "commands": [*session["commands"]]}
            picked["commands"][1] = "get a b --outcome ok"
            again = json.loads(playground.view(json.dumps(picked)))
            assert again["refused"] is None
            assert _shown(browser, 2)["outcome"] == again["steps"][1]["outcome"] == {"ok": "61316231"}
            assert _steps(browser) == len(again["steps"])


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_load_measure_runs_and_the_snapshot_holds_no_build_path(site: Path) -> None:
    """docs/performance.md's command, on the site built here (one run; no timing is asserted), and the
    Python snapshot the page starts from: made (Node is there wherever npm is), and free of this
    checkout's paths (Emscripten records the program's path in the memory it snapshots)."""
    runtime = json.loads((site / "playground" / "runtime.json").read_text(encoding="utf-8"))
    assert runtime["snapshot"] == "python.snapshot.gz"
    memory = gzip.decompress((site / "playground" / runtime["snapshot"]).read_bytes())
    assert len(memory) > 10_000_000 and str(ROOT).encode() not in memory and str(site).encode() not in memory
    done = subprocess.run(
        [sys.executable, "tools/playground/measure_load.py", "--site", str(site), "--runs", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"first visit, ready: median \d+ ms", done.stdout), done.stdout
    assert "snapshot.gz" in done.stdout and "Chromium's CPU" in done.stdout
