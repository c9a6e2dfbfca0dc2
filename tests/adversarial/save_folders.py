"""Helpers of the data_prep output-folder tests (test_data_prep_atomic_output.py, test_data_prep_write_faults.py):
a raw GSM8k folder to prepare, a snapshot of an output folder, and a folder holding a complete earlier output."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from data_prep import gsm8k
from data_prep.manifest import incompleteness

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "datasets"
PAIR = ["train.parquet", "test.parquet"]


def snapshot(folder: Path) -> dict[str, str]:
    """Every visible file of the folder with its SHA-256 (hidden partial folders excluded)."""
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.iterdir())
        if path.is_file()
    }


def raw_gsm8k(root: Path, rows: int) -> Path:
    folder = root / "raw"
    folder.mkdir()
    for split in ("train", "test"):
        records = [{"question": f"{split} {i}?", "answer": f"#### {i}"} for i in range(rows)]
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def previous_output(save_dir: Path) -> dict[str, str]:
    """Prepare the GSM8k fixture into ``save_dir`` (a complete output) and return its snapshot."""
    assert gsm8k.main(["--local_save_dir", str(save_dir), "--local_dataset_path", str(FIXTURES / "gsm8k")]) == 0
    assert incompleteness(save_dir, PAIR) is None
    return snapshot(save_dir)
