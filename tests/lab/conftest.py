"""Fixtures of the lab's tests: the tiny assets, built once per test session (about 5 s)."""

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def lab_assets(tmp_path_factory) -> Path:
    from verl_ext.tiny.assets import build_tiny_assets

    out = tmp_path_factory.mktemp("lab_assets") / "tiny"
    build_tiny_assets(out)
    return out
