"""Benchmark: this checkout against an earlier commit, on the same machine, runs interleaved (A B A B): the CPU
quickstart's ``delayed_sync`` (1, 1) run without and with ``overlap``, per commit.

    flock /tmp/verl-ext-heavy.lock python benchmarks/bench_against_commit.py [--commit daa8d72] [--repeats 3]
        [--steps 16] [--json FILE]

The earlier commit is checked out in a temporary git worktree (removed at the end) and run in this same Python
environment with ``PYTHONPATH`` pointing at it (Ray's workers inherit it), each tree on tiny assets built by its
own code. Every run is ``python -m verl_ext.cpu.quickstart --steps S --quiet -- OVERRIDES`` with the overrides
of the run that found the rollout twice as slow (:data:`RUN_OVERRIDES`; ``overlap=true`` for the overlap runs).
Order: for each repeat, no overlap (earlier commit, this checkout), then overlap (earlier, this), so the load
of the shared machine falls on both sides alike.

The earlier commit runs with its own code only: ``PYTHONPATH`` puts a guard first (a ``sitecustomize`` that takes
the editable install's import hook out of every process, Ray's workers included), so a module the old tree lacks is
an import error, never today's module; before any run, each tree is checked to import ``verl_ext`` and its
quickstart from its own folder (:func:`check_own_code`). ``--commit`` is resolved with ``git rev-parse --verify
--end-of-options COMMIT^{commit}`` (a value starting with ``-`` is never an option of git; an unknown one or one
that is not a commit is ``error: ...``, exit 2, before anything runs). A checkout with uncommitted changes to
tracked files is refused (its figures would be of no commit) unless ``--allow-dirty``, which marks every figure of
"this checkout" as of a dirty tree.

Figures per run, means over the steady steps (:func:`steady_steps`: from step 3, as steps 1 and 2 pay start-up
costs, to the last step that generates a batch, S - 2 at (1, 1)): ``timing_s/step``, ``timing_s/gen``,
``timing_s/old_log_prob``, ``timing_s/update_actor``, and ``step_to_the_end``, s/step over steps 3 to S (the
figure of this benchmark before 2026-11-27, which counts the tail steps that generate nothing: two without
overlap, one with it); per commit the medians over the repeats, and overlap's speed-up: median s/step without
overlap / median s/step with it, beside each repeat's own ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Sequence

from headline import load_average, print_headline, print_report  # benchmarks/headline.py (this script's folder is on sys.path)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's verl_ext
from verl_ext.checks.arguments import positive_int  # noqa: E402 -- the shared option checks

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from verl_ext import metric_names  # noqa: E402 -- after the checkout is on sys.path
from verl_ext.metrics_file import read_metrics_file  # noqa: E402
from verl_ext.overrides import override_value  # noqa: E402

DEFAULT_COMMIT = "daa8d72"  # the last commit whose CPU rollout generated in batches (not bit for bit)
RUN_OVERRIDES = (
    "trainer.v1.trainer_mode=delayed_sync",
    "trainer.v1.delayed_sync.sync_interval=1",
    "trainer.v1.delayed_sync.sync_offset=1",
    "actor_rollout_ref.rollout.free_cache_engine=false",
)
FIRST_STEP = 3  # the first step averaged
# the runs' schedule (m, n), read from RUN_OVERRIDES
SYNC_INTERVAL = int(override_value(RUN_OVERRIDES, "trainer.v1.delayed_sync.sync_interval"))
SYNC_OFFSET = int(override_value(RUN_OVERRIDES, "trainer.v1.delayed_sync.sync_offset"))
PHASES = ("step", "gen", "old_log_prob", "update_actor")
THIS = "this checkout"
THIS_DIRTY = "this checkout (with uncommitted changes)"
PACKAGES = ("verl_ext", "data_prep")  # what the editable install maps to today's checkout
# imported by every Python process whose PYTHONPATH starts with its folder: the editable install's hook goes
GUARD = '''"""Written by benchmarks/bench_against_commit.py: verl-ext's code comes from PYTHONPATH's tree only."""
import sys

sys.meta_path[:] = [finder for finder in sys.meta_path if not getattr(finder, "__module__", "").startswith("__editable__")]
sys.path_hooks[:] = [hook for hook in sys.path_hooks if not getattr(hook, "__module__", "").startswith("__editable__")]
'''


class BenchRefused(ValueError):
    """An option or a tree the benchmark cannot measure (names it)."""


def resolve_commit(repo: Path, commit: str) -> str:
    """The full hash of ``commit`` in ``repo`` (``git rev-parse --verify --end-of-options COMMIT^{commit}``: a value
    starting with ``-`` is a revision, never an option); :class:`BenchRefused` naming it when git knows no such
    commit."""
    if not commit.strip():
        raise BenchRefused("--commit is empty; give a commit (hash, tag or branch)")
    result = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", "--end-of-options",
                             f"{commit}^{{commit}}"], capture_output=True, text=True)
    if result.returncode != 0 or not result.stdout.strip():
        raise BenchRefused(f"--commit {commit!r}: not a commit of {repo}; give a hash, tag or branch (git log)")
    return result.stdout.strip()


def uncommitted_changes(repo: Path) -> list[str]:
    """The tracked files of ``repo`` with changes not committed (``git status --porcelain``, untracked files aside)."""
    result = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                            capture_output=True, text=True, check=True)
    return [line[3:] for line in result.stdout.splitlines() if line.strip()]


def guarded_environment(tree: Path, guard: Path) -> dict[str, str]:
    """The environment of a run of ``tree``'s code: PYTHONPATH = the guard's folder, then the tree (nothing else)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join((str(guard), str(tree)))}


