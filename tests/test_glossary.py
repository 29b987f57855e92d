"""The glossary: every term it defines is linked to it where the book first uses the word, in the
order a reader meets the pages (the table of contents, front page first). Read from the pages'
own Markdown (notebooks' markdown cells and book/*.md): text a cell prints comes after its
chapter's prose, which introduces the word."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "book" / "glossary.md"
_ROLE = re.compile(r"(\{[\w:-]+\})?`([^`]*)`")
_BLANKS = [
    re.compile(r"```.*?```", re.S),  # fenced blocks and directives
    re.compile(r"^\s*#+ .*$", re.M),  # headings
    re.compile(r"\$\$.*?\$\$", re.S),
    re.compile(r"\$[^$\n]+\$"),
]


def glossary_terms(text: str) -> list[str]:
    """The terms of the ``{glossary}`` block: its unindented, non-empty lines."""
    block = re.search(r"```\{glossary\}\n(.*?)```", text, re.S)
    assert block, f"{GLOSSARY} has no glossary block"
    return [line.strip() for line in block.group(1).splitlines() if line.strip() and not line[0].isspace()]


def reading_order() -> list[Path]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"], *(c["file"] for part in toc["parts"] for c in part["chapters"])]
    return [_source(f) for f in files if not f.endswith("glossary")]


def _source(entry: str) -> Path:
    name = entry.split("/")[-1]
    return ROOT / "notebooks" / f"{name}.ipynb" if "executed/" in entry else ROOT / f"{entry}.md"


def prose(path: Path) -> str:
    """The page's own Markdown."""
    if path.suffix == ".md":
        return path.read_text()
    cells = json.loads(path.read_text())["cells"]
    return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def mentions(text: str, term: str) -> list[tuple[int, bool]]:
    """Where ``text`` uses ``term`` as running prose, in order: (position, linked to the glossary).
    Code, formulas, headings and other roles' text are not prose; a plural or -ing form counts."""
    for pattern in _BLANKS:
        text = pattern.sub(lambda m: " " * len(m.group(0)), text)
    found = []
    for m in _ROLE.finditer(text):
        if m.group(1) == "{term}":
            target = re.search(r"<([^>]*)>\s*$", m.group(2))
            if " ".join((target.group(1) if target else m.group(2)).split()).lower() == term.lower():
                found.append((m.start(), True))
    text = _ROLE.sub(lambda m: " " * len(m.group(0)), text)
    word = re.compile(r"(?<![\w-])" + r"\s+".join(map(re.escape, term.split())), re.I)
    found += [(m.start(), False) for m in word.finditer(text)]
    return sorted(found)


def test_the_glossary_is_in_the_table_of_contents():
    assert "book/glossary" in (ROOT / "_toc.yml").read_text()


def test_each_term_is_linked_where_the_book_first_uses_it():
    unlinked = []
    for term in glossary_terms(GLOSSARY.read_text()):
        for path in reading_order():
            found = mentions(prose(path), term)
            if found:
                if not found[0][1]:
                    unlinked.append(f"{term!r} first in {path.name}")
                break
        else:
            unlinked.append(f"{term!r} is used on no page")
    assert not unlinked, "link each with {term}`...`: " + "; ".join(unlinked)


def test_a_mention_is_found_and_a_link_is_told_from_it():
    text = "The `gate` code, $gate$, and **gates**. Then {term}`gates <gate>` and {doc}`gate <x>`."
    found = mentions(text, "gate")
    assert [linked for _, linked in found] == [False, True]
    assert text[found[0][0] :].startswith("gates")
    assert mentions("A {term}`sweep` runs.", "sweep") == [(2, True)]
    assert mentions("No such word.", "sweep") == []
