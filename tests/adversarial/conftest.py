"""Fixtures shared by the adversarial tests."""

import pytest

from tests.adversarial.save_folders import previous_output


@pytest.fixture
def previous(tmp_path, capsys):
    """A save folder holding a complete earlier output (from the fixture), and its snapshot."""
    save_dir = tmp_path / "save"
    before = previous_output(save_dir)
    capsys.readouterr()
    return save_dir, before
