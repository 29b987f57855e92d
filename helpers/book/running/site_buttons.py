"""A Sphinx extension (listed in ``_config.yml``): the book's repository button follows the one
repository setting, ``repository.url`` in ``_config.yml``. Jupyter Book refuses to build with
its repository button on and no url, so ``_config.yml`` leaves the button off and this turns it on
when a url is set. With none, the runner's line under each chapter title says how to run the
chapter from a local copy instead of linking to Colab and Binder (``runner.launch_links``)."""

from __future__ import annotations

from pathlib import Path

import yaml


def repository_of(config_file: Path) -> tuple[str, str]:
    """``(url, branch)`` from a book's ``_config.yml`` (url "" when unset)."""
    config = yaml.safe_load(config_file.read_text()).get("repository") or {}
    return (config.get("url") or "").rstrip("/"), config.get("branch") or "main"


def _follow_repository(app, config) -> None:
    url, branch = repository_of(Path(app.srcdir) / "_config.yml")
    if url:
        config.html_theme_options = {
            **(config.html_theme_options or {}),
            "repository_url": url,
            "repository_branch": branch,
            "use_repository_button": True,
        }


def setup(app) -> dict:
    app.connect("config-inited", _follow_repository)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
