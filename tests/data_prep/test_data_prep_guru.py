"""Guru-Math preprocessor end to end on a tiny parquet in the hub's layout (built from the fixture rows)."""

from __future__ import annotations

import json

from data_prep.guru import find_math_file


def _truths(rows):
    return [row["reward_model"]["ground_truth"] for row in rows]


def test_guru_keeps_sources_prompts_and_extra_columns(run_command, guru_raw, fixtures):
    result = run_command("guru", guru_raw, "--test_size", "2")
    assert result.status == 0, result.err
    train, test = result.rows("train"), result.rows("test")
    assert len(train) == 4 and len(test) == 2
    raw = {
        row["reward_model"]["ground_truth"]: row
        for row in json.loads((fixtures / "guru" / "math_rows.json").read_text())
    }
    assert sorted(_truths(train + test)) == sorted(t for t in raw if t and not t.startswith("def"))
    for row in train + test:
        original = raw[row["reward_model"]["ground_truth"]]
        assert row["data_source"] == original["data_source"]  # its own math__ source, not renamed
        assert row["prompt"] == original["prompt"]
        assert row["ability"] == "math"
        info = row["extra_info"]
        assert info["reward_metric"] == "math_verify"  # the raw extra_info is kept
        assert info["original_index"] == original["extra_info"]["index"]
        assert info["qwen2.5_7b_pass_rate"] == original["qwen2.5_7b_pass_rate"]  # pass-rate columns copied in
    assert [row["extra_info"]["index"] for row in train] == [0, 1, 2, 3]
    assert {row["extra_info"]["split"] for row in test} == {"test"}
    assert "rows in 8, rows out 6, skipped 1, filtered 1" in result.out
    assert "skipped      1  reward_model.ground_truth: empty" in result.out
    assert "filtered     1  data_source does not start with 'math'" in result.out


def test_guru_held_out_split_is_seeded_and_deterministic(run_command, guru_raw):
    first = _truths(run_command("guru", guru_raw, "--test_size", "2", "--seed", "7").rows("test"))
    again = _truths(run_command("guru", guru_raw, "--test_size", "2", "--seed", "7").rows("test"))
    assert first == again
    other_seeds = {
        tuple(_truths(run_command("guru", guru_raw, "--test_size", "2", "--seed", str(s)).rows("test")))
        for s in range(6)
    }
    assert len(other_seeds) > 1  # the seed matters


def test_guru_test_size_must_leave_training_rows(run_command, guru_raw):
    result = run_command("guru", guru_raw, "--test_size", "6")
    assert result.status == 2
    assert "--test_size 6 leaves no training rows: only 6 usable math rows" in result.err


def test_guru_finds_the_math_file(guru_raw):
    expected = guru_raw / "train" / "math__combined_54.4k.parquet"
    assert find_math_file(guru_raw) == expected
    assert find_math_file(expected) == expected
