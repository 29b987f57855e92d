"""helpers/ has parts imported one way: book -> zoo -> serving and kv -> sweeps and probes -> heads -> base,
with no import cycle; inside
helpers/book, one folder per job, imported one way too: running -> scorecard -> chapters -> verdicts ->
experiments -> course -> profiles, store, paper.

The graph is read from the source (every ``import`` statement, at module level or inside a
function), so a lazy import that would close a cycle counts as much as a top-level one.
"""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from helpers.book.running.chapter_code import import_graph, module_name

ROOT = Path(__file__).resolve().parent.parent
# a part may import its own rank or lower
PARTS = {"base": 0, "heads": 1, "sweeps": 2, "probes": 2, "kv": 3, "serving": 3, "zoo": 4, "book": 5}
# helpers/book's folders by job, with the same rule: the folders of one rank share nothing
BOOK_FOLDERS = {
    "profiles": 0,
    "store": 0,
    "paper": 0,
    "course": 1,
    "experiments": 2,
    "verdicts": 3,
    "chapters": 4,
    "scorecard": 5,
    "running": 6,
}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def part_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def wrong_way(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Imports that go up (heads -> zoo or book, zoo -> book); the top ``helpers`` package may
    import only the head library."""
    bad = []
    for module, targets in graph.items():
        mine = part_of(module)
        for target in targets:
            theirs = part_of(target)
            if mine is None and theirs != "heads":
                bad.append((module, target))
            elif mine is not None and theirs is not None and PARTS[theirs] > PARTS[mine]:
                bad.append((module, target))
    return sorted(bad)


@pytest.fixture(scope="module")
def graph():
    return import_graph(ROOT / "helpers")


def test_every_module_belongs_to_one_of_the_parts(graph):
    loose = [m for m in graph if m != "helpers" and part_of(m) not in PARTS]
    assert not loose, f"modules outside the parts {sorted(PARTS)} of helpers/: {loose}"
    assert all(part in {part_of(m) for m in graph} for part in PARTS)


def test_helpers_has_no_import_cycle(graph):
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_imports_go_one_way_book_zoo_heads(graph):
    assert wrong_way(graph) == []


def book_folder_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "book" else None


def wrong_way_in_book(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Imports between helpers/book's folders that go up ``BOOK_FOLDERS`` or across one rank."""
    bad = []
    for module, targets in graph.items():
        mine = book_folder_of(module)
        for target in targets:
            theirs = book_folder_of(target)
            if mine and theirs and mine != theirs and BOOK_FOLDERS[theirs] >= BOOK_FOLDERS[mine]:
                bad.append((module, target))
    return sorted(bad)


def test_helpers_book_has_one_folder_per_job(graph):
    folders = {book_folder_of(m) for m in graph if m.startswith("helpers.book.")}
    assert folders == set(BOOK_FOLDERS), (
        f"helpers/book holds modules outside its job folders: {folders - set(BOOK_FOLDERS)}"
    )
    loose_files = [p.name for p in (ROOT / "helpers" / "book").glob("*.py") if p.name != "__init__.py"]
    assert loose_files == [], f"modules directly in helpers/book, outside its job folders: {loose_files}"


def test_the_books_package_map_names_its_folders_in_their_import_order():
    import helpers.book

    named = re.findall(r"^\* ``(\w+)/``|^  ``(\w+)/``", helpers.book.__doc__, flags=re.M)
    order = [name for pair in named for name in pair if name]
    assert set(order) == set(BOOK_FOLDERS)
    assert [BOOK_FOLDERS[name] for name in order] == sorted((BOOK_FOLDERS[n] for n in order), reverse=True)


def test_imports_go_one_way_between_the_books_folders(graph):
    assert wrong_way_in_book(graph) == []
    fake = {
        "helpers.book.store.results": {"helpers.book.experiments.sweeps"},
        "helpers.book.experiments.pruning_runs": {"helpers.book.scorecard.card"},
        "helpers.book.chapters.ch09_training_dynamics": {"helpers.book.experiments.pruning_runs"},
        "helpers.book.running.runner": {"helpers.book.course"},
    }
    assert wrong_way_in_book(fake) == [
        ("helpers.book.experiments.pruning_runs", "helpers.book.scorecard.card"),
        ("helpers.book.store.results", "helpers.book.experiments.sweeps"),
    ]


def test_the_checks_catch_a_cycle_and_an_upward_import(tmp_path):
    pkg = tmp_path / "pkg"
    for part in ("heads", "zoo", "book"):
        (pkg / part).mkdir(parents=True)
        (pkg / part / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("from .heads import gates\n")
    (pkg / "heads" / "gates.py").write_text("def f():\n    from ..zoo.models import load  # lazy, still counted\n")
    (pkg / "zoo" / "models.py").write_text("from ..heads import gates\nfrom ..book import runner\n")
    (pkg / "book" / "runner.py").write_text("import pkg.zoo.models\n")
    fake = import_graph(pkg)
    assert fake["pkg.heads.gates"] == {"pkg.zoo.models"}
    assert fake["pkg.zoo.models"] == {"pkg.heads.gates", "pkg.book.runner"}
    cycle = find_cycle(fake)
    assert cycle[0] == cycle[-1] and set(cycle) in (
        {"pkg.book.runner", "pkg.zoo.models"},
        {"pkg.heads.gates", "pkg.zoo.models"},
    )
    assert wrong_way(fake) == [("pkg.heads.gates", "pkg.zoo.models"), ("pkg.zoo.models", "pkg.book.runner")]


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(m for m in sys.modules if m.startswith('helpers')))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_the_head_library_loads_without_the_other_parts():
    for statement in ("import helpers", "import helpers.heads", "from helpers.heads import pruning"):
        loaded = _loaded_after(statement)
        assert "helpers.heads.gates" in loaded
        assert {part_of(m) for m in loaded} <= {None, "heads", "base"}, (statement, loaded)


def test_the_head_library_loads_no_serving_or_cache_code():
    code = (
        "import sys; import helpers, helpers.heads; "
        "print(' '.join(m for m in sys.modules if m.split('.')[0] in ('gguf', 'xllamacpp', 'optimum') "
        "or m.startswith(('helpers.kv', 'helpers.serving', 'helpers.sweeps', 'helpers.probes'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == []
    # the check can fail: the book's chapter 14b loads them all
    code = code.replace("import helpers, helpers.heads", "import helpers.book.chapters.ch14b_served_at_equal_memory")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert {"helpers.serving.gguf_export", "helpers.serving.llama_api"} <= set(out.stdout.split())


def test_the_head_librarys_public_names_are_few_and_used_elsewhere():
    """About thirty names, each used somewhere outside the module that defines it (and the
    package's ``__init__``)."""
    import ast
    import re

    from helpers import heads

    assert len(heads.__all__) <= 32 and len(set(heads.__all__)) == len(heads.__all__), heads.__all__
    package = ROOT / "helpers" / "heads"
    home = {
        alias.name: package / f"{node.module}.py"
        for node in ast.parse((package / "__init__.py").read_text()).body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    places = [ROOT / "helpers", ROOT / "tests", ROOT / "benchmarks", ROOT / "notebooks"]
    texts = {
        p: p.read_text()
        for place in places
        for p in place.rglob("*")
        if p.suffix in {".py", ".ipynb"} and p.name != "test_layout.py"  # this file's lists are no use
    }
    unused = [
        name
        for name in heads.__all__
        if not any(
            re.search(rf"\b{name}\b", text)
            for p, text in texts.items()
            if p not in (home[name], package / "__init__.py")
        )
    ]
    assert unused == []


def test_import_helpers_keeps_the_public_api():
    import helpers
    from helpers import heads

    for name in (
        "attention_sites",
        "HeadGates",
        "head_importance",
        "prune_heads",
        "kept_heads",
        "pruned_heads",
        "save_pruned",
        "load_pruned",
        "SUPPORTED_FAMILIES",
        "HeadSpecError",
        "UnsupportedModelError",
    ):
        assert getattr(helpers, name) is getattr(heads, name), name
    assert set(helpers.__all__) <= set(heads.__all__)
    assert all(hasattr(heads, name) for name in heads.__all__)


def test_the_installed_project_ships_every_subpackage():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = set(config["tool"]["setuptools"]["packages"])
    on_disk = {module_name(p, ROOT / "helpers") for p in (ROOT / "helpers").rglob("__init__.py")}
    assert packages == on_disk


def _call(name: str, obj) -> str:
    """``name(a, b=1, *, c=None)`` as the API page writes a signature: no annotations."""
    import inspect

    parts, star = [], False
    for p in inspect.signature(obj).parameters.values():
        if p.kind is p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        parts.append(p.name if p.default is p.empty else f"{p.name}={p.default!r}")
    return f"{name}({', '.join(parts)})"


def test_the_api_page_lists_every_public_name_with_its_current_signature():
    import inspect

    from helpers import heads

    page = (ROOT / "book" / "api.md").read_text()
    assert "book/api" in (ROOT / "_toc.yml").read_text()
    for name in heads.__all__:
        obj = getattr(heads, name)
        if inspect.isfunction(obj) or name == "HeadGates":
            assert f"`{_call(name, obj)}`" in page, f"book/api.md lacks {_call(name, obj)}"
        else:
            assert f"`{name}`" in page, f"book/api.md does not mention {name}"


def test_a_chapters_module_reruns_that_chapter_and_the_pages_that_read_every_verdict():
    """A chapter's module (``chapters/chNN_*.py``: its experiment, rules and findings) is in the
    import closure (the cache key) of that chapter, the scorecard and the front page only; chapter
    12 also applies chapter 03's rules and reads chapter 11's grid; 17's key judges a claim of 06."""
    from helpers.book.running.chapter_code import PACKAGE, chapter_modules

    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    closure = {
        nb.stem.split("_", 1)[0]: {p.relative_to(PACKAGE).as_posix() for p in chapter_modules(nb)} for nb in notebooks
    }
    modules = sorted((ROOT / "helpers" / "book" / "chapters").glob("ch*.py"))
    # chapters 02-14b (an experiment, rules or findings), 15a (its worked examples), 17 (the teacher's key),
    # 17b (its exercises' checks)
    assert len(modules) == 18
    for path in modules:
        chapter = path.stem[2:].split("_", 1)[0]
        rerun = {n for n, found in closure.items() if f"book/chapters/{path.name}" in found}
        also = {"12"} if chapter in ("03", "11") else set()
        also |= {"17"} if chapter == "06" else set()  # the teacher's key judges chapter 06's claim
        # the pages that read every claim
        judged = {"15", "19"} if chapter not in ("02", "15a", "17", "17b") else set()
        assert rerun == {chapter} | judged | also, (path.name, sorted(rerun))


def test_every_chapter_module_is_named_like_its_notebook():
    notebooks = {nb.stem for nb in (ROOT / "notebooks").glob("*.ipynb")}
    modules = {p.stem.removeprefix("ch") for p in (ROOT / "helpers" / "book" / "chapters").glob("ch*.py")}
    assert modules <= notebooks, modules - notebooks


def test_no_issue_numbers_in_code_or_profiles():
    """Code says why, not which ticket: an issue number means nothing to a reader of the file."""
    import re

    pattern = re.compile(r"\b[Ii]ssues? #?\d+")
    places = [ROOT / "helpers", ROOT / "notebooks", ROOT / "profiles", ROOT / "benchmarks", ROOT / "tests"]
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for place in places
        for path in sorted(place.rglob("*"))
        if path.suffix in {".py", ".ipynb", ".yml"}
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert not found, f"issue numbers in: {found}"


def test_nothing_a_reader_sees_cites_a_file_outside_the_repository():
    """Pages, docstrings and profiles cite the paper (its sections, tables and figures) or the
    authors' scripts, which a reader can open; never the notes this project was built from."""
    import re

    pattern = re.compile(r"REFERENCE\.md|\.\./shared/")
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in _repository_texts()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert not found, f"citations of files outside the repository in: {found}"


def _repository_texts() -> list[Path]:
    places = [ROOT / "helpers", ROOT / "notebooks", ROOT / "profiles", ROOT / "book", ROOT / "benchmarks"]
    files = [p for place in places for p in sorted(place.rglob("*")) if p.suffix in {".py", ".ipynb", ".yml", ".md"}]
    return [*files, ROOT / "README.md", ROOT / "Makefile", ROOT / "environment.yml"]


def test_every_python_m_command_the_repository_names_runs_something():
    """A command printed in a profile, a page or a docstring (``python -m helpers.x.y ...``) names
    a module with a command line: one that ends in ``if __name__ == "__main__"``, or a package with
    a ``__main__.py``. A module without one exits 0 having done nothing."""
    import re

    named = {
        m: path.relative_to(ROOT)
        for path in _repository_texts()
        for m in re.findall(r"python -m (helpers(?:\.\w+)+)", path.read_text())
    }
    assert "helpers.book.running.downloads" in named  # the scan finds what it should
    silent = []
    for module, where in sorted(named.items()):
        file = ROOT.joinpath(*module.split("."))
        if (file / "__main__.py").exists():
            continue
        source = file.with_suffix(".py")
        if not source.exists() or 'if __name__ == "__main__":' not in source.read_text():
            silent.append(f"{module} (named in {where})")
    assert not silent, f"these modules have no command line: {silent}"


def test_the_python_floor_covers_the_standard_library_the_code_uses():
    """``tarfile``'s ``extractall(filter=...)`` (the archive download) exists from Python 3.11.4:
    pyproject.toml and environment.yml must refuse an older 3.11."""
    import re

    from packaging.specifiers import SpecifierSet

    assert "filter=" in (ROOT / "helpers" / "zoo" / "needs.py").read_text()
    floor = SpecifierSet(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"])
    assert "3.11.3" not in floor and "3.11.4" in floor
    (conda,) = re.findall(r"^\s*- python(\S*)", (ROOT / "environment.yml").read_text(), re.M)
    if re.fullmatch(r"=[\d.]+", conda):  # conda's `python=3.11` means any 3.11
        conda = f"={conda}.*"
    assert "3.11.3" not in SpecifierSet(conda), f"environment.yml pins python{conda}"


# functions whose callers fix their parameters' order: transformers calls an attention function
# positionally, functools.partial and a process pool pass arguments by position, an exception's
# arguments are pickled by position, a student writes the pruning loop with this signature, and
# the head library's importance is called as the paper writes it, I_h(model, data, loss)
_POSITIONAL_BY_CONTRACT = {
    ("heads/importance.py", "head_importance"),
    ("heads/importance.py", "importance_terms"),
    ("heads/sites.py", "_uneven_attention"),
    ("kv/selective.py", "_selective_attention"),
    ("kv/selective.py", "_masked_attention"),
    ("book/course/building.py", "build_arm"),
    ("book/course/building.py", "_build_in_worker"),
    ("book/running/runner.py", "__init__"),
    ("sweeps/pruning_curves.py", "pruning_curve"),
}


def test_functions_of_five_or_more_parameters_take_all_but_two_by_keyword():
    import ast

    package = ROOT / "helpers"
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                positional = [a.arg for a in node.args.posonlyargs + node.args.args if a.arg not in ("self", "cls")]
                if len(positional) + len(node.args.kwonlyargs) >= 5 and len(positional) > 2:
                    found.append((path.relative_to(package).as_posix(), node.name))
    assert sorted(set(found) - _POSITIONAL_BY_CONTRACT) == []
    assert set(found) == _POSITIONAL_BY_CONTRACT  # each exception is still needed
