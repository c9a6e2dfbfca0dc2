"""Bad input fails at once with a clear message (missing files, wrong schemas), or is skipped and counted;
``--strict`` stops at the first malformed record naming file, row and field."""

from __future__ import annotations

import json

import pytest


def _write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_missing_directory(run_command, tmp_path):
    result = run_command("gsm8k", tmp_path / "nowhere")
    assert result.status == 2
    assert f"--local_dataset_path {tmp_path / 'nowhere'}: no such directory" in result.err
    assert not result.save_dir.exists()


def test_missing_split_file_is_reported_before_any_conversion(run_command, tmp_path, fixtures):
    raw = tmp_path / "only_train"
    raw.mkdir()
    (raw / "train.jsonl").write_text((fixtures / "gsm8k" / "train.jsonl").read_text())
    result = run_command("gsm8k", raw)
    assert result.status == 2
    assert "no raw file for split 'test'" in result.err and "train.jsonl" in result.err
    assert "rows in" not in result.out  # nothing was converted
    assert not result.save_dir.exists()


def test_split_in_two_formats_is_ambiguous(run_command, copy_fixture):
    raw = copy_fixture("gsm8k")
    (raw / "test.json").write_text("[]")
    result = run_command("gsm8k", raw)
    assert result.status == 2 and "split 'test' is present in several formats" in result.err


@pytest.mark.parametrize(
    "dataset, fixture, missing",
    [("gsm8k", "gsm8k", "answer"), ("toolace", "toolace", "conversations")],
)
def test_wrong_schema_names_file_and_fields(run_command, tmp_path, dataset, fixture, missing):
    raw = tmp_path / "wrong"
    raw.mkdir()
    record = {"question": "q", "prompt": "p", "system": "s"}
    if dataset == "gsm8k":
        _write_jsonl(raw / "train.jsonl", [record])
        _write_jsonl(raw / "test.jsonl", [record])
        wrong_file = raw / "train.jsonl"
    else:
        (raw / "data.json").write_text(json.dumps([record]))
        wrong_file = raw / "data.json"
    result = run_command(dataset, raw)
    assert result.status == 2
    assert f"{wrong_file}: wrong schema for {dataset}: missing field(s) ['{missing}']" in result.err
    assert "found: " in result.err


def test_math_wrong_schema_lists_both_accepted_schemas(run_command, tmp_path):
    raw = tmp_path / "wrong_math"
    raw.mkdir()
    for split in ("train", "test"):
        _write_jsonl(raw / f"{split}.jsonl", [{"problem": "p", "level": "Level 1", "response": "r"}])
    result = run_command("math", raw)
    assert result.status == 2
    assert "wrong schema for math: need 'problem' plus 'answer'" in result.err and "'solution'" in result.err


def test_guru_missing_required_column(run_command, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    raw = tmp_path / "guru_wrong"
    raw.mkdir()
    pq.write_table(pa.Table.from_pylist([{"data_source": "math__x", "prompt": "p"}]), raw / "math__x.parquet")
    result = run_command("guru", raw)
    assert result.status == 2 and "missing field(s) ['reward_model']" in result.err


def test_guru_folder_without_math_file(run_command, tmp_path):
    (tmp_path / "empty_guru").mkdir()
    result = run_command("guru", tmp_path / "empty_guru")
    assert result.status == 2 and "no Guru math file" in result.err


def test_not_a_json_array(run_command, tmp_path):
    raw = tmp_path / "toolace_obj"
    raw.mkdir()
    (raw / "data.json").write_text('{"system": "x"}')
    result = run_command("toolace", raw)
    assert result.status == 2 and "expected a JSON array of records, found a JSON dict" in result.err


def test_not_a_parquet_file(run_command, tmp_path):
    raw = tmp_path / "bad_parquet"
    raw.mkdir()
    (raw / "math__combined.parquet").write_text("not parquet")
    result = run_command("guru", raw)
    assert result.status == 2 and "not a readable parquet file" in result.err


def test_strict_names_file_row_and_field(run_command, fixtures):
    result = run_command("gsm8k", fixtures / "gsm8k", "--strict")
    assert result.status == 2
    source = fixtures / "gsm8k" / "train.jsonl"
    assert f"error: {source}: row 3 (line 4): field 'answer': no '#### N' final-answer line" in result.err
    assert not result.save_dir.exists()


def test_strict_on_a_json_file_and_a_nested_field(run_command, fixtures):
    result = run_command("toolace", fixtures / "toolace", "--strict")
    assert result.status == 2
    assert f"{fixtures / 'toolace' / 'data.json'}: row 4: field 'conversations[1].value': " in result.err
    assert "unparseable tool call (invalid call syntax)" in result.err


def test_strict_passes_clean_input(run_command, fixtures, tmp_path):
    raw = tmp_path / "clean"
    raw.mkdir()
    for split in ("train", "test"):
        (raw / f"{split}.jsonl").write_text((fixtures / "gsm8k" / "test.jsonl").read_text())
    result = run_command("gsm8k", raw, "--strict")
    assert result.status == 0 and len(result.rows("train")) == 2


def test_a_split_left_empty_is_an_error_not_an_empty_file(run_command, tmp_path):
    raw = tmp_path / "all_bad"
    raw.mkdir()
    _write_jsonl(raw / "train.jsonl", [{"question": "q", "answer": "no final line"}])
    _write_jsonl(raw / "test.jsonl", [{"question": "q", "answer": "#### 1"}])
    result = run_command("gsm8k", raw)
    assert result.status == 2
    assert "no rows left for ['train'] after skipping; nothing written" in result.err
    assert "skipped      1  answer: no '#### N' final-answer line" in result.out  # the report came first
    assert not (result.save_dir / "test.parquet").exists()


@pytest.mark.parametrize("flag, value", [("--test_size", "0"), ("--max_train_size", "-3"), ("--test_size", "many")])
def test_bad_option_values_fail_before_reading(fixtures, tmp_path, capsys, flag, value):
    from data_prep import toolace

    with pytest.raises(SystemExit) as exit_info:
        toolace.main(
            ["--local_save_dir", str(tmp_path), "--local_dataset_path", str(fixtures / "toolace"), flag, value]
        )
    assert exit_info.value.code == 2
    assert f"argument {flag}: expected an integer >= 1, got" in capsys.readouterr().err
