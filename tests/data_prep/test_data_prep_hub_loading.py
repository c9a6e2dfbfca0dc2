"""Without --local_dataset_path each command loads the hub dataset through datasets.load_dataset.

The hub cannot be reached from the tests, so ``datasets.load_dataset`` is replaced by a stand-in that
records what it was asked for and answers with a real ``datasets.Dataset`` built from the fixtures; the
commands' own code (which names, configs, splits and files they request, and the conversion of hub
records) runs unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "datasets"

GURU_FILE = "train/math__combined_54.4k.parquet"


def _jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith('{"')]


HUB_FIXTURES = {
    ("openai/gsm8k", "main", "train", None): _jsonl(FIXTURES / "gsm8k" / "train.jsonl"),
    ("openai/gsm8k", "main", "test", None): _jsonl(FIXTURES / "gsm8k" / "test.jsonl"),
    ("DigitalLearningGmbH/MATH-lighteval", None, "train", None): _jsonl(FIXTURES / "math_lighteval" / "train.jsonl"),
    ("DigitalLearningGmbH/MATH-lighteval", None, "test", None): _jsonl(FIXTURES / "math_lighteval" / "test.jsonl"),
    ("HuggingFaceH4/MATH-500", None, "test", None): _jsonl(FIXTURES / "math_prm800k" / "math500.jsonl"),
    ("LLM360/guru-RL-92k", None, "train", GURU_FILE): json.loads((FIXTURES / "guru" / "math_rows.json").read_text()),
    ("Team-ACE/ToolACE", None, "train", None): json.loads((FIXTURES / "toolace" / "data.json").read_text()),
}


@pytest.fixture
def hub(monkeypatch):
    requests = []

    def load_dataset(path, name=None, split=None, data_files=None, **kwargs):
        key = (path, name, split, data_files)
        requests.append(key)
        if key not in HUB_FIXTURES:
            raise ConnectionError(f"no such hub dataset in this test: {key}")
        return datasets.Dataset.from_list(HUB_FIXTURES[key])

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return requests


@pytest.mark.parametrize(
    "dataset, flags, expected_rows",
    [
        ("gsm8k", [], {"train": 3, "test": 2}),
        ("math", [], {"train": 4, "test": 2, "math500": 2}),
        ("guru", ["--test_size", "2"], {"train": 4, "test": 2}),
        ("toolace", ["--test_size", "1"], {"train": 3, "test": 1}),
    ],
)
def test_hub_loading(hub, tmp_path, capsys, dataset, flags, expected_rows):
    import importlib

    module = importlib.import_module(f"data_prep.{dataset}")
    status = module.main(["--local_save_dir", str(tmp_path), *flags])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert hub and all(key in HUB_FIXTURES for key in hub)
    import pyarrow.parquet as pq

    for split, count in expected_rows.items():
        assert pq.read_table(tmp_path / f"{split}.parquet").num_rows == count
    assert "(hub:" in captured.out


def test_hub_failure_is_a_clear_error(monkeypatch, tmp_path, capsys):
    def unreachable(*args, **kwargs):
        raise ConnectionError("network is unreachable")

    monkeypatch.setattr(datasets, "load_dataset", unreachable)
    from data_prep import gsm8k

    assert gsm8k.main(["--local_save_dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "could not load openai/gsm8k (main config, split train) from the hub" in err
    assert "--local_dataset_path" in err
