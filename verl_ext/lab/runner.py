"""Run the lab's CPU runs and collect what verl logged, with a progress bar.

The runs go to a child process (:mod:`verl_ext.lab.session`: one Ray start-up shared by all runs, each run
through verl's own ``main_ppo``), whose output is written to ``<out>/lab.log``. This process watches the
files verl's file logger appends to (one line per training step, unbuffered) to drive the progress bar, and
reads them at the end. Ctrl-C (or any exception here) stops the child with SIGTERM: the child runs in its own session (the
terminal's Ctrl-C reaches only this process), and the Ray cluster it started shares its fate (Ray's
processes exit when the driver that started them dies).

Before anything starts, every run's config is composed with Hydra (unknown keys, bad values) and its
staleness block checked (:func:`verl_ext.staleness.config.delayed_sync_config_from`), so a typo fails in
seconds, naming the run and the key, not after a minute of Ray start-up.

With ``reuse=True`` a run whose metrics file in ``<out>`` is complete and was produced by the same overrides
and the same initial model (``<out>/runs/<name>.json``) is not run again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from verl_ext.lab.plan import LabRun
from verl_ext.lab.report import run_record
from verl_ext.lab.session import STATUS_FILE
from verl_ext.lab.summary import REWARD_METRIC, summarize_run, trained_steps
from verl_ext.metrics_file import read_metrics_file

POLL_SECONDS = 1.0
STOP_GRACE_SECONDS = 30.0


@dataclass(frozen=True)
class LabPaths:
    out_dir: Path

    @property
    def log(self) -> Path:
        return self.out_dir / "lab.log"

    @property
    def plan(self) -> Path:
        return self.out_dir / "plan.json"

    @property
    def status(self) -> Path:
        return self.out_dir / STATUS_FILE

    def run_description(self, run: LabRun) -> Path:
        return self.out_dir / "runs" / f"{run.name}.json"

    def metrics(self, run: LabRun) -> Path:
        from verl_ext.cpu.launch import run_paths

        return run_paths(self.out_dir, run.cpu_run())["metrics"]


def check_runs(runs: Sequence[LabRun], out_dir: Path, assets_dir: Path) -> None:
    """Compose every run's config (Hydra) and check its staleness block; raise ValueError naming the run."""
    from verl_ext.cpu.launch import compose_run_config
    from verl_ext.staleness.config import delayed_sync_config_from

    for run in runs:
        try:
            config = compose_run_config(run.cpu_run(), out_dir, assets_dir)
            delayed_sync_config_from(config)
        except Exception as error:  # noqa: BLE001 -- re-raised with the run's name
            raise ValueError(f"lab run {run.name}: bad configuration: {type(error).__name__}: {error}") from error


def logged_training_steps(path: Path) -> int:
    """How many steps with a reward a (possibly growing) verl file-logger JSONL holds (a last line being
    written is not counted: :mod:`verl_ext.metrics_file`)."""
    if not path.is_file():
        return 0
    return len(trained_steps(read_metrics_file(path).steps))


def last_reward(path: Path) -> Optional[float]:
    """The reward of the last step logged so far, None before the first."""
    rows = trained_steps(read_metrics_file(path).steps) if path.is_file() else []
    return float(rows[-1][REWARD_METRIC]) if rows else None


def read_status(path: Path) -> dict[str, dict[str, Any]]:
    """name -> the last status record of that run (``started`` or ``finished``)."""
    status: dict[str, dict[str, Any]] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                status[record["name"]] = record
    return status


def assets_fingerprint(assets_dir: Path) -> str:
    """sha256 of the assets' manifest (it lists the sha256 of every model and data file)."""
    import hashlib

    manifest = Path(assets_dir) / "manifest.json"
    if not manifest.is_file():
        raise ValueError(f"{assets_dir} holds no manifest.json: not a tiny-assets or warm-start folder")
    return hashlib.sha256(manifest.read_bytes()).hexdigest()


def is_reusable(run: LabRun, paths: LabPaths, fingerprint: str) -> bool:
    description = paths.run_description(run)
    if not description.is_file():
        return False
    stored = json.loads(description.read_text(encoding="utf-8"))
    return (
        stored.get("overrides") == list(run.overrides())
        and stored.get("steps") == run.steps
        and stored.get("assets") == fingerprint
        and logged_training_steps(paths.metrics(run)) >= run.steps
    )


