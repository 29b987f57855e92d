"""Scratch folders: files a run needs across several calls (or notebook cells) but never keeps."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path


def scratch_folder(prefix: str) -> Path:
    """A new empty folder in the system's temporary directory, named ``prefix`` and a random
    tail; it and everything in it are deleted when this Python process exits normally (a
    notebook's kernel included, which exits when the run ends). Copy out what should last."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder
