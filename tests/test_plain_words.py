"""The chapters' prose, as the book renders it (each notebook's own markdown and the text its cells
generate), is written for a reader: no sentence over ``LONGEST`` words, and half of them at most
``MEDIAN``. Counted on the smoke book's executed notebooks, whose generated text has the course
book's sentences with other numbers."""

from __future__ import annotations

import re
import statistics

import nbformat

LONGEST, MEDIAN = 50, 25
_SHORTEST = 3  # words: a label such as "**Try next:**" is not a sentence
_ABBREVIATIONS = ("e.g", "i.e", "cf", "vs", "Fig", "Eq", "et al", "approx", "resp")


def _prose(markdown: str) -> str:
    """What a reader reads as running text: no fenced blocks, headings, tables or formulas; code
    spans, roles and inline formulas as one word each; list items as blocks of their own."""
    text = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    text = re.sub(r"^\s*#+ .*$", " ", text, flags=re.M)
    text = re.sub(r"^\s*\|.*$", " ", text, flags=re.M)
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)
    text = re.sub(r"\$[^$]+\$", "x", text)
    text = re.sub(r"\{[a-z:]+\}`[^`]*`", "Ref", text)
    text = re.sub(r"`[^`]*`", "Code", text)
    text = text.replace(" · ", "\n\n")  # a list of links set on one line (a page's data tables)
    return re.sub(r"^\s*(?:[*\-]|\d+\.) ", "\n\n", text, flags=re.M)


def sentences(markdown: str) -> list[str]:
    """The sentences of ``markdown`` as rendered: split after ., ! or ? and a space (not after an
    abbreviation such as "e.g."), within each paragraph or list item."""
    out = []
    for block in re.split(r"\n\s*\n", _prose(markdown)):
        words = block.split()
        current: list[str] = []
        for word in words:
            current.append(word)
            if re.search(r"[.!?][*)\"']*$", word) and not word.rstrip(".").endswith(_ABBREVIATIONS):
                out.append(" ".join(current))
                current = []
        if current:
            out.append(" ".join(current))
    return [s for s in out if len(s.split()) >= _SHORTEST]


def test_the_counter_counts_what_a_reader_reads():
    text = (
        "# A heading of many words that is no sentence\n\nOne idea here. Another, e.g. this one; and `a code "
        "span` here!\n\n| a | table | row |\n|---|---|---|\n\n* a list item of words\n* another item of "
        "words\n\n```python\nx = 1. y = 2\n```\n\nA formula $x + y = z$ counts once. **Try next:**"
    )
    assert sentences(text) == [
        "One idea here.",
        "Another, e.g. this one; and Code here!",
        "a list item of words",
        "another item of words",
        "A formula x counts once.",
    ]
    assert len(sentences("word " * 60 + "end.")[0].split()) == 61  # a long sentence stays whole


def _rendered_prose(path) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    texts = [c.source for c in nb.cells if c.cell_type == "markdown"]
    texts += [
        o["data"]["text/markdown"]
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if "text/markdown" in o.get("data", {})
    ]
    return [s for text in texts for s in sentences(text)]


def test_the_chapters_prose_is_plain(smoke_executed):
    found = {name: _rendered_prose(path) for name, path in smoke_executed.items() if not isinstance(path, Exception)}
    assert len(found) == len(smoke_executed), "a smoke notebook failed (its own test says why)"
    lengths = [len(s.split()) for texts in found.values() for s in texts]
    long = [(name, len(s.split()), s) for name, texts in found.items() for s in texts if len(s.split()) > LONGEST]
    assert not long, f"{len(long)} sentences over {LONGEST} words, e.g. {long[:3]}"
    assert statistics.median(lengths) <= MEDIAN, statistics.median(lengths)
