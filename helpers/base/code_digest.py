"""Digests of what a piece of code computes, for cache keys that prose and logging never break.

A cache key that hashes whole source files changes whenever a comment, a docstring or the
wording of a log line changes, and then retrains models or reruns sweeps that would come out
bit for bit the same. ``recipe_digest`` hashes the syntax tree of each module instead, with

* comments (not in the tree) and docstrings removed;
* logging removed: a statement that only calls ``print``, ``log``, ``log_line``, ``say``,
  ``tqdm.write``, ``sys.stderr.write`` or a ``logger``/``logging`` method, a nested function
  named ``log``, and an ``if`` left with nothing else inside.

Everything else counts: a changed constant, argument, default or line of training code gives
another digest. The tree's form depends on the Python version, so another version rebuilds
once, cleanly.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterable
from pathlib import Path

_LOGGING_CALLS = frozenset({"print", "log", "log_line", "say"})
_LOGGING_METHODS = frozenset({("tqdm", "write"), ("stderr", "write"), ("stdout", "write")})
_LOGGER_NAMES = frozenset({"logger", "logging", "log"})


def _is_logging_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Name):
        return func.id in _LOGGING_CALLS
    if isinstance(func, ast.Attribute):
        owner = func.value
        owner_name = (
            owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
        )
        return (owner_name, func.attr) in _LOGGING_METHODS or owner_name in _LOGGER_NAMES
    return False


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


class _WithoutProse(ast.NodeTransformer):
    """Drops docstrings, logging statements, functions named ``log`` and emptied ``if``s."""

    def generic_visit(self, node: ast.AST) -> ast.AST:
        super().generic_visit(node)
        for field in ("body", "orelse", "finalbody"):
            statements = getattr(node, field, None)
            if not isinstance(statements, list) or not statements or not isinstance(statements[0], ast.stmt):
                continue
            kept = [s for s in statements if not self._prose(s)]
            if field == "body" and not kept and not isinstance(node, ast.Module):
                kept = [ast.Pass()]
            setattr(node, field, kept)
        return node

    @staticmethod
    def _prose(statement: ast.stmt) -> bool:
        if _is_docstring(statement):
            return True
        if isinstance(statement, ast.Expr) and _is_logging_call(statement.value):
            return True
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and statement.name in _LOGGING_CALLS:
            return True
        return (
            isinstance(statement, ast.If)
            and not statement.orelse
            and all(isinstance(s, ast.Pass) for s in statement.body)
        )


def computation_of(source: str) -> str:
    """The syntax tree of ``source`` without its prose and logging, as text (``ast.dump``)."""
    tree = _WithoutProse().visit(ast.parse(source))
    return ast.dump(tree, annotate_fields=False, include_attributes=False)


def recipe_digest(paths: Iterable[Path], root: Path | None = None) -> str:
    """64 hex digits over what the modules at ``paths`` compute (``computation_of`` each), with
    each module's path relative to ``root`` (its name, when ``root`` is None)."""
    h = hashlib.sha256()
    for path in paths:
        path = Path(path)
        name = path.relative_to(root).as_posix() if root else path.name
        h.update(name.encode() + b"\0" + computation_of(path.read_text()).encode() + b"\0")
    return h.hexdigest()
