"""``verl-ext schedule``: preview which policy version generates each step's batch (the paper's Figure 6), and, with
``--mini-batches``/``--epochs``, how many optimizer updates separate it from the policy that trains on it
(:mod:`verl_ext.staleness.update_lag`)."""

import argparse
import sys

from rich.console import Console
from rich.table import Table

from verl_ext.checks.arguments import int_in, non_negative_int, positive_int
from verl_ext.staleness.schedule import MAX_PREVIEW_STEPS, StalenessSchedule
from verl_ext.staleness.update_lag import MAX_COUNT, scheduled_update_lag, updates_per_step

# a bound on --steps beyond any run (the preview costs the same for any count up to it), so that every count the summary
# prints stays a number Python prints (it refuses integers of more than 4,300 digits)
MAX_STEPS_DIGITS = 100


def step_count(text: str) -> int:
    """``--steps``: an integer in 0..10**100."""
    value = non_negative_int(text)
    if value > 10**MAX_STEPS_DIGITS:
        raise argparse.ArgumentTypeError(f"expected an integer in 0..10**{MAX_STEPS_DIGITS}, got one of "
                                         f"{len(str(value))} digits")
    return value


def build_parser(prog: str = "verl-ext schedule") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Preview the delayed_sync schedule: for each training step (0-based), the policy version "
        "that generated its batch, the lag, and whether the weights are pushed to the rollout after it.",
    )
    parser.add_argument("--sync-interval", type=positive_int, default=1, help="m: push weights every m steps")
    parser.add_argument(
        "--sync-offset", type=non_negative_int, default=0, help="n: batches are consumed n steps after their push"
    )
    parser.add_argument("--steps", type=step_count, required=True, help="number of training steps T")
    parser.add_argument("--offline", action="store_true", help="never push weights after the initial ones")
    parser.add_argument(
        "--mini-batches", type=int_in(1, MAX_COUNT), default=None,
        help="M = data.train_batch_size / actor.ppo_mini_batch_size: also show the lag in optimizer updates",
    )
    parser.add_argument("--epochs", type=int_in(1, MAX_COUNT), default=None,
                        help="E = actor.ppo_epochs: also show the lag in optimizer updates")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    return parser


# The table shows the first rows only: after the start-up the schedule repeats every sync_interval steps, and
# a terminal table of a long run would take minutes and gigabytes to build.
TABLE_ROWS = 60


def schedule_main(argv: list[str] | None = None) -> int:
    """Print the schedule; ``--format json`` prints a list of {step, behaviour_version, lag, synced}, with
    ``update_lag_first`` and ``update_lag_last`` when ``--mini-batches`` or ``--epochs`` is given (the step's first
    and last optimizer update, counted from the behaviour policy; the token-weighted mean is their midpoint when the
    mini-batches hold equal tokens).

    Time and memory are bounded for any ``--steps``: the summary is computed in closed form, the table shows
    the first :data:`TABLE_ROWS` steps, and JSON streams at most ``MAX_PREVIEW_STEPS`` rows (more is an error).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        schedule = StalenessSchedule(sync_interval=args.sync_interval, sync_offset=args.sync_offset, offline=args.offline)
    except ValueError as error:
        parser.error(str(error))
    in_updates = args.mini_batches is not None or args.epochs is not None
    mini_batches, epochs = args.mini_batches or 1, args.epochs or 1
    updates = updates_per_step(mini_batches, epochs)
    if args.format == "json":
        if args.steps > MAX_PREVIEW_STEPS:
            parser.error(
                f"--steps {args.steps}: the JSON preview lists at most {MAX_PREVIEW_STEPS} steps (the schedule repeats "
                "every sync_interval steps after its start-up; the table format summarises a run of any length)"
            )
        write = sys.stdout.write
        write("[")
        for row in schedule.rows(0, args.steps):  # formatted by hand: json.dumps(asdict(row)) is 10x slower
            extra = (f', "update_lag_first": {updates * row.lag}, "update_lag_last": {updates * row.lag + updates - 1}'
                     if in_updates else "")
            write(f'{", " if row.step else ""}{{"step": {row.step}, "behaviour_version": {row.behaviour_version}, '
                  f'"lag": {row.lag}, "synced": {"true" if row.synced else "false"}{extra}}}')
        write("]\n")
        return 0
    title = "offline" if args.offline else f"sync_interval={args.sync_interval}, sync_offset={args.sync_offset}"
    columns = ("step", "behaviour_version", "lag", "synced") + (("update lag (first..last)",) if in_updates else ())
    table = Table(*columns, title=title)
    shown = min(args.steps, TABLE_ROWS)
    for row in schedule.rows(0, shown):
        cells = [str(row.step), str(row.behaviour_version), str(row.lag), "yes" if row.synced else ""]
        if in_updates:
            lag = scheduled_update_lag(row.lag, mini_batches, epochs)
            cells.append(f"{lag.first}..{lag.last}")
        table.add_row(*cells)
    console = Console()
    console.print(table)
    if shown < args.steps:
        console.print(
            f"steps {shown}..{args.steps - 1} not shown: "
            + ("offline, the lag grows by one per step" if args.offline else
               f"after the first {schedule.startup_steps()} steps the lags repeat every {args.sync_interval} step(s)")
            + " (--format json lists every step)."
        )
    smallest, largest = schedule.lag_range(args.steps)
    console.print(
        f"{schedule.sync_count(args.steps)} weight pushes after training steps (plus the initial load); "
        f"lag {smallest}..{largest}; at most {schedule.pending_batches_peak(args.steps)} generated batches wait in "
        "host memory."
    )
    if in_updates:
        console.print(
            f"{mini_batches} mini-batch(es) x {epochs} epoch(s) = {updates} optimizer update(s) per step: a batch k steps "
            f"old is {updates}k updates old at the step's first update and {updates}k + {updates - 1} at its last; "
            f"here {updates * smallest}..{updates * largest + updates - 1} (the papers' setting makes 1 update per step)."
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(schedule_main())
