"""Execute the book's notebooks with papermill for one profile.

    python -m helpers.book.running.runner --profile course                 # every notebook
    python -m helpers.book.running.runner --profile smoke --only 01_gates_and_pruning
    python -m helpers.book.running.runner --profile course -p seed=3       # override a parameter

A profile is ``profiles/<name>.yml``: ``defaults`` (parameters for every notebook) and
``notebooks`` (per-notebook parameters, in book order). Executed copies go to
``book/executed/<notebook>.ipynb``, where the book reads them. A notebook whose source,
parameters, models and the ``helpers`` code it runs (``chapter_code``) are all unchanged since
its last successful run, and every saved table it read then (``reads``), is not run again
(``--force`` reruns). A chapter that fails gets a page that says why and the others still run;
the run then exits 1. ``--output-dir`` makes a run of its own, its tables beside its notebooks.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import re
import sys
import textwrap
import time
from pathlib import Path

from ...base.atomic import atomic_path
from ...base.ledger import ENV as LEDGER_ENV
from ...zoo.locations import CHAPTER_ENV
from ...zoo.locations import REPO as ROOT
from ..profiles.parameters import parse_overrides
from ..profiles.profile import NOTEBOOKS, Profile, load_profile, models_read, parameters_for
from ..store import shards
from ..store.progress import estimate_left, progress_line, recorded_chapter_seconds
from ..store.sweep_costs import record_sweep_costs, running_ledger
from .chapter_code import chapter_code_digest
from .reads import ENV as READS_ENV
from .reads import changed, digests

_EXECUTED = ROOT / "book" / "executed"


class NotebookFailed(RuntimeError):
    """A chapter raised: ``cell`` is the first line of the cell that failed, ``error`` its
    ``Name: message``, ``traceback`` the kernel's text, ``partial`` the partly executed copy."""

    def __init__(self, notebook: str, cell="", error="", traceback="", partial: Path | None = None):
        super().__init__(
            f"{notebook} failed in the cell starting {cell!r} ({error}); the partly executed notebook is {partial}"
        )
        self.notebook, self.cell, self.error, self.traceback, self.partial = notebook, cell, error, traceback, partial


# Each chapter's kernel sets flush-to-zero before its first line runs, before torch starts its
# worker threads (they copy the mode from the thread that starts them); helpers/base/denormals.py
# says what denormal arithmetic costs on some CPUs, and why the library itself leaves the mode alone.
# It also starts listing the saved tables the chapter reads (``reads.watch_reads``).
KERNEL_ARGUMENTS = [
    "--IPKernelApp.exec_lines=from helpers.base.denormals import flush_denormals; flush_denormals(); "
    "from helpers.book.running.reads import watch_reads; watch_reads()"
]


def fingerprint(source: Path, params: dict, models: str = "") -> str:
    """Hash of the notebook, its parameters, the cache keys of the models it may read and what
    the ``helpers`` modules it runs compute (``chapter_code.chapter_code_digest``: a comment, a
    docstring or a log line in the library reruns no chapter, an edit to a module reruns the
    chapters that import it)."""
    h = hashlib.sha256(source.read_bytes())
    h.update(json.dumps(params, sort_keys=True).encode())
    h.update(models.encode())
    h.update(chapter_code_digest(source, ROOT / "helpers").encode())
    return h.hexdigest()[:16]


def _cached(output: Path, key: str) -> bool:
    if not output.exists():
        return False
    try:
        meta = json.loads(output.read_text())["metadata"].get("sixteen_heads", {})
    except (ValueError, KeyError):
        return False
    return meta.get("fingerprint") == key and meta.get("status") == "ok" and not changed(meta.get("reads", {}))


def _is_current(notebook: str, params: dict, output_dir: Path = _EXECUTED, models: str = "") -> bool:
    """Whether ``run_notebook`` would reuse the executed copy instead of running ``notebook``."""
    source = NOTEBOOKS / f"{notebook}.ipynb"
    return source.exists() and _cached(output_dir / f"{notebook}.ipynb", fingerprint(source, params, models))


