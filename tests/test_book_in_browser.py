"""The smoke-profile book, opened in a real headless Chromium: every figure on every chapter page
has loaded, every internal link resolves, and each page leaves a screenshot.

Chromium and its driver are Debian's ``chromium`` and ``chromium-driver``, installed by
``make browser`` (part of ``make test``). Screenshots go to ``_build/screenshots/smoke/``.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
SCREENSHOTS = ROOT / "_build" / "screenshots" / "smoke"
CHAPTERS = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="module")
def browser():
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    if missing:
        pytest.fail(f"{missing} not found: run `make browser` (installs Debian's chromium and chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1600"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def _open(driver, page: Path) -> None:
    driver.get(page.as_uri())
    driver.execute_async_script("""const done = arguments[arguments.length - 1];
        const ready = () => document.readyState === "complete" && Array.from(document.images).every(i => i.complete);
        const poll = () => ready() ? done(true) : setTimeout(poll, 100); poll();""")


def _draws_a_figure(chapter: str) -> bool:
    nb = nbformat.read(ROOT / "notebooks" / f"{chapter}.ipynb", as_version=4)
    return any("plt." in c.source or ".plot(" in c.source for c in nb.cells if c.cell_type == "code")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_figure_has_loaded(browser, smoke_book, chapter):
    page = smoke_book / "book" / "executed" / f"{chapter}.html"
    assert page.exists(), f"the book has no page for {chapter}"
    _open(browser, page)
    images = browser.execute_script(
        "return Array.from(document.images).map(i => [i.getAttribute('src'), i.naturalWidth, i.naturalHeight]);")
    broken = [src for src, w, h in images if not (w and h)]
    assert not broken, f"{chapter}: images that did not load: {broken}"
    if _draws_a_figure(chapter):
        assert images, f"{chapter} draws a figure but its page shows no image"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / f"{chapter}.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000


def _ids(page: Path) -> set[str]:
    return set(re.findall(r'\bid="([^"]+)"', page.read_text(encoding="utf-8")))


def test_internal_links_resolve(browser, smoke_book):
    pages = sorted(smoke_book.rglob("*.html"))
    pages = [p for p in pages if "_static" not in p.parts and "_sources" not in p.parts]
    checked, broken = 0, []
    for page in pages:
        _open(browser, page)
        for href in browser.execute_script("return Array.from(document.querySelectorAll('a[href]')).map(a => a.href);"):
            url = urlparse(href)
            if url.scheme != "file":
                continue  # external: the launch and repository links, not part of the built site
            target = Path(unquote(url.path))
            if not target.exists():
                broken.append(f"{page.relative_to(smoke_book)} -> {href}")
            elif url.fragment and target.suffix == ".html" and unquote(url.fragment) not in _ids(target):
                broken.append(f"{page.relative_to(smoke_book)} -> #{url.fragment} (no such anchor)")
            checked += 1
    assert checked > len(pages), "too few internal links found: is the navigation there?"
    assert not broken, "broken internal links:\n" + "\n".join(broken[:20])


def _visible_text(driver, page: Path) -> str:
    _open(driver, page)
    return driver.execute_script("return document.querySelector('main, article, body').innerText;")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_parameters_show_once_with_the_profiles_values(browser, smoke_book, chapter):
    # papermill runs the notebook's parameters cell, then injects the profile's values in a second
    # cell; the reader sees one cell, with the values in force (the runner folds the two)
    text = _visible_text(browser, smoke_book / "book" / "executed" / f"{chapter}.html")
    assert text.count("profile = ") == 1, f"{chapter}: {text.count('profile = ')} parameter cells visible"
    assert "profile = 'smoke'" in text and "Parameters of this run (smoke profile" in text


def test_scorecard_leads_with_its_table_not_its_styling_code(browser, smoke_book):
    text = _visible_text(browser, smoke_book / "book" / "executed" / "14_scorecard.html")
    assert "COLOURS" not in text and ".style" not in text  # folded away behind "Show code cell source"
    claims = text.index("The claims")
    assert "Few heads matter alone" in text[claims:text.index("By section")]
    assert "Show code cell source" in text  # the code is one click away, not gone


def test_what_it_costs_page_shows_the_recorded_build(browser, smoke_book):
    text = _visible_text(browser, smoke_book / "book" / "executed" / "17_what_it_costs.html")
    for heading in ("What it costs", "The machine", "The models", "The chapters", "Disk"):
        assert heading in text, f"the costs page lacks its {heading!r} section"
    assert re.search(r"The \d+ chapters with a recorded run took [\d.]+ (s|min)", text), text[:2000]
    assert "01_gates_and_pruning" in text and "cpu_model" in text
    teaching = smoke_book / "book" / "executed" / "16_teaching_guide.html"
    assert "17_what_it_costs.html" in teaching.read_text(encoding="utf-8")  # the guide links to it
