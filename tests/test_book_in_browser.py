"""The smoke-profile book, opened in a real headless Chromium with no network: every figure on
every chapter page has loaded, every formula is typeset, no page scrolls sideways at 1280 px and
no code line of a chapter does either (the notebooks' line length is the width a code cell shows),
every internal link resolves (the CSV tables each chapter links among them), and each page leaves
a screenshot.

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
    # no network: the book must read as on a train; every host name fails to resolve, and the
    # DevTools protocol takes the browser offline as well
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,1600",
        "--host-resolver-rules=MAP * ~NOTFOUND",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd(
        "Network.emulateNetworkConditions",
        {"offline": True, "latency": 0, "downloadThroughput": 0, "uploadThroughput": 0},
    )
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
        "return Array.from(document.images).map(i => [i.getAttribute('src'), i.naturalWidth, i.naturalHeight]);"
    )
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
        for href in browser.execute_script(
            "return Array.from(document.querySelectorAll('a[href]')).map(a => a.href);"
        ):
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


LANDING = "19_the_answer"  # the front page: its parameters cell is removed, no code shows


@pytest.mark.parametrize("chapter", [c for c in CHAPTERS if c != LANDING])
def test_parameters_show_once_with_the_profiles_values(browser, smoke_book, chapter):
    # papermill runs the notebook's parameters cell, then injects the profile's values in a second
    # cell; the reader sees one cell, with the values in force (the runner folds the two)
    text = _visible_text(browser, smoke_book / "book" / "executed" / f"{chapter}.html")
    assert text.count("profile = ") == 1, f"{chapter}: {text.count('profile = ')} parameter cells visible"
    assert "profile = 'smoke'" in text and "Parameters of this run (smoke profile" in text


def test_the_landing_page_shows_no_code(browser, smoke_book):
    # the front page answers in sentences; its parameters and its code are not shown
    _open(browser, smoke_book / "book" / "executed" / f"{LANDING}.html")
    cells = browser.execute_script("return document.querySelectorAll('div.cell_input, div.highlight').length;")
    text = _visible_text(browser, smoke_book / "book" / "executed" / f"{LANDING}.html")
    assert cells == 0 and "profile = " not in text and "Show code cell source" not in text


def test_scorecard_leads_with_its_table_not_its_styling_code(browser, smoke_book):
    text = _visible_text(browser, smoke_book / "book" / "executed" / "15_scorecard.html")
    assert "COLOURS" not in text and ".style" not in text  # folded away behind "Show code cell source"
    claims = text.index("The claims")
    assert "Few heads matter alone" in text[claims : text.index("By section")]
    assert "Show code cell source" in text  # the code is one click away, not gone


def test_what_it_costs_page_shows_the_recorded_build(browser, smoke_book):
    text = _visible_text(browser, smoke_book / "book" / "executed" / "18_what_it_costs.html")
    for heading in ("What it costs", "The machine", "The models", "The chapters", "Disk"):
        assert heading in text, f"the costs page lacks its {heading!r} section"
    assert re.search(r"The \d+ chapters with a recorded run took [\d.]+ (s|min)", text), text[:2000]
    assert "01_gates_and_pruning" in text and "cpu_model" in text
    teaching = smoke_book / "book" / "executed" / "17_teaching_guide.html"
    assert "18_what_it_costs.html" in teaching.read_text(encoding="utf-8")  # the guide links to it


def _pages(smoke_book: Path) -> list[Path]:
    return [p for p in sorted(smoke_book.rglob("*.html")) if "_static" not in p.parts and "_sources" not in p.parts]


def _typeset(driver) -> bool:
    """Wait for MathJax (served from the site) to finish; False when the page did not load it."""
    return driver.execute_async_script("""const done = arguments[arguments.length - 1];
        if (!window.MathJax || !MathJax.startup || !MathJax.startup.promise) { done(false); return; }
        MathJax.startup.promise.then(() => done(true), () => done(false));""")


def test_formulas_render_with_no_network(browser, smoke_book):
    with_math = 0
    for page in _pages(smoke_book):
        html = page.read_text(encoding="utf-8")
        if 'class="math' not in html:
            continue
        with_math += 1
        _open(browser, page)
        assert _typeset(browser), f"{page.name}: MathJax did not load offline"
        assert "cdn.jsdelivr" not in html and "_static/mathjax/" in html, f"{page.name} loads MathJax from elsewhere"
        rendered = browser.execute_script("return document.querySelectorAll('mjx-container').length;")
        text = browser.execute_script("return document.querySelector('main, article, body').innerText;")
        raw = re.findall(r"\\\(|\\\[|\$\$", text)
        assert rendered > 0 and not raw, f"{page.name}: {rendered} formulas typeset, raw LaTeX left: {raw[:3]}"
    assert with_math >= 3, "too few pages with formulas: is dollarmath on?"


def test_no_page_scrolls_sideways(browser, smoke_book):
    browser.set_window_size(1280, 1600)
    wide = []
    for page in _pages(smoke_book):
        _open(browser, page)
        scroll, view = browser.execute_script("return [document.documentElement.scrollWidth, window.innerWidth];")
        if scroll > view:
            wide.append(f"{page.relative_to(smoke_book)}: {scroll} px for a {view} px window")
    assert not wide, "pages wider than the window:\n" + "\n".join(wide)


def test_each_chapter_links_its_tables_and_they_open_offline(browser, smoke_book):
    data = sorted(p.name for p in (smoke_book.parent.parent / "book" / "executed" / "data" / "smoke").glob("*.csv"))
    assert data, "the chapters saved no tables"
    links = {}
    for chapter in CHAPTERS:
        _open(browser, smoke_book / "book" / "executed" / f"{chapter}.html")
        links[chapter] = browser.execute_script(
            "return Array.from(document.querySelectorAll('a[href$=\".csv\"]')).map(a => a.href);"
        )
    for chapter, hrefs in links.items():
        saved = [n for n in data if n.startswith(chapter.split("_", 1)[0] + "_")]
        names = {unquote(urlparse(h).path).rsplit("/", 1)[-1] for h in hrefs}
        assert set(saved) <= names, f"{chapter} does not link {sorted(set(saved) - names)}"
    scorecard = next(c for c in CHAPTERS if c.endswith("_scorecard"))
    before = {n for n in data if n.split("_", 1)[0] <= scorecard.split("_", 1)[0]}  # the front page runs after it
    assert {unquote(urlparse(h).path).rsplit("/", 1)[-1] for h in links[scorecard]} >= before - {"run_times.csv"}
    source = smoke_book.parent.parent / "book" / "executed" / "data" / "smoke"
    for href in {h for hrefs in links.values() for h in hrefs}:
        # a browser downloads a CSV rather than showing it: the link must reach a copy inside the
        # built site (so it opens with no network and no source tree), equal to the saved table
        assert urlparse(href).scheme == "file", f"{href} leaves the built site"
        target = Path(unquote(urlparse(href).path))
        assert target.is_relative_to(smoke_book) and target.is_file(), f"{href} points at no file of the site"
        assert target.read_bytes() == (source / target.name).read_bytes(), (
            f"{target.name} differs from the saved table"
        )


# Per code block of a page, hidden cells opened first: whether it is a cell's input, its scroll and
# visible widths (px), and how many characters of its own font its text box holds.
_CODE_WIDTHS = """
document.querySelectorAll('details').forEach(d => { d.open = true; });
return Array.from(document.querySelectorAll('div.highlight pre'))
  .filter(pre => !pre.closest('div.cell_output'))
  .map(pre => {
    const probe = document.createElement('span');
    probe.textContent = '0'.repeat(100);
    pre.appendChild(probe);
    const char = probe.getBoundingClientRect().width / 100;
    probe.remove();
    const style = getComputedStyle(pre);
    const text = pre.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    const longest = pre.textContent.split('\\n').reduce((a, line) => Math.max(a, line.length), 0);
    return [!!pre.closest('div.cell_input'), pre.scrollWidth, pre.clientWidth,
            char > 0 ? Math.floor(text / char + 1e-6) : 0, longest];
  });
