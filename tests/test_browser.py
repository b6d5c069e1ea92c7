"""The HTML of `auxspec explain` in a real browser: headless Chromium (Debian's
`chromium` and `chromium-driver`, which .ci/run installs) driven by Selenium.
It steps through a teaching trace with the buttons and the arrow keys, takes
a screenshot at each step, and checks what the page shows: not blank, the
evicted key marked at the step that evicts it (and only there), each step a
different picture."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from _site import CHROMIUM, DRIVER, chromium
from auxspec import cli

ROOT = Path(__file__).resolve().parents[1]
TEACHING_TRACE = ROOT / "docs" / "tour" / "recency.jsonl"  # put a b c; get a; put d (evicts b)


pytestmark = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason="headless Chromium not found (apt-get install chromium chromium-driver; .ci/run does this)",
)


def pixels(png: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and the RGB(A) rows of an 8-bit, non-interlaced PNG (what
    Chromium writes), decoded with zlib alone."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    offset, data, header = 8, b"", b""
    while offset < len(png):
        (length,) = struct.unpack(">I", png[offset : offset + 4])
        kind, body = png[offset + 4 : offset + 8], png[offset + 8 : offset + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            data += body
        offset += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(data)
    stride = width * channels
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for x in range(stride):
            left = line[x - channels] if x >= channels else 0
            up, corner = previous[x], previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + left) & 0xFF
            elif kind == 2:
                line[x] = (line[x] + up) & 0xFF
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[x] = (line[x] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, [bytes(b for i, b in enumerate(row) if i % channels < 3) for row in rows]


def colours(png: bytes) -> set[tuple[int, int, int]]:
    _, _, rows = pixels(png)
    return {(row[i], row[i + 1], row[i + 2]) for row in rows[::3] for i in range(0, len(row), 9)}


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    driver = chromium(tmp_path_factory.mktemp("chromium-profile"), "1100,900")
    try:
        yield driver
    finally:
        driver.quit()


def _current(driver: webdriver.Chrome) -> int:
    return int(driver.find_element(By.TAG_NAME, "main").get_attribute("data-current") or 0)


def _visible_sections(driver: webdriver.Chrome) -> list[str]:
    return [
        s.get_attribute("data-step") or ""
        for s in driver.find_elements(By.CSS_SELECTOR, "section.step")
        if s.is_displayed()
    ]


def _shown_evicted(driver: webdriver.Chrome) -> list[str]:
    marked = driver.find_elements(By.CSS_SELECTOR, "section.step g.slot.evicted")
    return [g.get_attribute("data-key") or "" for g in marked if g.is_displayed()]


@pytest.mark.timeout(180)
def test_stepping_through_a_teaching_trace(browser: webdriver.Chrome, tmp_path: Path) -> None:
    page = tmp_path / "recency.html"
    assert cli.main(["explain", str(TEACHING_TRACE), "--html", str(page)]) == 0
    browser.get(page.as_uri())
    WebDriverWait(browser, 30).until(lambda d: _current(d) == 1)
    assert browser.title.startswith("tour/recency")

    shots: list[bytes] = []
    seen: list[tuple[int, list[str], list[str], str]] = []
    for number in (1, 2, 3):
        if number == 2:
            browser.find_element(By.ID, "next").click()
        elif number == 3:
            browser.find_element(By.TAG_NAME, "body").send_keys(Keys.ARROW_RIGHT)
        WebDriverWait(browser, 10).until(lambda d, n=number: _current(d) == n)  # type: ignore[misc]
        (tmp_path / f"step-{number}.png").write_bytes(browser.get_screenshot_as_png())
        picture = browser.find_element(By.CSS_SELECTOR, f'section[data-step="{number}"] svg')
        shots.append(picture.screenshot_as_png)  # the step's picture alone, without the legend
        position = browser.find_element(By.ID, "position").text
        seen.append((number, _visible_sections(browser), _shown_evicted(browser), position))

    for number, sections, _, position in seen:
        assert sections == [str(number)], "exactly the current step is shown"
        assert position == f"step {number} of 3"
    # The evicted key is marked at the step that evicts it, and only there.
    assert [evicted for _, _, evicted, _ in seen] == [[], [], ["b"]]
    marked = browser.find_element(By.CSS_SELECTOR, 'section[data-step="3"] g.slot.evicted[data-key="b"] rect')
    assert marked.get_attribute("fill") == "#fee2e2" and marked.size["width"] > 20
    text = browser.find_element(By.CSS_SELECTOR, 'section[data-step="3"]').text
    assert "evicted: b" in text and "put(['d'" in text

    # Not blank: many colours (boxes, badges, text), and red only once something is evicted.
    for shot in shots:
        _, height, _ = pixels(shot)
        assert height > 100 and len(colours(shot)) > 20
    assert len(colours((tmp_path / "step-1.png").read_bytes())) > 20
    reds = [any(r > 200 and g < 80 and b < 80 for r, g, b in colours(shot)) for shot in shots]
    assert reds == [False, False, True]
    # Stepping changes the view.
    assert len({zlib.crc32(shot) for shot in shots}) == 3

    # Back with the button and the keys; the ends stop.
    browser.find_element(By.ID, "prev").click()
    WebDriverWait(browser, 10).until(lambda d: _current(d) == 2)
    assert _shown_evicted(browser) == []
    body = browser.find_element(By.TAG_NAME, "body")
    body.send_keys(Keys.HOME)
    WebDriverWait(browser, 10).until(lambda d: _current(d) == 1)
    assert browser.find_element(By.ID, "prev").get_attribute("disabled") is not None
    body.send_keys(Keys.ARROW_LEFT)
    assert _current(browser) == 1
    body.send_keys(Keys.END)
    WebDriverWait(browser, 10).until(lambda d: _current(d) == 3)
    assert browser.find_element(By.ID, "next").get_attribute("disabled") is not None
    print(f"screenshots: {', '.join(str(tmp_path / f'step-{n}.png') for n in (1, 2, 3))}")


@pytest.mark.timeout(120)
def test_a_link_opens_a_step(browser: webdriver.Chrome, tmp_path: Path) -> None:
    page = tmp_path / "terminal.html"
    trace = ROOT / "docs" / "tour" / "terminal-moves.jsonl"
    assert cli.main(["explain", str(trace), "--html", str(page)]) == 0
    browser.get(page.as_uri() + "#2")
    WebDriverWait(browser, 30).until(lambda d: _current(d) == 2)
    terminal = browser.find_elements(By.CSS_SELECTOR, 'section[data-step="2"] g.slot.terminal')
    assert sorted({g.get_attribute("data-key") for g in terminal if g.is_displayed()}) == ["a", "b"]
    browser.find_elements(By.CSS_SELECTOR, "nav .dot")[2].click()
    WebDriverWait(browser, 10).until(lambda d: _current(d) == 3)
    assert _shown_evicted(browser) == ["c"]


@pytest.mark.timeout(120)
def test_a_divergence_opens_at_the_step_that_differs(browser: webdriver.Chrome, tmp_path: Path) -> None:
    port = tmp_path / "port.py"
    ports = ROOT / "tests" / "ports"
    port.write_text(
        f"import sys\nsys.path.insert(0, {str(ports)!r})\n"
        "from simple_port import make\nBlockObjectStore = make('terminal-reverse')\n"
    )
    page = tmp_path / "divergence.html"
    trace = ROOT / "docs" / "tour" / "terminal-moves.jsonl"
    assert cli.main(["explain", str(trace), "--target", str(port), "--html", str(page)]) == 1
    browser.get(page.as_uri())
    WebDriverWait(browser, 30).until(lambda d: _current(d) == 2)  # the releases of b then a
    first = browser.find_element(By.CSS_SELECTOR, 'section[data-step="2"] table.diff tr.first')
    assert first.is_displayed() and first.get_attribute("data-field") == "recency (least → most)"
    cells = [cell.text for cell in first.find_elements(By.TAG_NAME, "td")]
    assert cells[1:] == ["c b a", "c a b", "◀ first difference"]
    (tmp_path / "divergence.png").write_bytes(browser.get_screenshot_as_png())
