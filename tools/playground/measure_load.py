"""How long the playground (docs/playground.md) takes to load, and where the
time goes: serve a built site on the loopback interface, open the page in
headless Chromium RUNS times, each with a fresh profile (nothing cached: a
first visit), and print, from Chromium's own performance timing:

- wall time, from the start of navigation: the page's marks (``pg-*``:
  Pyodide's script loaded, Python started, the wheel unpacked, the spec
  imported, the first view drawn) and each file's fetch (start and end);
- what the machine's load stretches least: the bytes fetched, and the CPU
  time all of Chromium's processes spent from the request to the page
  being ready (from /proc).

With no ``--site`` it first builds the site (``mkdocs build --strict``, whose
hook vendors the runtime) into a scratch folder. The test suite asserts no
timing; docs/performance.md records the figures, with the machine's load.

    python tools/playground/measure_load.py [--site SITE_DIR] [--runs N]
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

ROOT = Path(__file__).resolve().parents[2]
MARKS = ("pg-pyodide-js", "pg-python", "pg-import", "pg-ready", "pg-wheel")  # the wheel: after ready with a snapshot
# The files on the page's path to its first view, by how their names end.
FILES = ("snapshot.gz", "pyodide.js", "pyodide.asm.js", "pyodide.asm.wasm", "python_stdlib.zip", "lock.json", ".whl")
TIMING = """
const marks = {};
performance.getEntriesByType('mark').forEach((m) => { marks[m.name] = m.startTime; });
const files = performance.getEntriesByType('resource').map((e) => ({
  name: e.name, start: e.startTime, end: e.responseEnd, bytes: e.encodedBodySize }));
return { marks, files };
"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def _tree_cpu_ms(root: int) -> int:
    """CPU time (user + system) of ``root``'s descendants, from /proc (Linux)."""
    parents: dict[int, int] = {}
    times: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = int(fields[11]) + int(fields[12])
    total = 0
    for pid, ticks in times.items():
        walk = pid
        while walk in parents and walk != root:
            walk = parents[walk]
        if walk == root and pid != root:
            total += ticks
    return total * 1000 // os.sysconf("SC_CLK_TCK")


def _browser(profile: str) -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    return webdriver.Chrome(service=Service(shutil.which("chromedriver") or "chromedriver"), options=options)


def visit(url: str) -> dict[str, Any]:
    """One first visit in a fresh profile: the page's marks, its files' fetches, Chromium's CPU time."""
    with tempfile.TemporaryDirectory() as profile:
        driver = _browser(profile)
        try:
            driver.get("about:blank")
            pid = driver.service.process.pid
            before = _tree_cpu_ms(pid)
            driver.get(url)
            root = driver.find_element(By.ID, "playground-app")
            WebDriverWait(driver, 300).until(lambda _: root.get_attribute("data-state") != "loading")
            cpu = _tree_cpu_ms(pid) - before
            unpacked = "return performance.getEntriesByName('pg-wheel').length"
            WebDriverWait(driver, 60).until(lambda d: d.execute_script(unpacked))
            assert root.get_attribute("data-state") == "ready", driver.find_element(By.ID, "pg-message").text
            seen: dict[str, Any] = driver.execute_script(TIMING)
        finally:
            driver.quit()
    files = {}
    for entry in seen["files"]:
        name = next((end for end in FILES if entry["name"].endswith(end)), None)
        if name is not None:
            files[name] = entry
    total = sum(entry["bytes"] for entry in seen["files"])
    return {"marks": seen["marks"], "files": files, "bytes": total, "requests": len(seen["files"]), "cpu": cpu}


def measure(site: Path, runs: int) -> list[dict[str, Any]]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/playground/"
    seen = []
    try:
        for run in range(1, runs + 1):
            seen.append(visit(url))
            marks, files = seen[-1]["marks"], seen[-1]["files"]
            shown = ", ".join(f"{name.removeprefix('pg-')} {marks[name]:.0f}" for name in MARKS if name in marks)
            fetched = ", ".join(f"{name} {e['start']:.0f}-{e['end']:.0f}" for name, e in files.items())
            print(f"run {run}: ms from navigation: {shown}")
            print(f"        fetched (start-end ms): {fetched}")
            size, cpu = seen[-1]["bytes"] / 1e6, seen[-1]["cpu"]
            print(f"        {seen[-1]['requests']} requests, {size:.1f} MB; Chromium's CPU {cpu} ms")
    finally:
        httpd.shutdown()
        httpd.server_close()
    return seen


def build(site: Path) -> None:
    config = str(ROOT / "mkdocs.yml")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", config, "-d", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    if done.returncode != 0 or not (site / "playground" / "runtime.json").is_file():
        sys.exit(f"the strict site build failed or left the playground's runtime out:\n{done.stderr[-3000:]}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, help="a built site (default: build one into a scratch folder)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        site = args.site
        if site is None:
            site = Path(scratch) / "site"
            build(site)
        before = os.getloadavg()
        seen = measure(site, args.runs)
        after = os.getloadavg()
    ready = [run["marks"]["pg-ready"] for run in seen]
    cpu = [run["cpu"] for run in seen]
    print(
        f"first visit, ready: median {statistics.median(ready):.0f} ms (min {min(ready):.0f}, max {max(ready):.0f}); "
        f"Chromium's CPU median {statistics.median(cpu):.0f} ms; {len(seen)} runs"
    )
    print(f"load average (1 min) {before[0]:.1f} before, {after[0]:.1f} after, on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