def is_current(profile: str, notebook: str, overrides: list[str], output_dir: Path) -> bool:
    """Whether ``--profile <profile> --only <notebook> -p <override>... --output-dir <output_dir>``
    would reuse the executed copy there: same notebook, parameters, models and code, and the
    tables it read unchanged under the results root in force."""
    from ..course import models_key
    from ..profiles.parameters import checked_overrides

    settings = load_profile(profile)
    parsed = parse_overrides(overrides)
    mine = checked_overrides({notebook: NOTEBOOKS / f"{notebook}.ipynb"}, parsed).get(notebook, {}) if parsed else {}
    return _is_current(notebook, parameters_for(settings, notebook, mine), output_dir, models_key(settings))


def launch_links(notebook: str, profile: str, repo: tuple[str, str] | None = None) -> str:
    """The line under a chapter's title: open its source notebook on Colab or Binder (from the
    repository in ``_config.yml``, or ``repo`` = (url, branch)), or, with no repository set, how to
    run it from a local copy; and download this executed copy."""
    from .site_buttons import repository_of

    url, branch = repo or repository_of(ROOT / "_config.yml")
    source = f"notebooks/{notebook}.ipynb"
    own = f"{{download}}`this executed notebook <{notebook}.ipynb>` · {{doc}}`its parameters <16_rerunning>`"
    code = chapter_module(notebook)
    if not url:
        return (
            f"*Executed on the `{profile}` profile.* Run it yourself from a copy of this project: `make setup`, "
            f"then `.venv/bin/python -m helpers.book.running.runner --profile {profile} --only {notebook}` "
            f"(`-p name=value` changes a parameter) · {own}" + (f" · its code: `{code}`" if code else "") + "."
        )
    slug = url.removeprefix("https://github.com/")
    folder = url.rsplit("/", 1)[-1]
    return (
        f"*Executed on the `{profile}` profile.* Run it yourself: "
        f"[Colab](https://colab.research.google.com/github/{slug}/blob/{branch}/{source}) · "
        f"[Binder](https://mybinder.org/v2/gh/{slug}/{branch}?labpath={source}) · {own}"
        + (f" · [its code]({url}/blob/{branch}/{code})" if code else "")
        + f". On Colab, first run `!git clone {url} && pip install -e {folder}` and `%cd {folder}`."
    )


def chapter_module(notebook: str) -> str | None:
    """The module that holds ``notebook``'s experiment, rules and findings (``ch`` and the
    notebook's name, under ``helpers/book/chapters`` or ``helpers/book/scorecard``), as a path
    from the repository's root; None for a chapter with no module of its own."""
    for package in ("chapters", "scorecard"):
        path = ROOT / "helpers" / "book" / package / f"ch{notebook}.py"
        if path.exists():
            return str(path.relative_to(ROOT))
    return None


_DATA_FOLDER = "data"  # next to the executed notebooks: the CSV tables each chapter links


def chapter_prefix(notebook: str) -> str:
    """What the files a chapter saves begin with: its number and an underscore (``03_``)."""
    return notebook.split("_", 1)[0] + "_"


def chapter_tables(folder: Path, notebook: str) -> list[Path]:
    """The CSV tables in ``folder`` that ``notebook`` saves: those named with its number (``03_...``)."""
    return sorted(Path(folder).glob(f"{chapter_prefix(notebook)}*.csv"))


def _chapter_tables(notebook: str, profile: str) -> list[Path]:
    """The CSV tables ``notebook`` saved under ``results/<profile>/`` (``chapter_tables``); the
    scorecard's page, which reads them all, gets every table."""
    from ..store.results import results_dir

    folder = results_dir(profile)
    return sorted(folder.glob("*.csv")) if notebook.endswith("_scorecard") else chapter_tables(folder, notebook)


