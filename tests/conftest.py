import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def smoke_cache(tmp_path_factory):
    """A temporary model cache with every smoke-profile model, built once per session."""
    from helpers import course
    from helpers.runner import load_profile

    path = tmp_path_factory.mktemp("smoke-models")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SIXTEEN_HEADS_CACHE", str(path))
        course.build(load_profile("smoke"), progress=False)
    return path


@pytest.fixture
def smoke(smoke_cache, monkeypatch):
    """The smoke profile, its models read from ``smoke_cache`` during this test only."""
    from helpers.runner import load_profile

    monkeypatch.setenv("SIXTEEN_HEADS_CACHE", str(smoke_cache))
    return load_profile("smoke")
