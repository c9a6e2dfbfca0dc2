"""``verl-ext lab``: the papers' off-policy comparisons on a laptop, through verl's real ``main_ppo``.

    verl-ext lab                                   # the headline finding, a few minutes on 2 cores
    verl-ext lab --grid clipping                   # one grid per finding of the paper (--list-grids)
    verl-ext lab --algorithms rec_reinforce,rec_oneside_nois --settings sync_interval_20 --steps 60 --seeds 2
    verl-ext lab --algorithms rec_oneside_nois,rec_oneside_nois@0.6_2 --settings offline --json

Every run is ``python -m verl.trainer.main_ppo`` with the recipe config on the CPU backend (tiny Qwen2
model, counting task, :mod:`verl_ext.cpu`), the algorithm preset and the staleness setting of the run
scripts (:mod:`verl_ext.experiments`: the same names, the same overrides); the runs share one Ray start-up. At the end: a table per
algorithm and setting, a PNG of the curves, and (``--json``) one JSON record per run as the last line.
See ``docs/lab.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Optional, Sequence

from verl_ext.checks.arguments import non_negative_int, positive_float, positive_int
from verl_ext.algorithms.presets import ALGORITHMS, ALIASES, DEFAULT_EPSILONS, parse_algorithms
from verl_ext.staleness.setting import ALIASES as SETTING_ALIASES
from verl_ext.staleness.setting import FORMS, Setting, parse_settings
from verl_ext.experiments.catalogue import DEFAULT_FINDING, FINDINGS, finding_named
from verl_ext.lab.plan import DEFAULT_LEARNING_RATE, DEFAULT_STEPS, lab_runs, plan_runs
from verl_ext.runs.run import Run
from verl_ext.lab.summary import DEFAULT_TARGET
from verl_ext.lab.warm_start import INITIAL_MODELS

CUSTOM = "custom"
DEFAULT_ALGORITHMS = "rec_reinforce,rec_oneside_nois"


# Bounds that keep planning (and a dry run) fast and the seeds valid for every generator verl seeds with them.
MAX_SEEDS = 100_000
MAX_SEED = 2**31 - 1


def parse_seeds(text: str) -> list[int]:
    """``"3"`` -> [0, 1, 2] (a count); ``"0,4"`` or ``"5,"`` -> those seeds (a comma means a list)."""
    shown = text if len(text) <= 40 else text[:40] + "..."
    try:
        if "," in text:
            seeds = [int(part) for part in text.split(",") if part.strip()]
        else:
            count = int(text)
            if not 1 <= count <= MAX_SEEDS:
                raise argparse.ArgumentTypeError(f"--seeds: a count must be in 1..{MAX_SEEDS}, got {count}")
            seeds = list(range(count))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seeds: a count (3) or a comma-separated list (0,4), got {shown!r}") from None
    if len(seeds) > MAX_SEEDS:
        raise argparse.ArgumentTypeError(f"--seeds: at most {MAX_SEEDS} seeds, got {len(seeds)}")
    if not seeds or any(not 0 <= seed <= MAX_SEED for seed in seeds) or len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"--seeds: distinct seeds in 0..{MAX_SEED} expected, got {shown!r}")
    return seeds


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="verl-ext lab", description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="algorithms: " + ", ".join(ALGORITHMS) + " (aliases: " + ", ".join(f"{a} = {n}" for a, n in ALIASES.items())
        + "); settings: " + FORMS + " (aliases: " + ", ".join(f"{a} = {n}" for a, n in SETTING_ALIASES.items())
        + "); grids: " + ", ".join(FINDINGS),
    )
    what = parser.add_argument_group("what to run (default: --grid headline)")
    what.add_argument("--grid", help="a grid of runs, one per finding of the paper (see --list-grids)")
    what.add_argument("--algorithms", help="preset names, comma-separated, NAME@EPS_LOW_EPS_HIGH for another clipping "
                      f"range (default {DEFAULT_ALGORITHMS})")
    what.add_argument("--settings", help=f"staleness settings by name, comma-separated ({FORMS}; default on_policy)")
    what.add_argument("--sync-interval", type=positive_int, help="m: weights pushed to the rollout every m steps (default 1)")
    what.add_argument("--sync-offset", type=non_negative_int, help="n: each batch consumed n steps after its push (default 0)")
    what.add_argument("--offline", action="store_true", help="never push weights after the start (the paper's stress test)")
    what.add_argument("--epsilon-low", type=float, help=f"epsilon_low of clipped algorithms without @ (default {DEFAULT_EPSILONS[0]})")
    what.add_argument("--epsilon-high", type=float, help=f"epsilon_high of clipped algorithms without @ (default {DEFAULT_EPSILONS[1]})")
    how = parser.add_argument_group("how long")
    how.add_argument("--seeds", type=parse_seeds, help="a count (3: seeds 0,1,2) or a list (0,4); default: the grid's, else 1")
    how.add_argument("--steps", type=positive_int, help=f"training steps per run (default: the grid's, else {DEFAULT_STEPS})")
    how.add_argument("--lr", type=positive_float, default=DEFAULT_LEARNING_RATE, help="actor learning rate (default %(default)g)")
    how.add_argument("--target", type=float, default=DEFAULT_TARGET, help="target reward, fraction of the maximum (default %(default)g)")
    how.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="extra Hydra override for every run (repeatable)")
    out = parser.add_argument_group("output")
    out.add_argument("--out", type=Path, help="output folder, shared by every lab (default outputs/lab): runs in "
                     "verl_ext_cpu/, results as <grid or custom>.md, .json, .png")
    out.add_argument("--assets", type=Path, help="tiny assets folder (built if missing; default: verl_ext.tiny.assets's)")
    how.add_argument("--initial-model", choices=INITIAL_MODELS, default="warm",
                     help="warm: the tiny model after a few supervised steps (default); random: as initialised")
    out.add_argument("--reuse", action="store_true", help="skip runs already complete in --out with the same overrides")
    out.add_argument("--json", action="store_true", help="print one JSON record per run as the last line")
    out.add_argument("--dry-run", action="store_true", help="print the runs and their overrides, run nothing")
    out.add_argument("--list-grids", action="store_true", help="print the grids and the finding each tests")
    return parser


def resolve_runs(args: argparse.Namespace) -> tuple[str, str, list[Run]]:
    """(name, title, runs) from the parsed options; ValueError on a bad combination."""
    knobs = args.sync_interval is not None or args.sync_offset is not None or args.offline
    custom = args.algorithms is not None or args.settings is not None or knobs
    epsilons_given = args.epsilon_low is not None or args.epsilon_high is not None
    extra = tuple(args.override)
    for override in extra:
        if "=" not in override:
            raise ValueError(f"--override {override!r}: write KEY=VALUE")
    if args.grid is not None or not (custom or epsilons_given):
        if custom or epsilons_given:
            raise ValueError("--grid fixes the algorithms, settings and clipping ranges: do not combine it with "
                             "--algorithms, --settings, --sync-interval, --sync-offset, --offline or --epsilon-low/high")
        grid = finding_named(args.grid or DEFAULT_FINDING)
        chosen = replace(grid, seeds=tuple(args.seeds or grid.seeds), steps=args.steps or grid.steps,
                         learning_rates=(args.lr,), overrides=extra)
        return grid.name, f"{grid.name}: {grid.about}", lab_runs(chosen)
    if args.settings is not None and knobs:
        raise ValueError("--settings names the settings: do not combine it with --sync-interval, --sync-offset or --offline")
    if args.offline and (args.sync_interval is not None or args.sync_offset is not None):
        raise ValueError("--offline never pushes weights: do not combine it with --sync-interval or --sync-offset")
    epsilons = (
        DEFAULT_EPSILONS[0] if args.epsilon_low is None else args.epsilon_low,
        DEFAULT_EPSILONS[1] if args.epsilon_high is None else args.epsilon_high,
    )
    try:
        algorithms = parse_algorithms(args.algorithms or DEFAULT_ALGORITHMS, epsilons)
    except ValueError as error:
        raise ValueError(f"--algorithms: {error}") from None
    if args.settings is not None:
        try:
            settings = parse_settings(args.settings)
        except ValueError as error:
            raise ValueError(f"--settings: {error}") from None
    else:
        settings = [Setting(args.sync_interval or 1, args.sync_offset or 0, bool(args.offline))]
    runs = plan_runs(algorithms, settings, args.seeds or [0], args.steps or DEFAULT_STEPS, args.lr, extra)
    title = f"{', '.join(a.label for a in algorithms)} ({', '.join(setting.label for setting in settings)})"
    return CUSTOM, title, runs


def lab_main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from rich.console import Console

    console = Console()
    if not console.is_terminal:  # a file or a pipe: do not wrap the table at 80 columns
        console = Console(width=160)
    if args.list_grids:
        for grid in FINDINGS.values():
            listed = ", ".join(f"{point.algorithm.label}"
                              f"{'' if point.learning_rate_factor == 1 else f' (lr x{point.learning_rate_factor:g})'}"
                              f" [{point.setting.label}]" for point in grid.points)
            print(f"{grid.name} ({grid.steps} steps, {len(grid.seeds)} seed(s)): {grid.about}\n    {listed}")
        return 0
    if not 0 < args.target <= 1:
        parser.error(f"--target must be in (0, 1], got {args.target}")
    try:
        name, title, runs = resolve_runs(args)
    except ValueError as error:
        parser.error(str(error))
    if args.dry_run:
        for run in runs:
            print(f"{run.name} ({run.steps} steps): {' '.join(run.overrides)}")
        return 0

    from verl_ext.lab.figure import plot_groups
    from verl_ext.lab.report import json_records, markdown_table, rich_table
    from verl_ext.lab.runner import Terminated, run_lab
    from verl_ext.lab.summary import aggregate
    from verl_ext.lab.warm_start import initial_policy_assets
    from verl_ext.run_description import RunDescriptionError
    from verl_ext.tiny.assets import AssetsFolderError, default_assets_dir

    from verl_ext.runs.outputs import OutputFolderError, output_folder

    try:  # a file, a folder below one, a link to nothing: refused before anything is built
        out_dir = output_folder(args.out or Path("outputs") / "lab", "--out")
    except OutputFolderError as error:
        print(f"verl-ext lab: error: {error}", file=sys.stderr, flush=True)
        return 2
    try:  # a folder verl-ext did not write (or a link, a file) is refused before anything is built
        assets = initial_policy_assets(args.assets or default_assets_dir(), args.initial_model)
    except AssetsFolderError as error:
        console.print(f"[red]verl-ext lab: error: {error}", highlight=False)
        return 2
    console.print(f"[verl-ext lab] {len(runs)} runs of verl's main_ppo on the CPU backend -> {out_dir} "
                  f"(log: {out_dir / 'lab.log'})", highlight=False)
    try:
        records = run_lab(runs, out_dir, assets, target=args.target, reuse=args.reuse)
    except RunDescriptionError as error:  # --reuse: a run record that is not one (names the file)
        print(f"verl-ext lab: error: {error}", file=sys.stderr, flush=True)  # whole, unwrapped: it names a file
        return 2
    except ValueError as error:
        console.print(f"[red]verl-ext lab: {error}")
        return 2
    except (KeyboardInterrupt, Terminated) as error:
        console.print(f"verl-ext lab: stopped ({type(error).__name__}); the runs finished so far are in {out_dir}",
                      highlight=False)
        return 130
    groups = aggregate(records)
    console.print(rich_table(groups, args.target, title=title))
    table_path, records_path = out_dir / f"{name}.md", out_dir / f"{name}.json"
    table_path.write_text(f"{title}\n\n" + markdown_table(groups, args.target), encoding="utf-8")
    serialisable = json_records(records)
    records_path.write_text(json.dumps(serialisable, indent=1) + "\n", encoding="utf-8")
    figure = plot_groups(groups, out_dir / f"{name}.png", args.target, title=title)
    failed = [record for record in records if record["error"]]
    for record in failed:
        console.print(f"[red]failed: {record['algorithm']} {record['setting']} seed {record['seed']}: {record['error']}",
                      highlight=False)
    console.print(f"curves: {figure}\ntable: {table_path}\nrecords: {records_path}", highlight=False)
    if args.json:
        sys.stdout.flush()
        print(json.dumps(serialisable), flush=True)
    return 1 if failed else 0


