"""What the docs-site tests share: the strict site build (tests/test_site.py
checks it, tests/test_playground.py serves it) and headless Chromium
(tests/test_browser.py, tests/test_playground.py). One place, so the build
command and the browser's flags cannot drift apart between them.

Each caller builds at most once per tier: test_site.py's build is in the
fast tier, the playground's browser test (the only other caller) in the
long one.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

ROOT = Path(__file__).resolve().parents[1]


def mkdocs_build(site: Path, timeout: float = 280) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of this repository into ``site`` (its playground hook included)."""
    config = str(ROOT / "mkdocs.yml")
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", config, "-d", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=timeout,
        check=False,
    )


def _find(*names: str) -> str | None:
    for name in names:
        found = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").is_file() else None)
        if found:
            return found
    return None


CHROMIUM = _find("chromium", "chromium-browser")
DRIVER = _find("chromedriver")


def chromium(profile: Path, window: str) -> webdriver.Chrome:
    """Headless Chromium with a fresh profile in ``profile`` (nothing cached), driven by Selenium."""
    assert CHROMIUM is not None and DRIVER is not None, "callers skip where Chromium is absent"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        f"--window-size={window}",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def served(site: Path) -> Iterator[str]:
    """``site`` over HTTP on the loopback interface; yields its base URL."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)
