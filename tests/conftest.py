"""Fixtures shared by every test folder."""

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture
def shared_datasets():
    path = SHARED / "datasets"
    if not path.is_dir():
        pytest.skip(f"{path} is absent (real datasets live in the project's shared folder, not in a user's clone)")
    return path
