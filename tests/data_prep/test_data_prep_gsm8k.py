"""GSM8k preprocessor end to end on the hand-made fixture (tests/fixtures/datasets/gsm8k)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from data_prep.gsm8k import INSTRUCTION, final_answer
from data_prep.split_report import MalformedRecord

REPO = Path(__file__).resolve().parents[2]


def test_gsm8k_rows_schema_and_values(run_command, fixtures):
    result = run_command("gsm8k", fixtures / "gsm8k")
    assert result.status == 0, result.err
    train, test = result.rows("train"), result.rows("test")
    assert [row["reward_model"]["ground_truth"] for row in train] == ["12", "109200", "-5"]
    assert [row["reward_model"]["ground_truth"] for row in test] == ["30", "9"]
    first = train[0]
    assert set(first) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}
    assert first["data_source"] == "openai/gsm8k" and first["ability"] == "math"
    assert first["reward_model"]["style"] == "rule"
    assert first["prompt"] == [
        {"role": "user", "content": f"Ana has 3 boxes of 4 pens. How many pens does she have? {INSTRUCTION}"}
    ]
    assert first["extra_info"]["split"] == "train" and first["extra_info"]["index"] == 0
    assert first["extra_info"]["answer"].endswith("#### 12")
    assert [row["extra_info"]["index"] for row in train] == [0, 1, 2]  # raw row numbers of the kept rows
    assert [row["extra_info"]["split"] for row in test] == ["test", "test"]


def test_gsm8k_report_counts_every_skip_with_its_reason(run_command, fixtures):
    out = run_command("gsm8k", fixtures / "gsm8k").out
    assert "gsm8k train" in out and "rows in 7, rows out 3, skipped 4" in out
    assert "rows in 2, rows out 2, skipped 0" in out
    for reason in (
        "answer: no '#### N' final-answer line",
        "question: empty",
        "answer: the final answer after '####' is not a number",
        "<record>: invalid JSON",
    ):
        assert f"skipped      1  {reason}" in out


@pytest.mark.parametrize(
    "solution, expected",
    [
        ("x\n#### 72", "72"),
        ("#### 1,234,567", "1234567"),
        ("#### -3", "-3"),
        ("a #### 1\nb #### 2", "2"),
        ("####  7 ", "7"),
    ],
)
def test_gsm8k_final_answer(solution, expected):
    assert final_answer(solution) == expected


@pytest.mark.parametrize("solution", ["no marker", "#### seven", "#### 1 2", "####"])
def test_gsm8k_final_answer_rejects(solution):
    with pytest.raises(MalformedRecord) as error:
        final_answer(solution)
    assert error.value.field == "answer"


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_gsm8k_reads_json_and_parquet_inputs(run_command, fixtures, tmp_path, fmt):
    raw = tmp_path / f"raw_{fmt}"
    raw.mkdir()
    for split in ("train", "test"):
        lines = (fixtures / "gsm8k" / f"{split}.jsonl").read_text().splitlines()
        records = [json.loads(line) for line in lines if line.startswith('{"')]
        if fmt == "json":
            (raw / f"{split}.json").write_text(json.dumps(records))
        else:
            pq.write_table(pa.Table.from_pylist(records), raw / f"{split}.parquet")
    result = run_command("gsm8k", raw)
    assert result.status == 0, result.err
    assert [row["reward_model"]["ground_truth"] for row in result.rows("train")] == ["12", "109200", "-5"]
    assert "rows in 6, rows out 3, skipped 3" in result.out  # the invalid-JSON line exists only in jsonl


def test_gsm8k_reads_hub_style_parquet_shards(run_command, fixtures, tmp_path):
    raw = tmp_path / "shards"
    raw.mkdir()
    test_records = [json.loads(line) for line in (fixtures / "gsm8k" / "test.jsonl").read_text().splitlines()]
    train_records = [json.loads(line) for line in (fixtures / "gsm8k" / "test.jsonl").read_text().splitlines()]
    pq.write_table(pa.Table.from_pylist(test_records), raw / "test-00000-of-00001.parquet")
    pq.write_table(pa.Table.from_pylist(train_records[:1]), raw / "train-00000-of-00002.parquet")
    pq.write_table(pa.Table.from_pylist(train_records[1:]), raw / "train-00001-of-00002.parquet")
    result = run_command("gsm8k", raw)
    assert result.status == 0, result.err
    assert [row["extra_info"]["index"] for row in result.rows("train")] == [0, 1]  # rows numbered across shards


def test_gsm8k_runs_as_a_module(fixtures, tmp_path):
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "data_prep.gsm8k",
            "--local_save_dir",
            str(tmp_path / "out"),
            "--local_dataset_path",
            str(fixtures / "gsm8k"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    assert "wrote 3 rows" in completed.stdout
    assert pq.read_table(tmp_path / "out" / "test.parquet").num_rows == 2
