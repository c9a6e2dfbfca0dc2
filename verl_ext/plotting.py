"""``verl-ext plot``: the REC paper's panels from the metrics of finished runs.

Where the metrics come from: verl's ``file`` logger backend (``trainer.logger`` contains ``file``; the run
scripts always add it). It appends one JSON object per training step to ``$VERL_FILE_LOGGER_PATH``
(default ``$VERL_FILE_LOGGER_ROOT/<project>/<experiment>.jsonl``)::

    {"step": 12, "data": {"critic/score/mean": 0.41, "actor/pg_clipfrac": 0.02, ...}}

The run scripts write each run's log to ``outputs/metrics/<project>/<experiment>.jsonl`` with a description
``<experiment>.run.json`` beside it (:mod:`verl_ext.run_description`; ``run``: the curve's label, ``group``: the
staleness setting). Every file is checked as it is read (a regular file of bounded size, the shape its reader
expects), an error names the file (and line, field), and each PNG is written whole or not at all. verl's
file logger truncates its file when a run starts again (a resume); the scripts first move the earlier log to
``<experiment>.partN.jsonl``, and this module joins the parts of a run (a later part wins on a repeated step).

One PNG per figure (an input folder, or the files given together), one row per group (setting), one column
per panel, one curve per run:

==================  ========================================================================================
panel               metric (first one found)
==================  ========================================================================================
reward              ``critic/score/mean`` (mean sequence reward of the training batch), then a trailing
                    running average over ``--window`` steps (3, as in the paper): the mean of the last
                    min(window, i + 1) values at step i
eval                evaluation accuracy: ``val-core/<data source>/acc/mean@N`` (or ``.../reward/mean@N``);
                    with several data sources, their mean at each step
kl                  KL to the initial policy: ``actor/kl_loss``, verl's KL term against the reference model
                    (= the initial weights), logged by the run scripts with coefficient 0 (measured, not
                    optimised; KL_TO_INITIAL=1). ``actor/ppo_kl`` is the KL to pi_old, not to the initial
                    policy, and is not substituted: without ``actor/kl_loss`` the panel says "not logged"
clipfrac            ``actor/pg_clipfrac``: fraction of response tokens whose gradient the clipping mask removed
lag                 ``staleness/lag``: steps between the policy that generated the batch and the current one
                    (``delayed_sync``); else verl's ``training/off_policy/trajectory_staleness/mean`` (its own modes)
mismatch            log pi_behaviour - log pi_current, mean over response tokens: ``staleness/behaviour_minus_
                    current_log_prob`` (``delayed_sync.measure_mismatch``), else ``actor/ppo_kl`` (with
                    ``bypass_mode=true`` pi_old is the behaviour policy, so it measures the same gap)
grad_norm           ``actor/grad_norm``: the actor's gradient norm before clipping
entropy             ``actor/entropy`` or ``actor/entropy_loss`` (needs actor.calculate_entropy=true)
response_length     ``response_length/mean``
==================  ========================================================================================

Which panels: those ``--panels`` names, each drawn ("not logged" where no run logged it); by default the panels
the runs logged (:func:`logged_panels`): the paper's (reward, eval, kl, clipfrac, lag) that at least one run
logged, then mismatch, grad_norm, entropy and response length, up to :data:`DEFAULT_PANEL_COUNT` panels. The
quickstart draws its run the same way (:func:`plot_runs`).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from verl_ext import metric_names
from verl_ext.files import write_whole
from verl_ext.metrics_file import MetricsFileError, read_metrics_file
from verl_ext.run_description import SUFFIX as DESCRIPTION_SUFFIX
from verl_ext.run_description import read_run_description

REWARD_WINDOW = 3
# the largest value drawn: matplotlib's axis arithmetic (a range, its ticks) and the running average overflow near the
# float limit (1.8e308), with an error that names neither file nor metric
PLOT_LIMIT = 1e300
PART_SUFFIX = re.compile(r"^(?P<run>.+)\.part(?P<part>\d+)$")


@dataclass(frozen=True)
class Panel:
    name: str
    title: str
    metrics: tuple[str, ...] = ()  # the first one a run logged is plotted
    smooth: bool = False  # running average over the window


PANELS = {
    panel.name: panel
    for panel in (
        Panel("reward", "training reward", (metric_names.SCORE_MEAN, metric_names.REWARDS_MEAN), smooth=True),
        Panel("eval", "evaluation accuracy"),
        Panel("kl", "KL to the initial policy", (metric_names.KL_LOSS,)),
        Panel("clipfrac", "clip fraction", (metric_names.PG_CLIPFRAC,)),
        Panel("lag", "lag (steps)", (metric_names.LAG, metric_names.TRAJECTORY_STALENESS_MEAN)),
        Panel("mismatch", "log-prob gap, behaviour - current",
              (metric_names.BEHAVIOUR_MINUS_CURRENT_LOG_PROB, metric_names.PPO_KL)),
        Panel("grad_norm", "gradient norm", (metric_names.GRAD_NORM,)),
        Panel("entropy", "entropy", (metric_names.ENTROPY, metric_names.ENTROPY_LOSS)),
        Panel("response_length", "response length", (metric_names.RESPONSE_LENGTH_MEAN,)),
    )
}
DEFAULT_PANELS = ("reward", "eval", "kl", "clipfrac", "lag")  # the paper's
MORE_PANELS = ("mismatch", "grad_norm", "entropy", "response_length")  # after the paper's, when they leave room
DEFAULT_PANEL_COUNT = 5


@dataclass
class Run:
    """One run: its label, its group (row of the figure) and every metric as {step: value}."""

    name: str
    group: str = ""
    files: list[Path] = field(default_factory=list)
    metrics: dict[str, dict[int, float]] = field(default_factory=dict)
    skipped_lines: int = 0  # last lines cut short (a run killed mid-write), one at most per file
    # values that are not numbers (null: verl's NaN, a string, ...): {metric: [(step, value), ...]}, left out of the curves
    not_numbers: dict[str, list] = field(default_factory=dict)

    def series(self, metric: str) -> tuple[list[int], list[float]]:
        points = sorted(self.metrics.get(metric, {}).items())
        return [step for step, _ in points], [value for _, value in points]


def running_average(values: Sequence[float], window: int = REWARD_WINDOW) -> list[float]:
    """Trailing running average: out[i] = mean(values[max(0, i - window + 1) : i + 1])."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    out = []
    total = 0.0
    for index, value in enumerate(values):
        total += value
        if index >= window:
            total -= values[index - window]
        out.append(total / min(window, index + 1))
    return out