def run_lab(
    runs: Sequence[LabRun],
    out_dir: Path,
    assets_dir: Path,
    target: float,
    reuse: bool = False,
    progress_console=None,
) -> list[dict[str, Any]]:
    """Run ``runs`` (those not reusable) and return one record per run (:func:`verl_ext.lab.report.run_record`).

    ``assets_dir`` holds the initial model and the task's data (:func:`verl_ext.lab.warm_start.initial_policy_assets`).
    """
    from verl_ext.cpu.launch import run_overrides

    paths = LabPaths(Path(out_dir).resolve())
    paths.out_dir.mkdir(parents=True, exist_ok=True)
    fingerprint = assets_fingerprint(Path(assets_dir))
    check_runs(runs, paths.out_dir, Path(assets_dir))
    pending = [run for run in runs if not (reuse and is_reusable(run, paths, fingerprint))]
    errors: dict[str, Optional[str]] = {}
    if pending:
        errors = _run_in_child(pending, paths, Path(assets_dir), runs, progress_console)
        for run in pending:
            if errors.get(run.name) is None:
                description = {"name": run.name, "steps": run.steps, "overrides": list(run.overrides()), "assets": fingerprint,
                               "all_overrides": run_overrides(run.cpu_run(), paths.out_dir, Path(assets_dir))}
                paths.run_description(run).parent.mkdir(parents=True, exist_ok=True)
                paths.run_description(run).write_text(json.dumps(description, indent=1) + "\n", encoding="utf-8")
    records = []
    for run in runs:
        metrics = paths.metrics(run)
        logged = read_metrics_file(metrics) if metrics.is_file() else None
        steps = logged.steps if logged else []
        error = errors.get(run.name) or missing_steps_error(run, steps, metrics, logged.skipped_lines if logged else 0)
        records.append(run_record(run, summarize_run(steps, target=target, pi_old_is_behaviour=run.pi_old_is_behaviour), error))
    return records


def missing_steps_error(run: LabRun, steps: list[dict[str, Any]], metrics: Path, skipped_lines: int = 0) -> Optional[str]:
    """An error when verl logged fewer training steps than the run asked for (a run cut short would
    otherwise be summarised as if it were complete); None when all were logged. ``skipped_lines``: the
    metrics file's last line was cut short (a write interrupted) and not read."""
    trained = sum(1 for step in steps if REWARD_METRIC in step)
    if trained >= run.steps:
        return None
    cut = "; its last line was cut short and skipped" if skipped_lines else ""
    return f"verl logged {trained} of {run.steps} training steps in {metrics}{cut}"


def _run_in_child(pending, paths: LabPaths, assets_dir: Path, all_runs, progress_console) -> dict[str, Optional[str]]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    plan = {
        "base_dir": str(paths.out_dir),
        "assets_dir": str(Path(assets_dir).resolve()),
        "runs": [{"name": run.name, "overrides": list(run.overrides()), "steps": run.steps} for run in pending],
    }
    paths.plan.write_text(json.dumps(plan, indent=1) + "\n", encoding="utf-8")
    paths.status.unlink(missing_ok=True)
    total_steps = sum(run.steps for run in pending)
    with paths.log.open("w", encoding="utf-8") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "verl_ext.lab.session", str(paths.plan)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )
        progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("steps"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[detail]}"),
            console=progress_console,
            transient=False,
        )
        previous_handler = _raise_on_sigterm()
        try:
            with progress:
                task = progress.add_task("lab", total=total_steps, detail="starting Ray")
                while child.poll() is None:
                    _update(progress, task, pending, paths)
                    time.sleep(POLL_SECONDS)
                _update(progress, task, pending, paths)
        except BaseException:
            _stop(child)
            raise
        finally:
            if previous_handler is not None:
                signal.signal(signal.SIGTERM, previous_handler)
    status = read_status(paths.status)
    errors: dict[str, Optional[str]] = {}
    for run in pending:
        record = status.get(run.name)
        if record is None or record["event"] != "finished":
            errors[run.name] = f"not run: the lab's session process exited with status {child.returncode} (see {paths.log})"
        elif not record["ok"]:
            errors[run.name] = f"{record['error']} (see {paths.log})"
        else:
            errors[run.name] = None
    return errors


def _update(progress, task, pending, paths: LabPaths) -> None:
    status = read_status(paths.status)
    done = 0
    detail = "starting Ray" if not status else ""
    for index, run in enumerate(pending):
        record = status.get(run.name)
        if record is None:
            continue
        if record["event"] == "finished":
            done += run.steps
            continue
        logged = logged_training_steps(paths.metrics(run))
        done += min(logged, run.steps)
        reward = last_reward(paths.metrics(run))
        detail = f"run {index + 1}/{len(pending)} {run.name}" + (
            f" reward {reward:.2f}" if reward is not None else " (starting workers)"
        )
    progress.update(task, completed=done, detail=detail)


class Terminated(Exception):
    """This process received SIGTERM while the lab's session was running."""


def _raise_on_sigterm():
    """Turn SIGTERM into an exception (so the child session is stopped too); the previous handler, or None
    when not in the main thread (signal handlers can only be set there)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum, frame):
        raise Terminated("SIGTERM")

    return signal.signal(signal.SIGTERM, handler)


def _stop(child: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after ``STOP_GRACE_SECONDS``; Ray's processes exit with their driver."""
    if child.poll() is not None:
        return
    child.send_signal(signal.SIGTERM)
    try:
        child.wait(timeout=STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
