"""verl-ext plot on synthetic file-logger logs: what each panel shows, the running average, joined parts,
bad files named with their line, and the PNG written by the command."""

import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.image
import pytest

from verl_ext.plotting import (
    DEFAULT_PANELS,
    Run,
    build_figure,
    load_runs,
    plot_main,
    running_average,
)


def write_run(folder, experiment, records, run=None, group=None):
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{experiment}.jsonl", "w") as handle:
        for step, data in records:
            handle.write(json.dumps({"step": step, "data": data}) + "\n")
    if run is not None:
        (folder / f"{experiment}.run.json").write_text(json.dumps({"run": run, "group": group}))


def training_records(rewards, lag=lambda step: 0, kl=True):
    records = []
    for step, reward in enumerate(rewards, start=1):
        data = {"critic/score/mean": reward, "actor/pg_clipfrac": 0.01 * step, "staleness/lag": lag(step), "actor/ppo_kl": 0.5}
        if kl:
            data["actor/kl_loss"] = 0.001 * step
        records.append((step, data))
    return records


def test_running_average_is_the_trailing_mean_of_the_last_window_values():
    values = [1.0, 5.0, 3.0, 7.0, 0.0, 2.0]
    expected = [sum(values[max(0, i - 2) : i + 1]) / len(values[max(0, i - 2) : i + 1]) for i in range(len(values))]
    assert running_average(values, 3) == pytest.approx(expected)
    assert running_average(values, 3)[:4] == pytest.approx([1.0, 3.0, 3.0, 5.0])
    assert running_average(values, 1) == values
    with pytest.raises(ValueError):
        running_average(values, 0)


def test_figure_has_a_row_per_setting_a_column_per_panel_and_a_curve_per_run(tmp_path):
    folder = tmp_path / "gsm8k-figure2"
    rewards = {"grpo": [0.1, 0.4, 0.1, 0.7, 0.5], "rec_oneside_nois": [0.2, 0.2, 0.8, 0.2, 0.9]}
    for algorithm, values in rewards.items():
        for setting, lag in (("sync_interval_20", lambda step: (step - 1) % 20), ("offline", lambda step: step - 1)):
            records = training_records(values, lag, kl=algorithm == "grpo")
            records[0][1]["val-core/openai/gsm8k/acc/mean@1"] = 0.3
            records[4][1]["val-core/openai/gsm8k/acc/mean@1"] = 0.5
            records[4][1]["val-core/other/acc/mean@1"] = 0.7  # a second data source: averaged
            write_run(folder, f"{algorithm}-{setting}", records, run=algorithm, group=setting)
    runs = load_runs(sorted(folder.glob("*.jsonl")))
    figure = build_figure(runs, DEFAULT_PANELS, window=3, title="gsm8k-figure2")
    axes = figure.axes
    assert len(axes) == 2 * 5
    titles = [axis.get_title() for axis in axes]
    assert titles[:5] == [
        "training reward (offline)", "evaluation accuracy (offline)", "KL to the initial policy (offline)",
        "clip fraction (offline)", "lag (steps) (offline)",
    ]
    assert titles[5].endswith("(sync_interval_20)")
    reward_axis = axes[5]
    curves = {line.get_label(): line for line in reward_axis.get_lines()}
    assert set(curves) == {"grpo", "rec_oneside_nois"}
    assert list(curves["grpo"].get_xdata()) == [1, 2, 3, 4, 5]
    assert list(curves["grpo"].get_ydata()) == pytest.approx(running_average(rewards["grpo"], 3))
    eval_curve = axes[6].get_lines()[0]
    assert list(eval_curve.get_xdata()) == [1, 5]
    assert list(eval_curve.get_ydata()) == pytest.approx([0.3, 0.6])  # step 5: mean of 0.5 and 0.7
    kl_axis = axes[7]
    assert [line.get_label() for line in kl_axis.get_lines()] == ["grpo"]  # actor/ppo_kl is not substituted
    lag_curve = next(line for line in axes[4].get_lines() if line.get_label() == "grpo")
    assert list(lag_curve.get_ydata()) == [0, 1, 2, 3, 4]


def test_a_panel_nobody_logged_says_so(tmp_path):
    write_run(tmp_path, "r", training_records([0.1, 0.2], kl=False))
    figure = build_figure(load_runs([tmp_path / "r.jsonl"]), ("kl", "eval"))
    for axis in figure.axes:
        assert not axis.get_lines()
        assert "not logged" in axis.texts[0].get_text()
    assert "actor/kl_loss" in figure.axes[0].texts[0].get_text()
    with pytest.raises(ValueError, match="unknown panel"):
        build_figure([Run("r")], ("reward", "kl_to_ref"))


def test_parts_of_a_resumed_run_are_joined_the_later_part_winning(tmp_path):
    write_run(tmp_path, "grpo-offline.part1", [(1, {"critic/score/mean": 0.1}), (2, {"critic/score/mean": 0.2})])
    write_run(tmp_path, "grpo-offline", [(2, {"critic/score/mean": 0.25}), (3, {"critic/score/mean": 0.3})],
              run="grpo", group="offline")
    (run,) = load_runs(sorted(tmp_path.glob("*.jsonl")))
    assert (run.name, run.group) == ("grpo", "offline")
    assert run.series("critic/score/mean") == ([1, 2, 3], [0.1, 0.25, 0.3])