def data_links(notebook: str, profile: str, output_dir: Path) -> str | None:
    """Copy ``_chapter_tables`` next to the executed notebooks (``<output_dir>/data/<profile>/``)
    and return the Markdown that links them (the book copies linked files into the site), or
    None when the chapter saved none."""
    import shutil

    tables = _chapter_tables(notebook, profile)
    if not tables:
        return None
    target = output_dir / _DATA_FOLDER / profile
    target.mkdir(parents=True, exist_ok=True)
    for table in tables:
        shutil.copyfile(table, target / table.name)
    links = " · ".join(f"{{download}}`{t.name} <{_DATA_FOLDER}/{profile}/{t.name}>`" for t in tables)
    what = "every table the chapters saved" if notebook.endswith("_scorecard") else "the tables this chapter saved"
    return f"**The data behind this page** ({what} on this run, CSV): {links}"


_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def drop_progress_widgets(nb) -> int:
    """Remove the live progress bars (tqdm's widget outputs) from an executed notebook, and the
    widget state they leave in its metadata; returns how many outputs were dropped. A static page
    cannot animate them: their text fallback is the bar at 0%, and drawing them at all makes the
    page load the widget manager from a CDN, so it would not read offline."""
    dropped = 0
    for cell in nb.cells:
        outputs = cell.get("outputs")
        if not outputs:
            continue
        kept = [o for o in outputs if _WIDGET_VIEW not in o.get("data", {})]
        dropped += len(outputs) - len(kept)
        cell["outputs"] = kept
    nb.metadata.pop("widgets", None)
    return dropped


def notebook_line_length() -> int:
    """The notebooks' line length (``notebooks/ruff.toml``): the width of a code cell in the built
    book at a 1280-pixel window, which tests/test_book_in_browser.py measures."""
    import tomllib

    return int(tomllib.loads((ROOT / "notebooks" / "ruff.toml").read_text())["line-length"])


def _comment_lines(text: str, width: int) -> list[str]:
    return ["# " + line for line in textwrap.wrap(text, width - 2, break_on_hyphens=False, break_long_words=False)]


def _folded_assignment(name: str, value, *, default: str, comment: str, width: int) -> list[str]:
    """``name = value`` as the folded parameters cell shows it: the meaning (``comment``) and the
    notebook's ``default`` beside it where the line fits in ``width``, else in comment lines above
    it; a value too long for one line is laid out over several, still valid Python."""
    import pprint

    head, note = f"{name} = {value!r}", f"(default: {default})"
    one = f"{head}  # {comment} {note}" if comment else f"{head}  # {note}"
    if len(one) <= width:
        return [one]
    out = _comment_lines(comment, width) if comment else []
    if len(f"{head}  # {note}") <= width:
        return out + [f"{head}  # {note}"]
    out += _comment_lines(note, width)
    if len(head) <= width:
        return out + [head]
    indent = " " * (len(name) + 3)
    laid = pprint.pformat(value, width=max(width - len(indent), 20)).splitlines()
    return out + [f"{name} = {laid[0]}"] + [indent + line for line in laid[1:]]


def fold_parameters(nb, params: dict, width: int | None = None) -> None:
    """Show the parameters of an executed notebook once: papermill runs the ``parameters`` cell
    (defaults, each with its meaning) and then an ``injected-parameters`` cell (the profile's
    values). Rewrite the first to show the values that were in force, each overridden one with
    its default named in a comment (``_folded_assignment``: no line over ``width``, the notebooks'
    line length), and tag the second ``remove-cell`` so the book does not render it (it stays
    in the notebook, for a rerun). Statements that are not ``name = literal`` stay as they are."""
    import ast
    import io
    import tokenize

    width = width or notebook_line_length()
    cells = {
        tag: c for c in nb.cells for tag in c.metadata.get("tags", []) if tag in ("parameters", "injected-parameters")
    }
    if "parameters" not in cells or "injected-parameters" not in cells:
        return
    source = cells["parameters"].source
    lines = source.splitlines()
    comments = {
        token.start[0] - 1: token.string.lstrip("#").strip()
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT and lines[token.start[0] - 1].strip() != token.string.strip()
    }  # trailing comments only, by line
    spans = {
        node.lineno - 1: (node.end_lineno - 1, node.targets[0].id, node.value)
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
    }
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#") and "papermill injects" in line:
            out += [f"# Parameters of this run ({params.get('profile', '?')} profile)"]
            out += ["# a changed default is named in its comment"]
            i += 1
            continue
        if i not in spans:
            out.append(line)
            i += 1
            continue
        end, name, node = spans[i]
        segment = ast.get_source_segment(source, node)
        try:
            default = ast.literal_eval(node)
        except (ValueError, SyntaxError):
            default = None
        value = params.get(name, default)
        if name in params and (value != default or type(value) is not type(default)):
            shown = segment if "\n" not in segment else repr(default)
            out += _folded_assignment(name, value, default=shown, comment=comments.get(end, ""), width=width)
        else:
            out += lines[i : end + 1]
        i = end + 1
    cells["parameters"].source = "\n".join(out)
    tags = cells["injected-parameters"].metadata.setdefault("tags", [])
    if "remove-cell" not in tags:
        tags.append("remove-cell")


