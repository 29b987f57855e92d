"""Import fairseq without letting it reconfigure logging.

fairseq 0.12 calls ``logging.basicConfig`` while importing (``level=DEBUG`` in
``models/wav2vec/wav2vec2_classification.py``, INFO in ``tasks/text_to_speech.py``). In a fresh
process, such as a notebook kernel, that installs a root handler at DEBUG, and every library's
debug lines (matplotlib's font search, hundreds of them) end up in the notebook. Every helper
that needs fairseq calls ``import_fairseq()`` first; it imports the package once and puts the
root logger back as it was. It also silences one warning torch gives on every fairseq decoder
(below), which says nothing a reader can act on.
"""

from __future__ import annotations

import functools
import logging
import warnings


@functools.lru_cache(maxsize=1)
def import_fairseq():
    root, own = logging.getLogger(), logging.getLogger("fairseq")
    level, own_level, handlers = root.level, own.level, list(root.handlers)
    own.setLevel(logging.WARNING)  # import-time INFO lines ("Please install tensorboardX") are noise
    try:
        import fairseq
    finally:
        root.setLevel(level)
        own.setLevel(own_level)
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
    # fairseq 0.12's decoder passes a float causal mask beside a boolean padding mask; torch
    # deprecates mixing the two (both mean the same masking here). This one message only.
    warnings.filterwarnings(
        "ignore", message="Support for mismatched key_padding_mask and attn_mask is deprecated", category=UserWarning
    )
    return fairseq
