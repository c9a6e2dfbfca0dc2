"""Real GSM8k and MATH files from the project's shared folder (skipped, saying why, where it is absent);
and the written parquet read back by verl's own RLHFDataset."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf


def test_real_gsm8k_counts(run_command, shared_datasets):
    result = run_command("gsm8k", shared_datasets / "gsm8k")
    assert result.status == 0, result.err
    assert "rows in 7473, rows out 7473, skipped 0" in result.out
    assert "rows in 1319, rows out 1319, skipped 0" in result.out
    train = result.rows("train")
    assert len(train) == 7473 and len(result.rows("test")) == 1319
    truths = [row["reward_model"]["ground_truth"] for row in train]
    assert all("," not in t for t in truths) and sum(t.startswith("-") for t in truths) >= 1
    assert truths[0] == "72"
    # The reward's one-number rule (issue 21) still credits every real worked solution's own #### line.
    from verl_ext.rewards import compute_score

    for row in train + result.rows("test"):
        solution, truth = row["extra_info"]["answer"], row["reward_model"]["ground_truth"]
        assert compute_score(row["data_source"], solution, truth)["score"] == 1.0, solution[-80:]


def test_real_math_counts(run_command, shared_datasets, tmp_path):
    raw = tmp_path / "math_raw"
    raw.mkdir()
    (raw / "train.jsonl").symlink_to(shared_datasets / "math" / "train.jsonl")  # PRM800K schema
    (raw / "test.jsonl").symlink_to(shared_datasets / "math" / "lighteval_test_sample200.jsonl")  # lighteval schema
    (raw / "math500.jsonl").symlink_to(shared_datasets / "math" / "math500.jsonl")
    result = run_command("math", raw)
    assert result.status == 0, result.err
    # Two PRM800K train rows (multiple-choice items) have an empty answer: skipped and counted, not lost.
    assert "answer schema): rows in 7500, rows out 7498, skipped 2" in result.out
    assert "skipped      2  answer: empty" in result.out
    assert "solution schema): rows in 200, rows out 200, skipped 0" in result.out
    assert "rows in 500, rows out 500, skipped 0" in result.out
    test = result.rows("test")
    assert len(test) == 200 and test[0]["reward_model"]["ground_truth"] == "2"
    assert len(result.rows("math500")) == 500


@pytest.mark.parametrize("dataset", ["gsm8k", "toolace"])
def test_verl_rlhf_dataset_reads_the_output(run_command, fixtures, tmp_path, dataset):
    """verl's RLHFDataset loads what we write and hands the reward manager the fields it reads."""
    from verl.utils.dataset.rl_dataset import RLHFDataset

    flags = ("--test_size", "1") if dataset == "toolace" else ()
    result = run_command(dataset, fixtures / dataset, *flags)
    assert result.status == 0, result.err
    config = OmegaConf.create({"filter_overlong_prompts": False, "cache_dir": str(tmp_path / "cache")})
    dataset_object = RLHFDataset(str(result.save_dir / "train.parquet"), tokenizer=None, config=config)
    rows = result.rows("train")
    assert len(dataset_object) == len(rows)
    item = dataset_object[1]
    assert item["raw_prompt"] == rows[1]["prompt"]
    assert item["index"] == rows[1]["extra_info"]["index"]
    assert item["reward_model"]["ground_truth"] == rows[1]["reward_model"]["ground_truth"]
    assert item["data_source"] == rows[1]["data_source"]
