"""The pages that read every chapter's verdicts: the scorecard (chapter 15), its HTML table, and
the front page's answer."""
