"""Cache keys follow what code computes: prose and logging leave them, a real change moves them."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from helpers.base.code_digest import computation_of, recipe_digest
from helpers.zoo import model_cache

BASE = textwrap.dedent('''
    """Module docstring."""
    import sys

    def train(epochs: int = 3, log=None) -> list:
        """Train."""
        losses = []
        for epoch in range(epochs):
            losses.append(1.0 / (epoch + 1))
            if log:
                log(f"epoch {epoch}: {losses[-1]:.3f}")
        print("done")
        return losses
''')

SAME = [
    ("a comment", BASE.replace("losses = []", "losses = []  # one per epoch\n    # and a line of its own")),
    ("a docstring", BASE.replace('"""Train."""', '"""Train the model, one loss per epoch."""')),
    ("a log line's words", BASE.replace('f"epoch {epoch}', 'f"finished epoch {epoch}')),
    ("a new log line", BASE.replace('print("done")', 'print("done")\n    sys.stderr.write("bye\\n")')),
    ("a guarded log line", BASE.replace("return losses", "if log:\n        log('all done')\n    return losses")),
]
OTHER = [
    ("a default", BASE.replace("epochs: int = 3", "epochs: int = 4")),
    ("a constant", BASE.replace("1.0 /", "2.0 /")),
    ("a statement", BASE.replace("return losses", "losses.reverse()\n    return losses")),
]


@pytest.mark.parametrize("what, source", SAME, ids=[w for w, _ in SAME])
def test_prose_and_logging_keep_the_digest(what, source):
    assert source != BASE
    assert computation_of(source) == computation_of(BASE), what


@pytest.mark.parametrize("what, source", OTHER, ids=[w for w, _ in OTHER])
def test_a_change_to_what_is_computed_moves_the_digest(what, source):
    assert computation_of(source) != computation_of(BASE), what


def test_recipe_digest_reads_files_and_names_them(tmp_path: Path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text(BASE)
    b.write_text(BASE)
    assert recipe_digest([a], tmp_path) != recipe_digest([b], tmp_path)  # the path is part of the recipe
    before = recipe_digest([a, b], tmp_path)
    a.write_text(BASE + "\n# a trailing comment\n")
    assert recipe_digest([a, b], tmp_path) == before
    a.write_text(BASE.replace("range(epochs)", "range(epochs + 1)"))
    assert recipe_digest([a, b], tmp_path) != before


def test_every_model_source_parses_and_keeps_its_training_code():
    """The model key's sources: each one's digest drops its logging but keeps the training code
    (a function that trains, e.g. recipes.build_translation, is still in the tree)."""
    root = Path(model_cache.__file__).resolve().parents[1]
    for source in model_cache._SOURCES:
        assert "Module(" in computation_of((root / source).read_text()), source
    recipes = computation_of((root / "zoo/recipes.py").read_text())
    assert "'build_translation'" in recipes and "'build_classifier'" in recipes
    cache = computation_of((root / "zoo/model_cache.py").read_text())
    assert "'build_into'" in cache and "'log_line'" not in cache
