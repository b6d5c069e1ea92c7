"""How long the playground takes to load: serve a built site on the loopback
interface, open docs/playground.md in headless Chromium RUNS times, each with
a fresh profile (nothing cached: a first visit) and then once more in the same
profile (a second visit, as from a semantics.md link), and print what the page
itself counts (``data-*-ms`` on ``#playground-app``, from the start of navigation):
Python ready, the spec imported, the first view drawn; and the CPU time all
of Chromium's processes spent from the request to the page being ready, which
a loaded machine (other jobs on the same cores) stretches far less than the
wall-clock figures. docs/playground.md records the figures; the test suite
asserts no timing.

    python tools/playground/measure.py SITE_DIR [RUNS]
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

FIELDS = ("data-python-ms", "data-import-ms", "data-load-ms")


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
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid, ticks in times.items():
        walk = pid
        while walk in parents and walk != root:
            walk = parents[walk]
        if walk == root and pid != root:
            total += ticks
    return total * 1000 // tick


def _browser(profile: str) -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    flags = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", f"--user-data-dir={profile}")
    for flag in flags:
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver") or "chromedriver"), options=options)


def _visit(driver: webdriver.Chrome, url: str) -> tuple[int, ...]:
    driver.get("about:blank")
    driver_pid = driver.service.process.pid
    before = _tree_cpu_ms(driver_pid)
    driver.get(url)
    root = driver.find_element(By.ID, "playground-app")
    WebDriverWait(driver, 180).until(lambda _: root.get_attribute("data-state") != "loading")
    cpu = _tree_cpu_ms(driver_pid) - before
    assert root.get_attribute("data-state") == "ready", driver.find_element(By.ID, "pg-message").text
    return (*(int(root.get_attribute(name) or -1) for name in FIELDS), cpu)


def measure(site: str, runs: int) -> list[tuple[Any, ...]]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=site))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/playground/"
    seen = []
    try:
        for _ in range(runs):
            with tempfile.TemporaryDirectory() as profile:
                driver = _browser(profile)
                try:
                    for visit in ("first", "second"):
                        seen.append((visit, *_visit(driver, url)))
                        python, imported, ready, cpu = seen[-1][1:]
                        print(
                            f"{visit} visit: python {python} ms, spec imported {imported} ms, ready {ready} ms, "
                            f"Chromium's CPU {cpu} ms"
                        )
                finally:
                    driver.quit()
            time.sleep(1)
    finally:
        httpd.shutdown()
        httpd.server_close()
    return seen


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print(__doc__, file=sys.stderr)
        return 2
    seen = measure(argv[0], int(argv[1]) if len(argv) == 2 else 5)
    load = os.getloadavg()
    for visit in ("first", "second"):
        ready, cpu = [run[3] for run in seen if run[0] == visit], [run[4] for run in seen if run[0] == visit]
        print(
            f"{visit} visits: ready median {statistics.median(ready)} ms (min {min(ready)}, max {max(ready)}); "
            f"Chromium's CPU median {statistics.median(cpu)} ms ({len(ready)} runs)"
        )
    print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