def test_plot_command_writes_one_png_per_folder(tmp_path, capsys):
    for project in ("figure4", "figure5"):
        write_run(tmp_path / "metrics" / project, "red_weight-on_policy", training_records([0.1, 0.3, 0.2]),
                  run="red_weight", group="on_policy")
    out = tmp_path / "plots"
    assert plot_main([str(tmp_path / "metrics" / "figure4"), str(tmp_path / "metrics" / "figure5"), "--out", str(out)]) == 0
    for project in ("figure4", "figure5"):
        image = matplotlib.image.imread(out / f"{project}.png")
        assert image.shape[0] > 100 and image.shape[1] > 5 * 100  # five panels side by side
    printed = capsys.readouterr().out
    assert "figure4.png: 1 run(s)" in printed and "not logged: eval" in printed
    assert plot_main([str(tmp_path / "missing"), "--out", str(out)]) == 2
    assert "no such file or folder" in capsys.readouterr().err


def quickstart_records(steps=4):
    """What the quickstart logs (verl's sync mode, bypass_mode=true): no eval, no KL to the reference, no staleness/*."""
    return [(step, {"critic/score/mean": 0.1 * step, "actor/pg_clipfrac": 0.0, "actor/ppo_kl": 1e-8 * step,
                    "actor/grad_norm": 0.5 / step, "training/off_policy/trajectory_staleness/mean": 0.0,
                    "response_length/mean": 8.0, "timing_s/step": 1.0}) for step in range(1, steps + 1)]


def test_by_default_the_figure_shows_the_panels_the_runs_logged(tmp_path, capsys):
    """The quickstart's run: reward, clip fraction, lag (verl's trajectory staleness), the log-prob gap (actor/ppo_kl)
    and the gradient norm; the paper's panels it did not log (eval, KL) are named, not drawn empty."""
    from verl_ext.plotting import logged_panels, plot_runs

    write_run(tmp_path / "quickstart", "rec_oneside_nois", quickstart_records())
    (run,) = load_runs([tmp_path / "quickstart" / "rec_oneside_nois.jsonl"])
    assert logged_panels([run]) == (["reward", "clipfrac", "lag", "mismatch", "grad_norm"], ["eval", "kl"])
    plotted = plot_runs([tmp_path / "quickstart" / "rec_oneside_nois.jsonl"], tmp_path / "q.png", title="q")
    figure = build_figure(plotted.runs, plotted.panels)
    assert [axis.get_title() for axis in figure.axes] == [
        "training reward", "clip fraction", "lag (steps)", "log-prob gap, behaviour - current", "gradient norm"]
    assert all(axis.get_lines() and not axis.texts for axis in figure.axes)  # every panel has its curve
    assert list(figure.axes[3].get_lines()[0].get_ydata()) == pytest.approx([1e-8, 2e-8, 3e-8, 4e-8])
    assert list(figure.axes[4].get_lines()[0].get_ydata()) == pytest.approx([0.5, 0.25, 0.5 / 3, 0.125])
    assert matplotlib.image.imread(tmp_path / "q.png").shape[1] > 5 * 100

    assert plot_main([str(tmp_path / "quickstart"), "--out", str(tmp_path / "plots")]) == 0
    printed = capsys.readouterr().out
    assert "panels reward, clipfrac, lag, mismatch, grad_norm; not logged: eval, kl" in printed
    assert "rec_oneside_nois: 4 steps\n" in printed  # nothing drawn that this run did not log


def test_the_papers_panels_come_first_and_named_panels_are_drawn_as_asked(tmp_path, capsys):
    from verl_ext.plotting import logged_panels

    records = training_records([0.1, 0.2, 0.3])
    for step, data in records:
        data["val-core/openai/gsm8k/acc/mean@1"] = 0.4
        data["actor/grad_norm"] = 1.0
        data["staleness/behaviour_minus_current_log_prob"] = 0.01
    write_run(tmp_path / "paper", "grpo", records)
    runs = load_runs([tmp_path / "paper" / "grpo.jsonl"])
    assert logged_panels(runs) == (list(DEFAULT_PANELS), [])  # five logged: no room for more
    (run,) = runs  # delayed_sync's own mismatch metric wins over actor/ppo_kl
    from verl_ext.plotting import PANELS, panel_series

    assert panel_series(run, PANELS["mismatch"], 3)[2] == "staleness/behaviour_minus_current_log_prob"
    write_run(tmp_path / "q", "r", quickstart_records())
    assert plot_main([str(tmp_path / "q"), "--out", str(tmp_path / "plots"), "--panels", "reward,kl"]) == 0
    assert "panels reward, kl\n  r: 4 steps; not logged: kl" in capsys.readouterr().out


def test_runs_that_logged_no_panel_are_an_error(tmp_path, capsys):
    write_run(tmp_path / "timings", "r", [(1, {"timing_s/step": 1.0})])
    assert plot_main([str(tmp_path / "timings"), "--out", str(tmp_path / "plots")]) == 2
    assert "no run logged the metrics of any panel" in capsys.readouterr().err
    assert not (tmp_path / "plots" / "timings.png").exists()
