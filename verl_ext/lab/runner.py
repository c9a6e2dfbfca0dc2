"""Run the lab's CPU runs in this process and collect what verl logged, with a progress bar.

The runs share one Ray start-up: :class:`verl_ext.cpu.ray_session.CPURaySession`, each run through verl's own
``main_ppo`` in this process, in order; a failed run does not stop the others. While they run, this process's
output (Ray's, verl's and its workers', forwarded to the driver) goes to ``<out>/lab.log``, at the file
descriptors too, so that the terminal shows only the progress bar and then the results. A thread watches the
files verl's file logger appends to (one line per training step, unbuffered) to drive the bar. Ctrl-C (or
SIGTERM, turned into :class:`Terminated`) ends the session: Ray is shut down, its workers with it.

Before anything starts, every run is checked by the dry run's own checks (:func:`verl_ext.preflight.preflight_many`:
Hydra's composition, verl's ``validate_config`` and verl-ext's run checks, what ``main_ppo``'s driver runs),
so a typo fails in seconds, naming the run and the key, not after a minute of Ray start-up.

With ``reuse=True`` a run whose metrics file in ``<out>`` is complete and was produced by the same overrides (the
same key set to the same value, in any order) and the same initial model (``<out>/runs/<name>.json``) is not run
again.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence, TextIO

from verl_ext.lab.report import run_record
from verl_ext.lab.summary import REWARD_METRIC, summarize_run
from verl_ext.metrics_file import metric_series, read_metrics_file, trained_steps
from verl_ext.run_description import read_lab_record, write_lab_record
from verl_ext.runs.outputs import Outputs
from verl_ext.overrides import merge_overrides, override_key
from verl_ext.runs.run import Run

POLL_SECONDS = 1.0


@dataclass(frozen=True)
class LabPaths:
    out_dir: Path

    @property
    def log(self) -> Path:
        return self.out_dir / "lab.log"

    def run_description(self, run: Run) -> Path:
        return self.out_dir / "runs" / f"{run.name}.json"

    def metrics(self, run: Run) -> Path:
        return Outputs(self.out_dir).paths(run).metrics


def check_runs(runs: Sequence[Run], out_dir: Path, assets_dir: Path) -> None:
    """The dry run's checks on every run, as the launcher composes it on the CPU backend
    (:func:`verl_ext.preflight.preflight_many`); ValueError naming the failed runs and why."""
    from verl_ext.cpu.backend import CPUBackend
    from verl_ext.preflight import preflight_many
    from verl_ext.runs.compose import compose

    backend, outputs = CPUBackend(Path(assets_dir).resolve()), Outputs(out_dir)
    failed = [result for result in preflight_many([(run.name, compose(run, backend, outputs)) for run in runs])
              if not result.ok]
    if failed:
        raise ValueError("; ".join(f"lab run {result.name}: bad configuration: {result.error}" for result in failed))


def logged_training_steps(path: Path) -> int:
    """How many steps trained in a (possibly growing) verl file-logger JSONL (a last line being written is not
    counted: :mod:`verl_ext.metrics_file`)."""
    return len(trained_steps(read_metrics_file(path).steps)) if path.is_file() else 0


def last_reward(path: Path) -> Optional[float]:
    """The reward of the last step logged so far, None before the first."""
    rewards = metric_series(trained_steps(read_metrics_file(path).steps), REWARD_METRIC) if path.is_file() else []
    return rewards[-1] if rewards else None


def assets_fingerprint(assets_dir: Path) -> str:
    """sha256 of the assets' manifest (it lists the sha256 of every model and data file)."""
    import hashlib

    manifest = Path(assets_dir) / "manifest.json"
    if not manifest.is_file():
        raise ValueError(f"{assets_dir} holds no manifest.json: not a tiny-assets or warm-start folder")
    return hashlib.sha256(manifest.read_bytes()).hexdigest()


def same_overrides(first: Sequence[str], second: Sequence[str]) -> bool:
    """Whether two override lists set the same keys to the same values (order aside: a later key wins in each)."""
    def final(overrides: Sequence[str]) -> dict[str, str]:
        return {override_key(item): item.lstrip("+") for item in merge_overrides(overrides)}

    return final(first) == final(second)


