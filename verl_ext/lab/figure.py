"""The lab's PNG: one column per staleness setting, rows "reward" and "KL to the initial policy", one curve
per algorithm (mean over seeds of the 5-step smoothed reward, shaded between the lowest and highest seed),
the target reward as a dashed line. Reads only :class:`verl_ext.lab.summary.GroupSummary` objects.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Optional, Sequence

from verl_ext.lab.summary import SMOOTHING_WINDOW, GroupSummary, smoothed


def seed_band(curves: Sequence[dict[int, float]]) -> tuple[list[int], list[float], list[float], list[float]]:
    """(steps, mean, low, high) over the curves ({step: value}) at every step any of them has."""
    steps = sorted({step for curve in curves for step in curve})
    means, lows, highs = [], [], []
    for step in steps:
        values = [curve[step] for curve in curves if step in curve]
        means.append(statistics.fmean(values))
        lows.append(min(values))
        highs.append(max(values))
    return steps, means, lows, highs


def _reward_curves(group: GroupSummary) -> list[dict[int, float]]:
    return [dict(zip(summary.steps, smoothed(summary.reward, SMOOTHING_WINDOW))) for summary in group.summaries]


def _kl_curves(group: GroupSummary) -> list[dict[int, float]]:
    return [
        {step: value for step, value in zip(summary.steps, summary.kl_to_initial_curve) if value is not None}
        for summary in group.summaries
    ]


def plot_groups(groups: Sequence[GroupSummary], path: Path, target: float, title: Optional[str] = None) -> Path:
    """Write the PNG to ``path`` and return it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = list(dict.fromkeys(group.setting for group in groups))
    algorithms = list(dict.fromkeys((group.algorithm, group.learning_rate) for group in groups))
    lrs = {lr for _, lr in algorithms}
    colours = {key: plt.get_cmap("tab10")(index % 10) for index, key in enumerate(algorithms)}
    figure, axes = plt.subplots(2, len(settings), figsize=(4.2 * len(settings) + 1.0, 6.0), squeeze=False, sharex="col")
    for column, setting in enumerate(settings):
        reward_axis, kl_axis = axes[0][column], axes[1][column]
        for group in (group for group in groups if group.setting == setting):
            key = (group.algorithm, group.learning_rate)
            label = group.algorithm if len(lrs) == 1 else f"{group.algorithm} lr={group.learning_rate:g}"
            for axis, curves in ((reward_axis, _reward_curves(group)), (kl_axis, _kl_curves(group))):
                curves = [curve for curve in curves if curve]
                if not curves:
                    continue
                steps, mean, low, high = seed_band(curves)
                axis.plot(steps, mean, color=colours[key], label=label, linewidth=1.6)
                if len(curves) > 1:
                    axis.fill_between(steps, low, high, color=colours[key], alpha=0.18, linewidth=0)
        reward_axis.axhline(target, color="grey", linestyle="--", linewidth=0.8)
        reward_axis.set_ylim(-0.02, 1.02)
        reward_axis.set_title(setting)
        kl_axis.set_xlabel("training step")
        if column == 0:
            reward_axis.set_ylabel(f"reward / max ({SMOOTHING_WINDOW}-step mean)")
            kl_axis.set_ylabel("KL to initial policy")
        reward_axis.grid(alpha=0.3)
        kl_axis.grid(alpha=0.3)
    seen: dict[str, object] = {}  # legend entries of every panel, first occurrence wins
    for row in axes:
        for axis in row:
            handles, labels = axis.get_legend_handles_labels()
            for handle, label in zip(handles, labels):
                seen.setdefault(label, handle)
    figure.legend(list(seen.values()), list(seen.keys()), loc="lower center", ncol=min(4, max(1, len(seen))), frameon=False)
    if title:
        import textwrap

        figure.suptitle("\n".join(textwrap.wrap(title, int(12 * figure.get_figwidth()))), fontsize=10)
    figure.tight_layout(rect=(0, 0.08 + 0.03 * ((len(seen) - 1) // 4), 1, 1))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
