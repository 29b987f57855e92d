"""Each chapter's claims and the rules that judge them, one module per chapter (``ch03`` ...
``ch14``, and ``ch13b``), beside that chapter's findings (``verdicts/findings``). A module holds
its chapter's ``CLAIMS`` and what only they read; ``engine`` judges them and ``scorecard`` gathers them all.

A chapter imports its own module only, so an edit to one chapter's rule reruns that chapter and
the scorecard (``running.chapter_code``); this file imports nothing, for the same reason.
Chapter 12 judges chapter 03's rules under other ways of removing a head, so it imports ``ch03``.
"""