def is_reusable(run: Run, paths: LabPaths, fingerprint: str) -> bool:
    """Whether ``run``'s record (``runs/<name>.json``, read by :func:`verl_ext.run_description.read_lab_record`)
    says it ran with the same overrides, steps and initial model, and its metrics are complete. A record that is not
    one (a list, null, garbage, not UTF-8, a FIFO, a link to an endless file, a huge file) is a
    :class:`~verl_ext.run_description.RunDescriptionError` naming the file: never read past its bound, never a hang."""
    description = paths.run_description(run)
    if not os.path.lexists(description):
        return False
    stored = read_lab_record(description)
    return (
        same_overrides(stored["overrides"], run.overrides)
        and stored["steps"] == run.steps
        and stored["assets"] == fingerprint
        and logged_training_steps(paths.metrics(run)) >= run.steps
    )


def run_lab(
    runs: Sequence[Run],
    out_dir: Path,
    assets_dir: Path,
    target: float,
    reuse: bool = False,
    progress_console=None,
) -> list[dict[str, Any]]:
    """Run ``runs`` (those not reusable) and return one record per run (:func:`verl_ext.lab.report.run_record`).

    ``assets_dir`` holds the initial model and the task's data (:func:`verl_ext.lab.warm_start.initial_policy_assets`).
    """
    paths = LabPaths(Path(out_dir).resolve())
    paths.out_dir.mkdir(parents=True, exist_ok=True)
    fingerprint = assets_fingerprint(Path(assets_dir))
    check_runs(runs, paths.out_dir, Path(assets_dir))
    pending = [run for run in runs if not (reuse and is_reusable(run, paths, fingerprint))]
    errors: dict[str, Optional[str]] = {}
    if pending:
        errors = _run_here(pending, paths, Path(assets_dir), fingerprint, progress_console)
    records = []
    for run in runs:
        metrics = paths.metrics(run)
        logged = read_metrics_file(metrics) if metrics.is_file() else None
        steps = logged.steps if logged else []
        error = errors.get(run.name) or missing_steps_error(run, steps, metrics, logged.skipped_lines if logged else 0)
        records.append(run_record(run, summarize_run(steps, target=target, pi_old_is_behaviour=run.pi_old_is_behaviour), error))
    return records


def write_description(path: Path, run: Run, fingerprint: str, all_overrides: Sequence[str],
                      config: Optional[dict] = None) -> None:
    """``runs/<name>.json``: the run's own overrides and steps, the initial model's fingerprint, every override
    ``main_ppo`` was given, and the composed values that define the run (``config``: what ran)."""
    record = {"name": run.name, "steps": run.steps, "overrides": list(run.overrides), "assets": fingerprint,
              "all_overrides": list(all_overrides), **({"config": config} if config is not None else {})}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_lab_record(path, record)


def missing_steps_error(run: Run, steps: list[dict[str, Any]], metrics: Path, skipped_lines: int = 0) -> Optional[str]:
    """An error when verl logged fewer training steps than the run asked for (a run cut short would
    otherwise be summarised as if it were complete); None when all were logged. ``skipped_lines``: the
    metrics file's last line was cut short (a write interrupted) and not read."""
    trained = len(trained_steps(steps))
    if trained >= run.steps:
        return None
    cut = "; its last line was cut short and skipped" if skipped_lines else ""
    return f"verl logged {trained} of {run.steps} training steps in {metrics}{cut}"