def _run_key(path: Path) -> tuple[str, int]:
    """(run name, part number): ``x.part2.jsonl`` -> ("x", 2); ``x.jsonl`` -> ("x", infinity-like)."""
    match = PART_SUFFIX.match(path.stem)
    if match:
        return match["run"], int(match["part"])
    return path.stem, sys.maxsize


def load_runs(files: Sequence[Path]) -> list[Run]:
    """Group files into runs (parts joined in order), read them, and attach each run's description."""
    by_run: dict[tuple[Path, str], list[tuple[int, Path]]] = {}
    for path in files:
        name, part = _run_key(path)
        by_run.setdefault((path.parent, name), []).append((part, path))
    runs = []
    for (folder, name), parts in by_run.items():
        run = Run(name=name)
        for _, path in sorted(parts):
            part = read_metrics_file(path)
            for metric, points in part.series().items():
                run.metrics.setdefault(metric, {}).update(points)  # a later part wins on a repeated step
            for metric, values in part.not_numbers().items():
                run.not_numbers.setdefault(metric, []).extend(values)
            run.skipped_lines += part.skipped_lines
            run.files.append(path)
        description = folder / f"{name}{DESCRIPTION_SUFFIX}"
        if os.path.lexists(description):  # a FIFO, a link to a device or a broken link is an error, not absent
            info = read_run_description(description)
            run.name, run.group = info.run, info.group
        runs.append(run)
    return runs


def eval_series(run: Run) -> tuple[list[int], list[float], list[str]]:
    """Evaluation accuracy per step: the mean over data sources of ``val-core/<source>/(acc|reward)/mean@N``."""
    sources = {}
    for metric in run.metrics:
        match = metric_names.VALIDATION_MEAN.match(metric)
        if match:
            # one metric per source: prefer acc over reward, then the largest N
            current = sources.get(match["source"])
            if current is None or _eval_preference(metric) > _eval_preference(current):
                sources[match["source"]] = metric
    per_step: dict[int, list[float]] = {}
    for metric in sources.values():
        for step, value in run.metrics[metric].items():
            per_step.setdefault(step, []).append(value)
    steps = sorted(per_step)
    return steps, [sum(per_step[s]) / len(per_step[s]) for s in steps], sorted(sources.values())


def _eval_preference(metric: str) -> tuple[int, int]:
    return ("/acc/" in metric, int(metric.rsplit("@", 1)[1]))


def panel_series(run: Run, panel: Panel, window: int) -> tuple[list[int], list[float], Optional[str]]:
    """(steps, values, metric used) of one panel for one run; empty lists when the run did not log it."""
    if panel.name == "eval":
        steps, values, used = eval_series(run)
        return steps, values, ", ".join(used) or None
    for metric in panel.metrics:
        if run.metrics.get(metric):
            steps, values = run.series(metric)
            if panel.smooth:
                values = running_average(values, window)
            return steps, values, metric
    return [], [], None


