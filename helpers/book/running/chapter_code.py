"""Which ``helpers`` modules a chapter runs, read from the source: the chapter's cache key.

A chapter's executed copy is reused while its notebook, its parameters, its models and the code
it runs are unchanged. "The code it runs" is the import closure of the notebook's own imports
of ``helpers`` (every ``import`` in the notebook's code cells and, transitively, in the modules
they reach, at module level or inside a function, with every parent package), digested by what
it computes (``base.code_digest``: comments, docstrings and logging left out). So a comment in
any module reruns nothing, and an edit to a module a chapter never imports leaves that chapter
alone.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

from ...base.code_digest import recipe_digest
from ...zoo.locations import REPO

PACKAGE = REPO / "helpers"


def module_name(path: Path, root: Path = PACKAGE) -> str:
    """``helpers.book.running.runner`` for ``<root>/book/running/runner.py``; a package is its ``__init__``."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports_of(tree: ast.AST, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules among ``known`` that ``tree`` (the source of ``module``) imports anywhere."""
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node, module, is_package)
            for alias in node.names:  # `from pkg import mod` imports a module, `from mod import f` a name
                targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {t for t in targets if t in known and t != module}


def _module_files(root: Path = PACKAGE) -> dict[str, Path]:
    """``{module name: file}`` of every module of the package at ``root``."""
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """``{module: modules of the package under root that it imports}``."""
    files = _module_files(root)
    return {
        m: _imports_of(ast.parse(p.read_text(), str(p)), m, p.name == "__init__.py", set(files))
        for m, p in files.items()
    }


def _notebook_code(notebook: Path) -> str:
    """The code cells of ``notebook``, IPython's ``%`` and ``!`` lines left out."""
    cells = json.loads(notebook.read_text()).get("cells", [])
    lines = [
        line
        for c in cells
        if c.get("cell_type") == "code"
        for line in "".join(c.get("source", "")).splitlines()
        if not line.lstrip().startswith(("%", "!"))
    ]
    return "\n".join(lines)


def chapter_modules(notebook: Path, root: Path = PACKAGE) -> list[Path]:
    """The files of every ``helpers`` module the chapter at ``notebook`` runs, sorted."""
    files = _module_files(root)
    graph = import_graph(root)
    todo = list(_imports_of(ast.parse(_notebook_code(notebook)), "__main__", False, set(files)))
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        parents = [".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)]
        todo.extend(graph[module] | {p for p in parents if p in files})
    return sorted(files[m] for m in seen)


def chapter_code_digest(notebook: Path, root: Path = PACKAGE) -> str:
    """16 hex digits over what the ``helpers`` modules the chapter runs compute."""
    return recipe_digest(chapter_modules(notebook, root), root.parent)[:16]
