"""Records (the --json contract), the table, and the PNG, from synthetic verl metrics."""

import json

import pytest

from tests.lab.synthetic import as_steps, step_records
from verl_ext.algorithms.presets import parse_algorithm
from verl_ext.staleness.setting import Setting
from verl_ext.lab.figure import plot_groups, seed_band
from verl_ext.lab.plan import lab_run
from verl_ext.lab.report import JSON_KEYS, json_records, markdown_table, rich_table, run_record, table_rows
from verl_ext.lab.summary import aggregate, summarize_run


def lab_records():
    records = []
    for spec, rewards_by_seed in (
        ("rec_reinforce", ([0.1 * (i % 5) for i in range(20)], [0.2] * 20)),
        ("rec_oneside_nois@0.6_2", ([min(1.0, 0.1 * i) for i in range(20)], [min(1.0, 0.08 * i) for i in range(20)])),
    ):
        for seed, rewards in enumerate(rewards_by_seed):
            run = lab_run(parse_algorithm(spec), Setting(20, 0), seed=seed, steps=20)
            steps = as_steps(step_records(rewards, kl=[0.01 * i for i in range(20)], lag=[i % 20 for i in range(20)],
                                          ppo_kl=[0.0011 * i * (seed + 1) for i in range(20)]))
            records.append(run_record(run, summarize_run(steps), None))
    failed = lab_run(parse_algorithm("rec_reinforce"), Setting(20, 0), seed=2, steps=20)
    records.append(run_record(failed, summarize_run([]), "RuntimeError: boom"))
    return records


def test_json_records_start_with_the_contract_keys_and_serialise():
    records = json_records(lab_records())
    for record in records:
        assert tuple(record)[: len(JSON_KEYS)] == JSON_KEYS
        assert "summary" not in record
    assert json.loads(json.dumps(records)) == records
    first = records[0]
    assert (first["algorithm"], first["sync_interval"], first["sync_offset"], first["offline"], first["seed"]) == (
        "rec_reinforce", 20, 0, False, 0)
    assert (first["name"], first["setting"]) == ("rec_reinforce-lr0.001-sync_interval_20-T20-seed0", "sync_interval_20")
    assert first["final_reward"] == pytest.approx((0.3 + 0.4) / 2)  # last 10% of 20 steps: steps 19, 20
    assert first["epsilon_low"] is None and first["max_lag"] == 19
    assert first["max_kl_to_behaviour"] == pytest.approx(0.0209)
    enlarged = records[2]
    assert enlarged["algorithm"] == "rec_oneside_nois@0.6_2" and (enlarged["epsilon_low"], enlarged["epsilon_high"]) == (0.6, 2.0)
    assert enlarged["steps_to_target"] == 13  # 5-step mean at step 13: (0.8 + 0.9 + 1 + 1 + 1) / 5 = 0.94
    assert records[3]["steps_to_target"] == 15  # rewards 0.08 (step - 1): (0.8 + 0.88 + 0.96 + 1 + 1) / 5
    assert records[-1]["error"] == "RuntimeError: boom" and records[-1]["final_reward"] is None
    assert records[-1]["steps_to_target"] is None


def test_a_run_that_logged_nothing_is_an_error_even_without_an_exception():
    run = lab_run(parse_algorithm("rec_reinforce"), Setting(), seed=0, steps=3)
    assert run_record(run, summarize_run([]), None)["error"] == "no training step logged"


def test_table_rows_show_mean_std_reached_and_failures():
    groups = aggregate(lab_records())
    rows = table_rows(groups, target=0.9)
    reinforce, enlarged = rows
    assert reinforce[:4] == ["sync_interval_20", "rec_reinforce", "0.001", "3 (1 failed)"]
    assert reinforce[6] == "never"
    assert enlarged[3] == "2" and enlarged[6] == "14 ± 1 (2/2)"
    assert enlarged[4] == "1.00 ± 0.00"  # both seeds end at the maximum
    assert enlarged[8] == "0.031 ± 0.015"  # largest ppo_kl per seed: 0.0209, 0.0418
    text = markdown_table(groups, 0.9)
    assert text.splitlines()[0].startswith("| setting | algorithm |") and text.count("\n") == 4
    assert rich_table(groups, 0.9).row_count == 2


def test_seed_band_is_mean_min_max_at_every_step():
    steps, mean, low, high = seed_band([{1: 0.0, 2: 1.0}, {1: 0.5, 2: 0.5, 3: 0.25}])
    assert steps == [1, 2, 3]
    assert mean == [0.25, 0.75, 0.25] and low == [0.0, 0.5, 0.25] and high == [0.5, 1.0, 0.25]


def test_the_figure_is_a_png_with_one_column_per_setting(tmp_path):
    records = lab_records()
    on_policy = lab_run(parse_algorithm("rec_reinforce"), Setting(), seed=0, steps=20)
    records.append(run_record(on_policy, summarize_run(as_steps(step_records([0.5] * 20))), None))
    path = plot_groups(aggregate(records), tmp_path / "figure" / "curves.png", target=0.9, title="test")
    from PIL import Image

    with Image.open(path) as image:
        assert image.format == "PNG"
        width, height = image.size
    assert width > height  # two settings side by side, two rows


def test_a_run_cut_short_is_an_error_naming_how_many_steps_verl_logged(tmp_path):
    from verl_ext.lab.runner import missing_steps_error

    run = lab_run(parse_algorithm("rec_reinforce"), Setting(), seed=0, steps=5)
    metrics = tmp_path / "run.jsonl"
    assert missing_steps_error(run, as_steps(step_records([0.5] * 3)), metrics) == f"verl logged 3 of 5 training steps in {metrics}"
    assert missing_steps_error(run, as_steps(step_records([0.5] * 5)), metrics) is None