def panel_metrics(run: Run, panel: Panel) -> list[str]:
    """The metrics of ``run`` that ``panel`` draws (several for the eval panel, one data source each)."""
    if panel.name == "eval":
        return eval_series(run)[2]
    return next(([metric] for metric in panel.metrics if run.metrics.get(metric)), [])


def check_plottable(runs: Sequence[Run], panels: Sequence[str]) -> None:
    """ValueError naming the file, the metric and the step of a value the panels would draw that is beyond
    :data:`PLOT_LIMIT` in size (or infinite)."""
    for run in runs:
        for name in panels:
            for metric in panel_metrics(run, PANELS[name]) if name in PANELS else []:
                for step, value in sorted(run.metrics[metric].items()):
                    if not abs(value) <= PLOT_LIMIT and value == value:  # nan is a gap in the curve, drawn as such
                        files = ", ".join(str(path) for path in run.files)
                        raise ValueError(f"{files}: metric {metric!r} at step {step} is {value!r}, beyond the "
                                         f"{PLOT_LIMIT:g} a plot can draw (its axis arithmetic overflows near the float "
                                         "limit): not a value a run logs; fix or remove that line")


def not_numbers_note(run: Run, examples: int = 3) -> str:
    """``left out N value(s) that are not numbers (metric at step s: null, ...)``, or "" when there were none."""
    items = [(step, metric, value) for metric, values in run.not_numbers.items() for step, value in values]
    if not items:
        return ""
    items.sort(key=lambda item: (item[0], item[1]))
    shown = ", ".join(f"{metric} at step {step}: {'null' if value is None else repr(value)[:40]}"
                      for step, metric, value in items[:examples])
    more = f", and {len(items) - examples} more" if len(items) > examples else ""
    return f"left out {len(items)} value(s) that are not numbers ({shown}{more}; null is verl's NaN)"


def logged_panels(runs: Sequence[Run], window: int = REWARD_WINDOW) -> tuple[list[str], list[str]]:
    """(the panels to draw by default, the paper's panels no run logged): each of :data:`DEFAULT_PANELS` that a run
    logged, then of :data:`MORE_PANELS`, up to :data:`DEFAULT_PANEL_COUNT` panels. ValueError when no run logged any."""

    def logged(name: str) -> bool:
        return any(panel_series(run, PANELS[name], window)[0] for run in runs)

    chosen = [name for name in DEFAULT_PANELS if logged(name)]
    chosen += [name for name in MORE_PANELS if logged(name)][: max(0, DEFAULT_PANEL_COUNT - len(chosen))]
    if not chosen:
        wanted = ", ".join(metric for name in (*DEFAULT_PANELS, *MORE_PANELS) for metric in PANELS[name].metrics)
        raise ValueError(f"no run logged the metrics of any panel ({wanted}, {metric_names.VALIDATION_MEAN_TEXT})")
    return chosen, [name for name in DEFAULT_PANELS if name not in chosen]


def build_figure(runs: Sequence[Run], panels: Sequence[str] = DEFAULT_PANELS, window: int = REWARD_WINDOW, title: str = ""):
    """A matplotlib Figure: one row per group, one column per panel, one curve (Line2D) per run with data."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    unknown = [name for name in panels if name not in PANELS]
    if unknown:
        raise ValueError(f"unknown panel(s) {', '.join(unknown)}: allowed {', '.join(PANELS)}")
    if not runs:
        raise ValueError("no runs to plot")
    groups = sorted({run.group for run in runs})
    labels = sorted({run.name for run in runs})
    colours = {label: plt.get_cmap("tab10")(index % 10) for index, label in enumerate(labels)}
    figure, axes = plt.subplots(
        len(groups), len(panels), figsize=(4.2 * len(panels), 3.2 * len(groups)), squeeze=False
    )
    for row, group in enumerate(groups):
        for column, panel_name in enumerate(panels):
            panel = PANELS[panel_name]
            axis = axes[row][column]
            axis.set_title(f"{panel.title}" + (f" ({group})" if group else ""), fontsize=10)
            axis.set_xlabel("step")
            plotted = 0
            for run in (r for r in runs if r.group == group):
                steps, values, _ = panel_series(run, panel, window)
                if steps:
                    axis.plot(steps, values, label=run.name, color=colours[run.name], marker="." if len(steps) < 20 else None)
                    plotted += 1
            if not plotted:
                wanted = metric_names.VALIDATION_MEAN_TEXT if panel.name == "eval" else " or ".join(panel.metrics)
                axis.text(0.5, 0.5, f"not logged\n({wanted})", ha="center", va="center", fontsize=8, transform=axis.transAxes)
            elif column == 0:
                axis.legend(fontsize=7)
            axis.grid(alpha=0.3)
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    return figure


@dataclass
class Plotted:
    """What :func:`plot_runs` drew: the PNG, the runs, the panels, and the paper's panels no run logged (left out)."""

    path: Path
    runs: list[Run]
    panels: list[str]
    not_logged: list[str]