@functools.lru_cache(maxsize=1)
def _ipc_kernel_manager() -> type | None:
    """A kernel manager whose kernel talks over local socket files (ZeroMQ's IPC transport)
    instead of TCP ports: nothing listens on the network, and the kernel does not warn that it
    runs over TCP without encryption. The files live in Jupyter's runtime folder under a
    name of their own and are removed when the kernel shuts down. ``None`` (nbclient's default,
    TCP) where ZeroMQ has no IPC transport (Windows)."""
    import uuid

    import zmq
    from jupyter_client import AsyncKernelManager
    from jupyter_core.paths import jupyter_runtime_dir
    from traitlets import default

    if not zmq.has("ipc"):
        return None

    class IPCKernelManager(AsyncKernelManager):
        @default("transport")
        def _transport_default(self) -> str:
            return "ipc"

        @default("ip")
        def _ip_default(self) -> str:
            folder = Path(jupyter_runtime_dir())
            folder.mkdir(parents=True, exist_ok=True)
            return str(folder / f"sixteen-heads-{uuid.uuid4().hex[:12]}-ipc")

    return IPCKernelManager


def run_notebook(
    notebook: str, params: dict, *, output_dir: Path = _EXECUTED, force: bool = False, models: str = ""
) -> tuple[Path, float, bool]:
    """Execute one notebook; returns (executed path, seconds, reused from cache). ``models``
    identifies the trained models it reads (``course.models_key``): new models rerun it."""
    import nbformat
    import papermill as pm

    source = NOTEBOOKS / f"{notebook}.ipynb"
    if not source.exists():
        raise SystemExit(f"notebook {source} does not exist")
    output = output_dir / f"{notebook}.ipynb"
    key = fingerprint(source, params, models)
    if not force and _cached(output, key):
        return output, 0.0, True
    output_dir.mkdir(parents=True, exist_ok=True)
    partial = output.with_suffix(".running.ipynb")
    manager = _ipc_kernel_manager()
    # the kernel inherits it: transformers' loading and saving bars stay out of the chapter and the log
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    ledger = running_ledger(params["profile"], notebook) if "profile" in params and shards.rank() == 0 else None
    if ledger is not None:  # the kernel appends every timed block of the chapter to it (helpers/base/ledger.py)
        os.environ[LEDGER_ENV] = str(ledger)
    os.environ[CHAPTER_ENV] = notebook
    listing = output.with_suffix(".reads")
    listing.unlink(missing_ok=True)
    os.environ[READS_ENV] = str(listing)
    start = time.perf_counter()
    try:
        pm.execute_notebook(
            str(source),
            str(partial),
            parameters=params,
            cwd=str(ROOT),
            kernel_name="python3",
            extra_arguments=KERNEL_ARGUMENTS,
            progress_bar=False,
            **({"kernel_manager_class": manager} if manager else {}),
        )
    except pm.PapermillExecutionError as err:
        first_line = next(iter((err.source or "").strip().splitlines()), "")
        trace = "\n".join(err.traceback or [])
        listing.unlink(missing_ok=True)
        raise NotebookFailed(notebook, first_line, f"{err.ename}: {err.evalue}", trace, partial) from None
    finally:
        os.environ.pop(LEDGER_ENV, None)
        os.environ.pop(CHAPTER_ENV, None)
        os.environ.pop(READS_ENV, None)
    seconds = time.perf_counter() - start
    nb = nbformat.read(partial, as_version=4)
    fold_parameters(nb, params)
    drop_progress_widgets(nb)
    nb.cells.insert(
        1 if nb.cells and nb.cells[0].cell_type == "markdown" else 0,
        nbformat.v4.new_markdown_cell(launch_links(notebook, params.get("profile", "?"))),
    )
    data = data_links(notebook, params["profile"], output_dir) if "profile" in params else None
    if data:
        nb.cells.append(nbformat.v4.new_markdown_cell(data))
    nb.metadata["sixteen_heads"] = {
        "fingerprint": key,
        "status": "ok",
        "seconds": round(seconds, 1),
        "parameters": params,
        "reads": digests(listing),
    }
    listing.unlink(missing_ok=True)
    nbformat.write(nb, partial)
    os.replace(partial, output)  # atomic: a half-run notebook never looks finished
    if "profile" in params and shards.rank() == 0:
        from ..store.results import record_run_time

        record_run_time(params["profile"], notebook, seconds)
    if ledger is not None:
        record_sweep_costs(params["profile"], notebook, ledger)
    return output, seconds, False


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _title(notebook: str) -> str:
    """The first line of the chapter's first Markdown cell: its ``# NN · Title`` heading."""
    import nbformat

    source = nbformat.read(NOTEBOOKS / f"{notebook}.ipynb", as_version=4)
    return next((c.source.splitlines()[0] for c in source.cells if c.cell_type == "markdown"), f"# {notebook}")