def write_guard(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(GUARD)
    return folder


def check_own_code(tree: Path, guard: Path) -> None:
    """:class:`BenchRefused` unless ``verl_ext`` and its quickstart import from ``tree`` itself under the guard (an
    old tree without the quickstart, or one whose code would come from elsewhere, cannot be measured)."""
    probe = ("import importlib, json, sys\n"
             "found = {}\n"
             "for name in ('verl_ext', 'verl_ext.cpu.quickstart'):\n"
             "    try:\n"
             "        found[name] = importlib.import_module(name).__file__\n"
             "    except Exception as error:\n"
             "        found[name] = 'not importable: ' + repr(error)\n"
             "print(json.dumps(found))\n")
    result = subprocess.run([sys.executable, "-c", probe], cwd=tree, env=guarded_environment(tree, guard),
                            capture_output=True, text=True)
    try:
        found = json.loads(result.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise BenchRefused(f"{tree}: its code could not be probed:\n{result.stderr[-2000:]}") from None
    tree = tree.resolve()
    for name, where in found.items():
        if where is None or where.startswith("not importable") or tree not in Path(where).resolve().parents:
            raise BenchRefused(f"{tree}: {name} is {where if where else 'a namespace'}, not this tree's own code: the "
                               "commit cannot be measured with its own code (does it have the CPU quickstart?)")


def steady_steps(total_steps: int, first_step: int = FIRST_STEP) -> range:
    """The (1-based) steps of a run of ``total_steps`` that are like every other: from ``first_step`` to the last
    whose end pushes a version that generates a batch (the schedule's :meth:`steps_generated_with`; the push after
    step s is version s). At (1, n) the last n + 1 steps generate nothing: without overlap they are training alone;
    with it only the very last trains with no generation beside it. Counting them favours the run without overlap."""
    from verl_ext.staleness.schedule import StalenessSchedule

    schedule = StalenessSchedule(sync_interval=SYNC_INTERVAL, sync_offset=SYNC_OFFSET)
    generating = [step for step in range(1, total_steps + 1) if schedule.steps_generated_with(step, total_steps)]
    return range(first_step, max(generating, default=0) + 1)


def run_figures(steps: list[dict], first_step: int = FIRST_STEP) -> dict[str, float]:
    """Mean ``timing_s/<phase>`` over :func:`steady_steps` for each of :data:`PHASES`, and ``step_to_the_end``:
    s/step over every logged step from ``first_step`` on."""
    logged = [record for record in steps if metric_names.STEP_SECONDS in record]
    window = steady_steps(max((record["step"] for record in logged), default=0), first_step)
    steady = [record for record in logged if record["step"] in window]
    if not steady:
        raise ValueError(f"no steady step (from step {first_step} to the last that generates a batch) was logged "
                         f"({len(steps)} steps): run more steps")
    figures = {phase: statistics.mean(record[metric_names.timing(phase)] for record in steady) for phase in PHASES}
    figures["step_to_the_end"] = statistics.mean(
        record[metric_names.STEP_SECONDS] for record in logged if record["step"] >= first_step)
    return figures


def quickstart(tree: Path, out: Path, assets: Path, steps: int, overlap: bool, guard: Path) -> dict:
    """One quickstart run with the code of ``tree``; its figures, wall time and the load when it started."""
    overrides = (*RUN_OVERRIDES, f"trainer.v1.delayed_sync.overlap={str(overlap).lower()}")
    command = [sys.executable, "-m", "verl_ext.cpu.quickstart", "--steps", str(steps), "--quiet",
               "--out", str(out), "--assets", str(assets), "--", *overrides]
    load = os.getloadavg()[0]
    env = guarded_environment(tree, guard)
    result = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{shlex.join(command)} (in {tree}) failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    summary = json.loads((out / "summary.json").read_text())
    figures = run_figures(read_metrics_file(summary["metrics_path"]).steps)
    return {**figures, "wall_seconds": summary["wall_seconds"], "load_average_at_start": load}


def summarise(runs: list[dict]) -> dict[str, dict]:
    """Per commit: the median of each figure without and with overlap, and overlap's speed-up."""
    summary = {}
    for side in dict.fromkeys(run["side"] for run in runs):
        row = {}
        for overlap in (False, True):
            mine = [run for run in runs if run["side"] == side and run["overlap"] == overlap]
            key = "overlap" if overlap else "no_overlap"
            row[key] = {phase: statistics.median(run[phase] for run in mine) for phase in (*PHASES, "step_to_the_end")}
            row[key]["repeats"] = len(mine)
        row["overlap_speed_up"] = row["no_overlap"]["step"] / row["overlap"]["step"]
        row["overlap_speed_up_to_the_end"] = row["no_overlap"]["step_to_the_end"] / row["overlap"]["step_to_the_end"]
        pairs = {}
        for run in runs:
            if run["side"] == side:
                pairs.setdefault(run["repeat"], {})[run["overlap"]] = run["step"]
        row["overlap_speed_up_per_repeat"] = [pair[False] / pair[True] for _, pair in sorted(pairs.items()) if len(pair) == 2]
        summary[side] = row
    return summary


def headline_figures(summary: dict[str, dict], commit: str, this: str = THIS) -> dict[str, str]:
    old, new = summary[commit], summary[this]
    marked = {} if this == THIS else {"this checkout": "with uncommitted changes: the figures are of no commit"}
    return {**marked,
        f"timing_s/gen, (1,1) no overlap: {commit} -> this": f"{old['no_overlap']['gen']:.2f} -> {new['no_overlap']['gen']:.2f} s",
        f"s/step no overlap: {commit} -> this": f"{old['no_overlap']['step']:.2f} -> {new['no_overlap']['step']:.2f}",
        f"s/step overlap: {commit} -> this": f"{old['overlap']['step']:.2f} -> {new['overlap']['step']:.2f}",
        f"overlap speed-up at (1,1): {commit} -> this": f"x{old['overlap_speed_up']:.2f} -> x{new['overlap_speed_up']:.2f}",
        "per repeat": f"{' '.join(f'x{r:.2f}' for r in old['overlap_speed_up_per_repeat'])} -> "
                      f"{' '.join(f'x{r:.2f}' for r in new['overlap_speed_up_per_repeat'])}",
        "counting the tail steps (the figure before 2026-11-27)":
            f"x{old['overlap_speed_up_to_the_end']:.2f} -> x{new['overlap_speed_up_to_the_end']:.2f}",
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commit", default=DEFAULT_COMMIT, help=f"the earlier commit (default {DEFAULT_COMMIT})")
    parser.add_argument("--repeats", type=positive_int, default=3, help="runs per commit and overlap setting (default 3)")
    parser.add_argument("--steps", type=positive_int, default=16, help="training steps per run (default 16)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    parser.add_argument("--allow-dirty", action="store_true",
                        help="measure this checkout with uncommitted changes (its figures are marked as of a dirty tree)")
    args = parser.parse_args(argv)
    if not steady_steps(args.steps):
        fewest = next(total for total in range(FIRST_STEP, FIRST_STEP + 100) if steady_steps(total))
        parser.error(f"--steps must be >= {fewest} (one steady step)")
    try:
        commit = resolve_commit(REPO, args.commit)
        dirty = uncommitted_changes(REPO)
        if dirty and not args.allow_dirty:
            raise BenchRefused(f"{REPO} has uncommitted changes ({', '.join(dirty[:5])}{' ...' if len(dirty) > 5 else ''}): "
                               "its figures would be of no commit. Commit them, or pass --allow-dirty to measure the "
                               "tree as it is (the figures are then marked as of a dirty tree)")
    except BenchRefused as refused:
        parser.error(str(refused))
    this = THIS_DIRTY if dirty else THIS
    if dirty:
        print(f"[bench_against_commit] {REPO} has uncommitted changes: its figures are marked '{this}'", flush=True)
    load_start = load_average()
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench_against_commit_") as scratch:
        scratch = Path(scratch)
        old_tree = scratch / "tree"
        guard = write_guard(scratch / "guard")
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(old_tree), commit],
                       check=True, capture_output=True, text=True)
        try:
            trees = {args.commit: old_tree, this: REPO}
            try:
                for tree in trees.values():
                    check_own_code(tree, guard)
            except BenchRefused as refused:
                print(f"bench_against_commit: error: {refused}", file=sys.stderr)
                return 2
            for repeat in range(args.repeats):
                for overlap in (False, True):
                    for side, tree in trees.items():
                        label = f"{'old' if side == args.commit else 'new'}_{repeat}_{'overlap' if overlap else 'plain'}"
                        figures = quickstart(tree, scratch / "runs" / label, scratch / f"assets_{label[:3]}",
                                             args.steps, overlap, guard)
                        runs.append({"side": side, "overlap": overlap, "repeat": repeat, **figures})
                        print(json.dumps(runs[-1]), flush=True)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(old_tree)],
                           check=False, capture_output=True)
    summary = summarise(runs)
    print_report(summary, {"runs": runs, "commit": commit, "this_checkout_dirty": bool(dirty)}, load_start, args.json)
    print_headline(headline_figures(summary, args.commit, this))
    return 0


if __name__ == "__main__":
    sys.exit(main())