def _run_here(pending: Sequence[Run], paths: LabPaths, assets_dir: Path, fingerprint: str,
              progress_console=None) -> dict[str, Optional[str]]:
    """Run ``pending`` in one :class:`~verl_ext.cpu.ray_session.CPURaySession` of this process, output in the lab's
    log, the progress bar on the terminal (``progress_console``, default: this process's standard error as it
    was before); each run that ran gets its description (``runs/<name>.json``: what :func:`is_reusable` compares),
    which moves with its files when a later lab runs it again. Each run's error (None when it ran)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from verl_ext.cpu.ray_session import CPURaySession

    errors: dict[str, Optional[str]] = {}
    previous_handler = _raise_on_sigterm()
    try:
        with output_to(paths.log) as terminal:
            progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("steps"),
                TimeElapsedColumn(),
                TextColumn("{task.fields[detail]}"),
                console=progress_console or Console(file=terminal),
                transient=False,
            )
            with progress:
                task = progress.add_task("lab", total=sum(run.steps for run in pending), detail="starting Ray")
                try:
                    with CPURaySession(paths.out_dir, assets_dir) as session:
                        done = 0
                        for index, run in enumerate(pending):
                            label = f"run {index + 1}/{len(pending)} {run.name}"
                            with _watching(progress, task, run, paths.metrics(run), done, label):
                                # a failed run is in the result; the next one goes on
                                result = session.run(run, keep_with_run=(paths.run_description(run),))
                            if result.ok:
                                write_description(paths.run_description(run), run, fingerprint, result.overrides, result.config)
                            print(f"[verl-ext lab] {run.name}: {'ok' if result.ok else result.error} "
                                  f"({result.wall_seconds:.0f} s)", flush=True)
                            errors[run.name] = None if result.ok else f"{result.error} (see {paths.log})"
                            done += run.steps
                            progress.update(task, completed=done)
                except Exception as error:  # Ray did not start, or did not come back idle: the runs left are not run
                    traceback.print_exc()  # into the log
                    for run in pending:
                        errors.setdefault(run.name, f"not run: {type(error).__name__}: {error} (see {paths.log})")
    finally:
        if previous_handler is not None:
            signal.signal(signal.SIGTERM, previous_handler)
    return errors


@contextlib.contextmanager
def _watching(progress, task, run: Run, metrics: Path, done: int, label: str) -> Iterator[None]:
    """While the block runs ``run``, a thread moves the bar to ``done`` + the steps logged in ``metrics``."""
    stop = threading.Event()

    def watch() -> None:
        while True:
            logged = logged_training_steps(metrics)
            reward = last_reward(metrics)
            detail = label + (f" reward {reward:.2f}" if reward is not None else " (starting workers)")
            progress.update(task, completed=done + min(logged, run.steps), detail=detail)
            if stop.wait(POLL_SECONDS):
                return

    thread = threading.Thread(target=watch, name="lab-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@contextlib.contextmanager
def output_to(log: Path) -> Iterator[TextIO]:
    """Send this process's output to ``log`` within the block: ``sys.stdout``/``sys.stderr`` and file descriptors
    1 and 2 (what Ray's processes started here inherit, and C code writes to). Yields a text stream on the
    standard error as it was before, for the progress bar."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    terminal = os.fdopen(os.dup(saved[2]), "w", encoding="utf-8", errors="replace", buffering=1)
    try:
        with open_lab_log(log) as handle:
            for fd in (1, 2):
                os.dup2(handle.fileno(), fd)
            try:
                with contextlib.redirect_stdout(handle), contextlib.redirect_stderr(handle):
                    yield terminal
            finally:
                for fd, copy in saved.items():
                    os.dup2(copy, fd)
    finally:
        for copy in saved.values():
            os.close(copy)
        terminal.close()


def open_lab_log(log: Path) -> TextIO:
    """The lab's log, appended to (an earlier lab's output stays above, after a line naming when this one started),
    never through a symbolic link (OSError ELOOP: it would write into another file)."""
    import time

    descriptor = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0), 0o644)
    handle = os.fdopen(descriptor, "w", encoding="utf-8", buffering=1)
    handle.write(f"==== verl-ext lab, {time.strftime('%Y-%m-%d %H:%M:%S')} ====\n")
    return handle


class Terminated(Exception):
    """This process received SIGTERM while the lab's session was running."""


def _raise_on_sigterm():
    """Turn SIGTERM into an exception (so that the Ray session ends as on Ctrl-C); the previous handler, or None
    when not in the main thread (signal handlers can only be set there)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum, frame):
        raise Terminated("SIGTERM")

    return signal.signal(signal.SIGTERM, handler)