def _notice_page(notebook: str, texts: list[str], status: dict, output_dir: Path) -> Path:
    """Write ``<output_dir>/<notebook>.ipynb`` as a page of Markdown ``texts`` under the chapter's
    title, with ``status`` as its metadata (never "ok", so the runner runs the chapter next time)."""
    import nbformat

    cells = [nbformat.v4.new_markdown_cell(f"{_title(notebook)}\n\n{texts[0]}")]
    page = nbformat.v4.new_notebook(cells=cells + [nbformat.v4.new_markdown_cell(t) for t in texts[1:]])
    page.metadata["sixteen_heads"] = status
    output = output_dir / f"{notebook}.ipynb"
    output_dir.mkdir(parents=True, exist_ok=True)
    with atomic_path(output) as tmp:
        nbformat.write(page, tmp)
    return output


def _rerun(notebook: str, profile: str) -> str:
    return f"`.venv/bin/python -m helpers.book.running.runner --profile {profile} --only {notebook}`"


def failure_page(err: NotebookFailed, profile: str, output_dir: Path = _EXECUTED) -> Path:
    """Write the page of a chapter that failed: its title, what failed and how to rerun it once
    fixed, and the end of the traceback; marked failed. Returns the page's path."""
    partial = err.partial.relative_to(ROOT) if err.partial and err.partial.is_relative_to(ROOT) else err.partial
    what = (
        f"**This chapter did not run** on the `{profile}` profile. It failed in the cell that starts "
        f"`{err.cell}`, with:\n\n> {err.error}\n\n"
        "The message says what was wrong; the library's errors also say how to fix it. Once fixed, "
        f"rerun this chapter alone with {_rerun(err.notebook, profile)}, then rebuild the pages with "
        f"`make pages PROFILE={profile}`. The other chapters ran as usual; those that read this "
        f"chapter's tables used what an earlier run had saved, if any. The partly executed notebook is "
        f"`{partial}`."
    )
    trace = "\n".join(_ANSI.sub("", err.traceback).strip().splitlines()[-30:])
    traceback = f"The end of the traceback:\n\n```text\n{trace}\n```"
    return _notice_page(err.notebook, [what, traceback], {"status": "failed", "error": err.error}, output_dir)


