"""Fixtures for the preprocessor tests: the raw fixture folders and a runner that reads the output back."""

from __future__ import annotations

import importlib
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "datasets"


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def guru_raw(tmp_path) -> Path:
    """The Guru fixture rows as the hub lays them out: ``<dir>/train/math__combined_54.4k.parquet``."""
    rows = json.loads((FIXTURES / "guru" / "math_rows.json").read_text())
    folder = tmp_path / "guru_raw"
    (folder / "train").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), folder / "train" / "math__combined_54.4k.parquet")
    return folder


@pytest.fixture
def copy_fixture(tmp_path):
    """Copy a fixture folder to a temporary place (to edit or convert it) and return the copy."""

    def copy(name: str) -> Path:
        target = tmp_path / f"raw_{name}"
        shutil.copytree(FIXTURES / name, target)
        return target

    return copy


class Run:
    """The outcome of one command: exit status, printed text and the parquet files written."""

    def __init__(self, status: int, out: str, err: str, save_dir: Path):
        self.status, self.out, self.err, self.save_dir = status, out, err, save_dir

    def rows(self, split: str) -> list[dict]:
        return pq.read_table(self.save_dir / f"{split}.parquet").to_pylist()


@pytest.fixture
def run_command(tmp_path, capsys):
    """``run_command("gsm8k", raw_dir, *flags)`` runs ``data_prep.gsm8k.main`` in-process."""

    def run(dataset: str, raw_dir: Path, *flags: str) -> Run:
        save_dir = tmp_path / f"out_{dataset}"
        module = importlib.import_module(f"data_prep.{dataset}")
        status = module.main(["--local_save_dir", str(save_dir), "--local_dataset_path", str(raw_dir), *flags])
        captured = capsys.readouterr()
        return Run(status, captured.out, captured.err, save_dir)

    return run