"""


def test_no_code_line_of_a_chapter_scrolls_sideways(browser, smoke_book):
    """At 1280 px every code block of every chapter (its cells, hidden ones opened, and code in its
    prose) shows its longest line whole, and a code cell holds at least as many characters as the
    notebooks' line length (notebooks/ruff.toml), which the linter holds every chapter's code to."""
    from helpers.book.running.runner import notebook_line_length

    browser.set_window_size(1280, 1600)
    wide, holds = [], []
    for chapter in CHAPTERS:
        _open(browser, smoke_book / "book" / "executed" / f"{chapter}.html")
        for is_input, scroll, visible, fits, longest in browser.execute_script(_CODE_WIDTHS):
            if visible and scroll > visible + 1:
                wide.append(f"{chapter}: a line of {longest} characters in a box that shows {fits}")
            if is_input and visible:
                holds.append(fits)
    assert holds, "no code cell found: are the chapters' inputs rendered?"
    assert not wide, "code that scrolls sideways:\n" + "\n".join(wide)
    assert notebook_line_length() <= min(holds), (
        f"notebooks/ruff.toml allows {notebook_line_length()} characters; a code cell shows {min(holds)}"
    )


def test_every_verdict_table_has_its_rules_above_and_the_legend_under(browser, smoke_book):
    """Each chapter that judges claims shows, around its verdict table, each claim's rule in one
    sentence (as the chapter ran it) and the meaning of every verdict word; so does the front page."""
    from helpers.book.scorecard.card import CLAIMS
    from helpers.book.verdicts.engine import VERDICT_MEANINGS, rule_text

    chapters = sorted({c.chapter for c in CLAIMS})
    for chapter in chapters:
        text = _visible_text(browser, smoke_book / "book" / "executed" / f"{chapter}.html")
        table = text.index("What the verdicts mean")
        for claim in (c for c in CLAIMS if c.chapter == chapter):
            assert rule_text(claim) in text[:table], (chapter, claim.key)  # the smoke run keeps the defaults
        for word, meaning in VERDICT_MEANINGS.items():
            assert f"{word}: {meaning}" in text[table:], (chapter, word)
    front = _visible_text(browser, smoke_book / "book" / "executed" / f"{LANDING}.html")
    for word, meaning in VERDICT_MEANINGS.items():
        assert f"{word}: {meaning}" in front, word


METHODS = {  # the chapter that teaches each of the paper's four computations, and a line of its code
    "01_gates_and_pruning": ("def gate_heads(", "def gated_by(", "def importance_by_hand(", "torch.autograd.grad"),
    "01b_pruning_by_importance": ("for pruned in counts(", "assert library["),
    "03_ablating_one_head": ("def paired_bootstrap(", "np.quantile(deltas"),
}


@pytest.mark.parametrize("chapter", sorted(METHODS))
def test_the_method_is_on_the_page_as_code(browser, smoke_book, chapter):
    """The gate, I_h, the pruning loop and the paired bootstrap are on their chapters' pages as
    code a reader sees without opening anything; the checks against the library ran (no error)."""
    text = _visible_text(browser, smoke_book / "book" / "executed" / f"{chapter}.html")
    for line in METHODS[chapter]:
        assert line in text, (chapter, line)