def placeholder_pages(settings: Profile, output_dir: Path = _EXECUTED) -> list[Path]:
    """A page for each chapter of ``settings`` that has no executed copy in ``output_dir`` (a
    build of some chapters only, such as a lab's), saying how to run it; runs nothing. Returns
    the pages written."""
    written = []
    for notebook in settings.notebooks:
        if (output_dir / f"{notebook}.ipynb").exists():
            continue
        text = (
            f"**This chapter has not run in this build** of the `{settings.name}` profile. Run it with "
            f"{_rerun(notebook, settings.name)}, then rebuild the pages with `make pages "
            f"PROFILE={settings.name}`."
        )
        written.append(_notice_page(notebook, [text], {"status": "not run"}, output_dir))
    return written


# The pages that judge every claim from the chapters' tables: after `--only` reruns a chapter,
# they run again if what they read changed, so the verdicts follow the student's run.
VERDICT_PAGES = ("15_scorecard", "19_the_answer")


def run_chapters(
    names: list[str],
    params: dict,
    *,
    profile: str,
    output_dir: Path = _EXECUTED,
    force: bool = False,
    models: str = "",
) -> list[NotebookFailed]:
    """Run ``names`` in order as ``run_notebook`` does (``params``: name -> its parameters), with a
    progress line before each. A chapter that fails gets a ``failure_page`` and the ones after it
    still run; returns the failures, in order."""
    pending = [n for n in names if force or not _is_current(n, params[n], output_dir, models)]
    recorded = recorded_chapter_seconds(profile)
    total = time.perf_counter()
    failed: list[NotebookFailed] = []
    for i, name in enumerate(names, 1):
        left = pending[pending.index(name) :] if name in pending else []
        estimate = estimate_left(left, recorded) if left else "cached, not run again"
        print(
            progress_line(
                i, len(names), name=f"{name} ({profile})", elapsed=time.perf_counter() - total, estimate=estimate
            ),
            flush=True,
        )
        try:
            path, seconds, reused = run_notebook(name, params[name], output_dir=output_dir, force=force, models=models)
        except NotebookFailed as err:
            failed.append(err)
            print(f"FAILED: {err}; its page: {failure_page(err, profile, output_dir)}", file=sys.stderr)
            continue
        where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        print(f"      {'cached' if reused else f'done in {seconds:.1f} s'} -> {where}")
    done = f"{len(names) - len(failed)} of {len(names)}" if failed else f"all {len(names)}"
    print(f"{done} notebooks ready in {time.perf_counter() - total:.1f} s")
    return failed


def stale_readers(params: dict, output_dir: Path = _EXECUTED, models: str = "") -> dict[str, list[str]]:
    """Of the chapters in ``params`` (name -> parameters), those whose executed copy in
    ``output_dir`` is current but for saved tables it read that changed since: name -> those
    tables (paths under the results folder)."""
    stale = {}
    for name, chapter_params in params.items():
        output = output_dir / f"{name}.ipynb"
        source = NOTEBOOKS / f"{name}.ipynb"
        if not (output.exists() and source.exists()):
            continue
        meta = json.loads(output.read_text())["metadata"].get("sixteen_heads", {})
        current = meta.get("status") == "ok" and meta.get("fingerprint") == fingerprint(source, chapter_params, models)
        files = changed(meta.get("reads", {})) if current else []
        if files:
            stale[name] = files
    return stale


def own_results(output_dir: Path, profile: str) -> Path | None:
    """Give a run outside the book's pages its own results folder, ``<output_dir>/results``, and
    point this process and its chapters at it (``$SIXTEEN_HEADS_RESULTS``). Made on first use as a
    copy of the profile's current tables, so a chapter that reads another's finds it; a rerun into
    the same folder keeps what is there. Returns ``<output_dir>/results/<profile>``, or None where
    ``$SIXTEEN_HEADS_RESULTS`` is set already: a results folder named by the caller stands."""
    from ..store.results import ENV, results_root

    if ENV in os.environ:
        return None
    own = (output_dir / "results").resolve()
    copy_tables(results_root() / profile, own / profile)
    os.environ[ENV] = str(own)
    return own / profile