def plot_runs(files: Sequence[Path], target: Path, panels: Optional[Sequence[str]] = None,
              window: int = REWARD_WINDOW, title: str = "") -> Plotted:
    """Read the metrics ``files`` (:func:`load_runs`), draw ``panels`` (default: :func:`logged_panels`) and write the
    PNG ``target`` whole or not at all (a failed write keeps the previous PNG)."""
    import matplotlib.pyplot as plt

    runs = load_runs(files)
    if panels is None:
        panels, not_logged = logged_panels(runs, window)
    else:
        panels, not_logged = list(panels), []
    check_plottable(runs, panels)
    figure = build_figure(runs, panels, window, title=title)
    try:
        write_whole(target, lambda file: figure.savefig(file, format="png", dpi=110))
    finally:
        plt.close(figure)
    return Plotted(Path(target), runs, list(panels), not_logged)


def collect_inputs(paths: Sequence[Path], name: Optional[str]) -> list[tuple[str, list[Path]]]:
    """(figure name, JSONL files): each folder is one figure; files given directly make one figure together."""
    figures = []
    loose: list[Path] = []
    for path in paths:
        if path.is_dir():
            files = sorted(path.glob("*.jsonl"))
            if not files:
                raise FileNotFoundError(f"{path}: no *.jsonl metrics files (verl's file logger writes <experiment>.jsonl)")
            figures.append((name or path.name, files))
        elif os.path.lexists(path):  # a file, or something the reader refuses by name (a FIFO, a device)
            loose.append(path)
        else:
            raise FileNotFoundError(f"{path}: no such file or folder")
    if loose:
        figures.append((name or loose[0].parent.name or "runs", loose))
    return figures


def plot_main(argv: Optional[Sequence[str]] = None) -> int:
    """``verl-ext plot PATH... [--out DIR] [--panels a,b] [--window 3] [--name NAME]``; returns an exit code."""
    parser = argparse.ArgumentParser(
        prog="verl-ext plot",
        description="Plot the paper's panels from verl file-logger metrics (one PNG per folder of runs).",
    )
    parser.add_argument("paths", nargs="+", type=Path, help="folders of runs (outputs/metrics/<project>) or *.jsonl files")
    parser.add_argument("--out", type=Path, default=Path("plots"), help="folder for the PNGs (default: %(default)s)")
    parser.add_argument("--panels", default=None, help=f"comma-separated, from {', '.join(PANELS)} (default: those the "
                        f"runs logged, the paper's {', '.join(DEFAULT_PANELS)} first, up to {DEFAULT_PANEL_COUNT})")
    parser.add_argument("--window", type=int, default=REWARD_WINDOW, help="running-average window of the training reward (default: %(default)s)")
    parser.add_argument("--name", default=None, help="figure name (default: the folder's name)")
    args = parser.parse_args(argv)
    panels = None if args.panels is None else [name.strip() for name in args.panels.split(",") if name.strip()]
    if args.window < 1:
        parser.error(f"--window must be >= 1, got {args.window}")
    if panels is not None and not panels:
        parser.error(f"--panels: name at least one of {', '.join(PANELS)}")
    if args.name is not None and (args.name in ("", ".", "..") or "/" in args.name or "\0" in args.name):
        parser.error(f"--name {args.name!r}: the PNG's file name, without '/' (the folder is --out)")
    try:
        figures = collect_inputs(args.paths, args.name)
        args.out.mkdir(parents=True, exist_ok=True)
        for figure_name, files in figures:
            plotted = plot_runs(files, args.out / f"{figure_name}.png", panels, args.window, title=figure_name)
            left_out = f"; not logged: {', '.join(plotted.not_logged)}" if plotted.not_logged else ""
            print(f"{plotted.path}: {len(plotted.runs)} run(s), panels {', '.join(plotted.panels)}{left_out}")
            for run in plotted.runs:
                missing = [p for p in plotted.panels if not panel_series(run, PANELS[p], args.window)[0]]
                steps = max((max(v) for v in run.metrics.values() if v), default=0)
                note = f"  {run.name}" + (f" [{run.group}]" if run.group else "") + f": {steps} steps"
                if missing:
                    note += f"; not logged: {', '.join(missing)}"
                if run.skipped_lines:
                    note += f"; skipped {run.skipped_lines} unreadable last line(s)"
                if run.not_numbers:
                    note += f"; {not_numbers_note(run)}"
                print(note)
    except (MetricsFileError, OSError, ValueError) as error:  # OSError: --out is a file, no permission, ...
        print(f"verl-ext plot: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(plot_main())
