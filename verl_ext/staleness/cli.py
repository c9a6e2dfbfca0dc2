"""``verl-ext schedule``: preview which policy version generates each step's batch (the paper's Figure 6)."""

import argparse
import json
from dataclasses import asdict

from rich.console import Console
from rich.table import Table

from verl_ext.argument_types import non_negative_int, positive_int
from verl_ext.staleness.schedule import StalenessSchedule


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
    parser.add_argument("--steps", type=non_negative_int, required=True, help="number of training steps T")
    parser.add_argument("--offline", action="store_true", help="never push weights after the initial ones")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    return parser


def schedule_main(argv: list[str] | None = None) -> int:
    """Print the schedule; ``--format json`` prints a list of {step, behaviour_version, lag, synced}."""
    args = build_parser().parse_args(argv)
    schedule = StalenessSchedule(sync_interval=args.sync_interval, sync_offset=args.sync_offset, offline=args.offline)
    rows = schedule.preview(args.steps)
    if args.format == "json":
        print(json.dumps([asdict(row) for row in rows]))
        return 0
    title = "offline" if args.offline else f"sync_interval={args.sync_interval}, sync_offset={args.sync_offset}"
    table = Table("step", "behaviour_version", "lag", "synced", title=title)
    for row in rows:
        table.add_row(str(row.step), str(row.behaviour_version), str(row.lag), "yes" if row.synced else "")
    console = Console()
    console.print(table)
    console.print(
        f"{schedule.sync_count(args.steps)} weight pushes after training steps (plus the initial load); "
        f"at most {schedule.pending_batches_peak(args.steps)} generated batches wait in host memory."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(schedule_main())