def copy_tables(source: Path, target: Path) -> Path:
    """``target`` made, on first use, as a copy of the results folder ``source`` (when it exists),
    the sweep-cost logs left out; a ``target`` that exists is kept as it is. Returns ``target``."""
    import shutil

    if not target.exists():
        if source.exists():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("sweep_costs*"))
        target.mkdir(parents=True, exist_ok=True)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="course", help="smoke, course or paper (profiles/*.yml)")
    parser.add_argument("--only", action="append", default=[], help="run only this notebook (repeatable)")
    parser.add_argument("-p", "--param", action="append", default=[], help="override: name=value (repeatable)")
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=_EXECUTED,
        help="a run of its own: its notebooks here, its tables under <dir>/results/ (default: the book's pages)",
    )
    parser.add_argument("--force", action="store_true", help="rerun even if cached")
    parser.add_argument(
        "--placeholders", action="store_true", help="run nothing: give each chapter never run a page that says so"
    )
    args = parser.parse_args(argv)

    settings = load_profile(args.profile)  # checked against the chapters' parameters cells
    if args.placeholders:
        written = placeholder_pages(settings, args.output_dir)
        print(
            f"{len(written)} chapters not run yet, each with a page that says so" if written else "every chapter ran"
        )
        return 0
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the book never downloads (helpers.book.running.downloads does)
    os.environ.setdefault(shards.JOB_STARTED, str(time.time()))  # ranks ignore status files of earlier jobs
    if args.output_dir.resolve() != _EXECUTED.resolve():
        tables = own_results(args.output_dir, args.profile) or "$SIXTEEN_HEADS_RESULTS"
        print(f"a run of its own: notebooks in {args.output_dir}, tables in {tables}")
    if shards.rank() > 0:  # under torchrun: every rank runs the notebooks, rank 0's copies are the book's
        args.output_dir = args.output_dir / f"rank{shards.rank()}"
    overrides = parse_overrides(args.param)
    names = args.only or list(settings.notebooks)
    unknown = [n for n in names if n not in settings.notebooks]
    if unknown:
        raise SystemExit(f"profile {args.profile!r} has no notebook {unknown}; it has {list(settings.notebooks)}")
    from ...zoo.locations import MissingDownloadError
    from ...zoo.needs import check_local
    from ..course import models_key
    from ..profiles.parameters import checked_overrides

    # every -p is checked against the chapters' parameters cells before anything runs, and goes
    # only to the chapters that declare it
    per_chapter = checked_overrides({n: NOTEBOOKS / f"{n}.ipynb" for n in names}, overrides) if overrides else {}

    read = {m for n in names for m in models_read(settings, n, per_chapter.get(n, {}))}
    try:  # only what the chapters asked for read: `--only 03` is not refused for chapter 09's corpus
        check_local(settings.name, {m: spec for m, spec in settings.models.items() if m in read})
    except MissingDownloadError as err:
        print(f"FAILED before running any notebook: {err}", file=sys.stderr)
        return 1
    models = models_key(settings)
    params = {name: parameters_for(settings, name, per_chapter.get(name, {})) for name in names}
    failed = run_chapters(
        names, params, profile=args.profile, output_dir=args.output_dir, force=args.force, models=models
    )
    if args.only:  # the pages that judge every claim follow a chapter's new tables
        others = [n for n in settings.notebooks if n not in names]
        stale = stale_readers({n: parameters_for(settings, n, {}) for n in others}, args.output_dir, models)
        for name, files in stale.items():
            what = "run again now" if name in VERDICT_PAGES else f"rerun it with --only {name} to follow"
            print(f"{name} read tables that changed ({', '.join(files)}): {what}")
        follow = {n: parameters_for(settings, n, {}) for n in stale if n in VERDICT_PAGES}
        if follow:
            failed += run_chapters(
                list(follow), follow, profile=args.profile, output_dir=args.output_dir, models=models
            )
    if failed:
        print("FAILED: " + ", ".join(err.notebook for err in failed) + " (each page says why)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
