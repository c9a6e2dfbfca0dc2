"""The GPU checks for one 15-minute lease: two ``main_ppo`` starts and the CUDA loss comparison, in priority order
within a time budget, into one folder of results; called again, it goes on where it stopped.

    python3 -m verl_ext.gpu.plan --budget 540 --out outputs/gpu_plan            # on the GPU node (docs/gpu.md)
    python -m verl_ext.gpu.plan --backend cpu --budget 3000 --out /tmp/plan     # the rehearsal on the CPU backend
    python -m verl_ext.gpu.plan --out outputs/gpu_plan --dry-run                # the steps, estimates, what is done

The steps, in priority order (:data:`STEPS`):

1. ``main``: one run carrying the checks the seven runs of ``tests/gpu`` made apart -- ``delayed_sync`` (3, 1)
   with a resident engine and ``overlap``, REC-OneSide-NoIS, checkpoints every 2 steps (step 4 mid-interval),
   validation every 3 steps, zero-variance masking, the log-prob mismatch in the update and by a separate
   forward pass (:func:`verl_ext.gpu.plan_checks.main_run_checks`);
2. ``resumed``: resumes ``main`` from its mid-interval checkpoint with a second loss family, OPMD (the same
   lags, versions and syncs; the mismatch metric without a forward pass of its own);
3. ``losses``: every loss in float32 on CUDA against float64 (``pytest tests/gpu -m gpu -k reference``).

A step starts only when its estimate fits in what is left of ``--budget`` (seconds from this command's start,
less a margin for writing the results); one that would not is left for the next call and the command stops
cleanly (exit 3). A step that overruns is stopped at the budget and runs again on the next call. After every
step ``DIR/plan_summary.json`` is rewritten whole (status, checks, figures, log of each step; the device; each
call); each run's logs and metrics are under ``DIR/runs``, the loss comparison's output in ``DIR/losses.log``.
Calling the command again with the same ``--out`` skips what passed or failed and goes on (while the node is
warm: a node given back starts bare). Exit status: 0 every step passed; 1 a step failed; 2 no CUDA GPU or vLLM
(it stops at once, saying what is missing), or a bad argument or output folder; 3 steps are left for another call.

``--backend cpu`` runs the same steps on the CPU backend (the CPU tiny model, float32; the loss comparison on the
CPU, float32 against float64): a rehearsal of the plan's own logic and checks, which says nothing about vLLM or
CUDA.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

SUMMARY = "plan_summary.json"
MAX_SUMMARY_BYTES = 4 * 2**20
MAX_BUDGET = 24 * 3600
# what a call keeps for itself after the last step: writing the summary, Ray's shutdown of a cut run
MARGIN_SECONDS = 15.0
PASSED, FAILED, PENDING, CUT, BLOCKED = "passed", "failed", "pending", "cut", "blocked"
STATUSES = (PASSED, FAILED, PENDING, CUT, BLOCKED)
DONE = (PASSED, FAILED)
BACKENDS = ("gpu", "cpu")


@dataclass(frozen=True)
class Step:
    """One step of the plan: its name, what it checks, how long it takes (seconds, per backend), and the steps that
    must have passed before it. The GPU estimates come from what ran on an H100 (2026-11-26): the smoke run's
    start-up 253 s and 2 s per step (the main run: start-up, 7 steps, 4 checkpoints, 3 validations; the resumed
    run: start-up, 3 steps), the loss comparison about a minute; the CPU ones from the rehearsal (docs/gpu.md)."""

    name: str
    what: str
    estimate: dict[str, float]
    needs: tuple[str, ...] = ()


MAIN, RESUMED, LOSSES = "main", "resumed", "losses"
STEPS = (
    Step(MAIN, "delayed_sync (3,1) + overlap, resident engine, checkpoints, validation, zero-variance masking, "
               "mismatch both ways (REC-OneSide-NoIS)", {"gpu": 270.0, "cpu": 180.0}),
    Step(RESUMED, "resume from the mid-interval checkpoint with a second loss family (OPMD)",
         {"gpu": 255.0, "cpu": 150.0}, needs=(MAIN,)),
    Step(LOSSES, "every loss in float32 on the device against float64", {"gpu": 70.0, "cpu": 40.0}),
)


@dataclass
class Outcome:
    """What executing a step gave: a status (:data:`STATUSES`), its checks (``name``, ``ok``, ``detail``), figures
    and an error."""

    status: str
    checks: list[dict[str, Any]] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    error: Optional[str] = None


Execute = Callable[[Step, float], Outcome]  # (step, seconds it may take) -> its outcome


class PlanFolderError(ValueError):
    """An output folder the plan must not write into, or a summary it cannot read (names the path)."""


def run_plan(steps: Sequence[Step], state: dict[str, dict[str, Any]], backend: str, budget: float,
             execute: Execute, save: Callable[[], None], clock: Callable[[], float] = time.monotonic,
             say: Callable[[str], None] = print) -> str:
    """Run the steps not done yet in ``state`` (name -> record, updated in place, ``save`` after each change), in
    priority order. A step runs only when its estimate fits in what is left of ``budget`` (less
    :data:`MARGIN_SECONDS`) and the steps it needs have passed; one that does not fit is left for the next call and
    the next step is tried (a shorter one may fit). A step stopped at the budget ends the call. Returns how the
    call ended, for the summary: ``"done"``, or the steps left and why."""
    deadline = clock() + budget - MARGIN_SECONDS
    left_over: list[str] = []
    for step in steps:
        record = state.setdefault(step.name, {"status": PENDING})
        if record["status"] in DONE:
            continue
        unmet = [need for need in step.needs if state.get(need, {}).get("status") != PASSED]
        if unmet:
            failed = [need for need in unmet if state.get(need, {}).get("status") in (FAILED, BLOCKED)]
            record.update(status=BLOCKED if failed else PENDING, error=f"needs {', '.join(unmet)} to pass first")
            save()
            if not failed:
                left_over.append(f"{step.name} (needs {', '.join(unmet)})")
            continue
        left = deadline - clock()
        if left < step.estimate[backend]:
            say(f"[verl-ext gpu plan] {step.name}: not started: it takes ~{step.estimate[backend]:.0f} s, "
                f"{max(left, 0):.0f} s of this call's budget are left; call again to go on")
            left_over.append(f"{step.name} (~{step.estimate[backend]:.0f} s, {max(left, 0):.0f} s left)")
            continue
        say(f"[verl-ext gpu plan] {step.name}: {step.what} (~{step.estimate[backend]:.0f} s, {left:.0f} s left)")
        started = clock()
        outcome = execute(step, left)
        seconds = clock() - started
        if outcome.status not in STATUSES:
            raise ValueError(f"step {step.name} returned status {outcome.status!r}")
        record.update(status=outcome.status, seconds=round(seconds, 1), checks=outcome.checks,
                      figures=outcome.figures, error=outcome.error)
        save()
        say(f"[verl-ext gpu plan] {step.name}: {outcome.status} in {seconds:.0f} s"
            + (f" ({outcome.error})" if outcome.error else ""))
        if outcome.status == CUT:
            left_over.append(f"{step.name} (stopped at the budget)")
            left_over += [later.name for later in steps[steps.index(step) + 1:]
                          if state.get(later.name, {}).get("status") not in DONE]
            break
    return "done" if not left_over else "left for the next call: " + "; ".join(left_over)


def exit_status(state: dict[str, dict[str, Any]], steps: Sequence[Step]) -> int:
    statuses = [state.get(step.name, {}).get("status", PENDING) for step in steps]
    if any(status in (FAILED, BLOCKED) for status in statuses):
        return 1
    return 0 if all(status == PASSED for status in statuses) else 3


# ------------------------------------------------------------------------------------------- the output folder


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# a step's record: field -> (what it must be, the test); a field may also be absent or null
RECORD_FIELDS = {
    "seconds": ("a number", _number),
    "checks": ("a list of checks", lambda value: isinstance(value, list)),
    "figures": ("an object", lambda value: isinstance(value, dict)),
    "error": ("a string", lambda value: isinstance(value, str)),
}
CHECK_FIELDS = {"name": ("a string", lambda value: isinstance(value, str)),
                "ok": ("true or false", lambda value: isinstance(value, bool))}


def _kind(value: Any) -> str:
    return "null" if value is None else f"a {type(value).__name__}"


def read_summary(path: Path) -> dict[str, Any]:
    """A plan summary this command wrote, checked: a JSON object with a backend and a record per step, each field of
    the type this command writes (:data:`RECORD_FIELDS`, :data:`CHECK_FIELDS`; ``device`` a string, ``calls`` a list
    of objects); else :class:`PlanFolderError` naming the file and the field."""
    from verl_ext.files import parse_json, read_bounded

    summary = parse_json(read_bounded(path, MAX_SUMMARY_BYTES, "plan summary", PlanFolderError), path, PlanFolderError)
    if not isinstance(summary, dict) or summary.get("backend") not in BACKENDS or not isinstance(summary.get("steps"), dict):
        raise PlanFolderError(f"{path}: not a plan summary (a JSON object with 'backend' in {BACKENDS} and 'steps')")
    for name, record in summary["steps"].items():
        if not isinstance(record, dict) or record.get("status") not in STATUSES:
            raise PlanFolderError(f"{path}: step {name!r} has no status among {', '.join(STATUSES)}")
        for field_name, (what, fits) in RECORD_FIELDS.items():
            value = record.get(field_name)
            if value is not None and not fits(value):
                raise PlanFolderError(f"{path}: steps.{name}.{field_name} is {_kind(value)}, not {what}")
        for number, check in enumerate(record.get("checks") or []):
            if not isinstance(check, dict):
                raise PlanFolderError(f"{path}: steps.{name}.checks[{number}] is {_kind(check)}, not an object")
            for field_name, (what, fits) in CHECK_FIELDS.items():
                if not fits(check.get(field_name)):
                    raise PlanFolderError(f"{path}: steps.{name}.checks[{number}].{field_name} is "
                                          f"{_kind(check.get(field_name))}, not {what}")
    if "device" in summary and not isinstance(summary["device"], str):
        raise PlanFolderError(f"{path}: device is {_kind(summary['device'])}, not a string")
    calls = summary.get("calls", [])
    if not isinstance(calls, list) or not all(isinstance(call, dict) for call in calls):
        raise PlanFolderError(f"{path}: calls is {_kind(calls)}, not a list of objects")
    return summary


LOSSES_LOG, RUNS = "losses.log", "runs"


def open_folder(out: Path, backend: str) -> dict[str, Any]:
    """The summary to go on from (a new one for a new folder); refuses a folder this command did not write, a link
    (the folder, or one of the files it writes there: the summary, the losses log, the runs folder), a file, a path
    below a file or one that cannot be written, and a plan of the other backend. Runs before anything is built."""
    from verl_ext.files import check_output_place

    out = check_output_place(out, "plan folder", PlanFolderError)
    for name in (SUMMARY, LOSSES_LOG, RUNS):
        if (out / name).is_symlink():
            raise PlanFolderError(f"{out / name}: a symbolic link (to {os.readlink(out / name)}); the plan writes its "
                                  "files itself, never through a link: remove it or give another --out")
    path = out / SUMMARY
    if path.exists():
        summary = read_summary(path)
        if summary["backend"] != backend:
            raise PlanFolderError(f"{path}: a plan of the {summary['backend']} backend; give another --out for {backend}")
        return summary
    if out.exists() and any(out.iterdir()):
        raise PlanFolderError(f"{out}: a folder that holds no {SUMMARY}: not this command's; give a new or empty one")
    return {"backend": backend, "steps": {}, "calls": []}


def write_summary(out: Path, summary: dict[str, Any]) -> None:
    from verl_ext.files import write_whole

    out.mkdir(parents=True, exist_ok=True)
    content = (json.dumps(summary, indent=1, sort_keys=True, default=str) + "\n").encode()
    write_whole(out / SUMMARY, lambda file: file.write(content))


# -------------------------------------------------------------------------------------- the steps, for real


SCHEDULE_STEPS, SAVE_FREQ, TEST_FREQ, RESUME_AT = 7, 2, 3, 4
MAIN_LOSS, RESUMED_LOSS = "rec_oneside_nois", "opmd"


def _algorithm(loss: str) -> tuple[str, ...]:
    return ("algorithm.adv_estimator=rec", f"actor_rollout_ref.actor.policy_loss.loss_mode={loss}")


COMMON = (
    "trainer.v1.trainer_mode=delayed_sync", "trainer.v1.delayed_sync.sync_interval=3",
    "trainer.v1.delayed_sync.sync_offset=1", "trainer.v1.delayed_sync.overlap=true",
    "actor_rollout_ref.rollout.free_cache_engine=false", "trainer.v1.delayed_sync.zero_variance_masking=true",
    "reward.custom_reward_function.path=pkg://verl_ext.tiny.task",
    "reward.custom_reward_function.name=compute_score_odd_constant", f"trainer.test_freq={TEST_FREQ}",
)


def plan_runs(checkpoints: Path):
    """The plan's two ``main_ppo`` runs (module docstring); ``checkpoints``: the main run's, which the resumed reads."""
    from verl_ext.runs.run import Run

    return {
        MAIN: Run("plan_main", steps=SCHEDULE_STEPS, checkpoint_dir=checkpoints,
                  overrides=(*_algorithm(MAIN_LOSS), *COMMON, f"trainer.save_freq={SAVE_FREQ}",
                             "trainer.v1.delayed_sync.mismatch_forward_pass=true")),
        RESUMED: Run("plan_resumed", steps=SCHEDULE_STEPS, checkpoint_dir=checkpoints,
                     overrides=(*_algorithm(RESUMED_LOSS), *COMMON, "trainer.resume_mode=resume_path",
                                f"trainer.resume_from_path={checkpoints / f'global_step_{RESUME_AT}'}")),
    }


def saved_checkpoints(folder: Path) -> list[int]:
    return sorted(int(path.name.rsplit("_", 1)[1]) for path in folder.glob("global_step_*")
                  if path.name.rsplit("_", 1)[1].isdigit())


class Executor:
    """Runs the plan's steps on a backend, into ``out``."""

    def __init__(self, backend: str, out: Path, assets: Path):
        from verl_ext.runs.launch import Outputs

        self.backend, self.out, self.assets = backend, out, assets
        self.runs = plan_runs(out / "checkpoints")
        if backend == "gpu":
            from verl_ext.gpu.backend import GPU_PROJECT, GPUBackend

            self.where, self.outputs = GPUBackend(assets), Outputs(out / RUNS, project=GPU_PROJECT)
        else:
            from verl_ext.cpu.backend import CPUBackend

            self.where, self.outputs = CPUBackend(assets), Outputs(out / RUNS)

    def __call__(self, step: Step, seconds: float) -> Outcome:
        if step.name == LOSSES:
            return self._losses(seconds)
        return self._run(step.name, seconds)

    def _run(self, name: str, seconds: float) -> Outcome:
        from verl_ext import metric_names
        from verl_ext.gpu import plan_checks
        from verl_ext.gpu.smoke_checks import BF16_LAG0_TOLERANCE, FLOAT32_LAG0_TOLERANCE
        from verl_ext.runs.launch import launch
        from verl_ext.staleness.schedule import StalenessSchedule

        from verl_ext.runs.run import RunRefused

        run = self.runs[name]
        try:
            result = launch(run, self.where, self.outputs, timeout=seconds)
        except RunRefused as refused:  # the driver's checks refused the run before anything started
            return Outcome(FAILED, error=f"refused before it started: {refused}")
        steps = result.steps
        first = next((r[metric_names.STEP_SECONDS] for r in steps if metric_names.STEP_SECONDS in r), None)
        startup = result.measurements.startup_seconds(first) if result.measurements else None
        step_times = [r[metric_names.STEP_SECONDS] for r in steps if metric_names.STEP_SECONDS in r]
        figures = {"wall_seconds": round(result.wall_seconds, 1), "startup_seconds": startup,
                   "seconds_per_step_after_the_first": (sum(step_times[1:]) / len(step_times[1:])) if step_times[1:] else None,
                   "peak_gpu_gib": None if result.peak_gpu_mib is None else round(result.peak_gpu_mib / 1024, 2),
                   "log": str(result.log_path), "metrics": str(result.metrics_path)}
        if not result.ok:
            timed_out = result.wall_seconds >= seconds - 1
            return Outcome(CUT if timed_out else FAILED, figures=figures,
                           error=f"{'stopped at the budget' if timed_out else result.error}; log {result.log_path}")
        tolerance = BF16_LAG0_TOLERANCE if self.backend == "gpu" else FLOAT32_LAG0_TOLERANCE
        schedule = StalenessSchedule(sync_interval=3, sync_offset=1)
        if name == MAIN:
            checks = plan_checks.main_run_checks(steps, schedule, SCHEDULE_STEPS, SAVE_FREQ, TEST_FREQ,
                                                 saved_checkpoints(run.checkpoint_dir), tolerance, MAIN_LOSS)
        else:
            main_metrics = self.outputs.paths(self.runs[MAIN]).metrics
            from verl_ext.metrics_file import read_metrics_file

            checks = plan_checks.resumed_run_checks(steps, read_metrics_file(main_metrics).steps, RESUME_AT,
                                                    SCHEDULE_STEPS, RESUMED_LOSS)
        records = [{"name": check.name, "ok": check.ok, "detail": check.detail} for check in checks]
        failed = [check.name for check in checks if not check.ok]
        return Outcome(FAILED if failed else PASSED, records, figures,
                       f"failed: {', '.join(failed)}" if failed else None)

    def _losses(self, seconds: float) -> Outcome:
        repo = Path(__file__).resolve().parents[2]
        if not (repo / "tests" / "gpu" / "test_losses_vs_reference.py").is_file():
            return Outcome(FAILED, error=f"the loss comparison is in the checkout's tests/gpu, not found under {repo}")
        selection = (["tests/gpu", "-m", "gpu", "-k", "reference"] if self.backend == "gpu" else
                     ["tests/gpu/test_losses_vs_reference.py", "-m", "not gpu", "-k", "float32"])
        command = [sys.executable, "-m", "pytest", *selection, "-q", "-p", "no:cacheprovider", "-rs"]
        log = self.out / LOSSES_LOG
        try:
            completed = subprocess.run(command, cwd=repo, capture_output=True, text=True, timeout=seconds)
        except subprocess.TimeoutExpired:
            return Outcome(CUT, error="stopped at the budget", figures={"log": str(log)})
        from verl_ext.files import write_whole

        text = (completed.stdout + completed.stderr).encode("utf-8", "replace")
        write_whole(log, lambda file: file.write(text))  # a new file renamed into place: never through a link
        last = (completed.stdout.strip().splitlines() or [""])[-1]
        check = {"name": "every loss within tolerance of float64" + (" on CUDA" if self.backend == "gpu" else " (CPU)"),
                 "ok": completed.returncode == 0, "detail": last}
        return Outcome(PASSED if completed.returncode == 0 else FAILED, [check], {"log": str(log), "pytest": last},
                       None if completed.returncode == 0 else f"pytest exited {completed.returncode}: {last}")


# -------------------------------------------------------------------------------------------------- command


def _budget(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds (a number in {MARGIN_SECONDS:g}..{MAX_BUDGET}), got {text!r}") from None
    if not MARGIN_SECONDS < value <= MAX_BUDGET:
        raise argparse.ArgumentTypeError(f"expected seconds (a number in {MARGIN_SECONDS:g}..{MAX_BUDGET}), got {text}")
    return value


def print_summary(summary: dict[str, Any]) -> None:
    print(f"\nverl-ext gpu plan ({summary['backend']} backend; {summary.get('device', '?')})")
    for step in STEPS:
        record = summary["steps"].get(step.name, {"status": PENDING})
        seconds = f" {record['seconds']:.0f} s" if record.get("seconds") is not None else ""
        print(f"  {step.name:<8} {record['status']:<8}{seconds}  {step.what}")
        for check in record.get("checks") or []:
            print(f"      [{'ok' if check['ok'] else 'FAIL'}] {check['name']}: {check['detail']}")
        if record.get("error"):
            print(f"      {record['error']}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_ext.gpu.plan", description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=_budget, default=540.0,
                        help="seconds this call may take, results written (default 540: one 10-minute command)")
    parser.add_argument("--out", type=Path, default=Path("outputs") / "gpu_plan",
                        help="the results folder (default outputs/gpu_plan); call again with it to go on")
    parser.add_argument("--backend", choices=BACKENDS, default="gpu",
                        help="gpu: vLLM + FSDP2 on this node's GPU (default); cpu: the rehearsal on the CPU backend")
    parser.add_argument("--dry-run", action="store_true", help="print the steps, estimates and what is done; run nothing")
    args = parser.parse_args(argv)
    out = Path(os.path.abspath(args.out))
    try:
        summary = open_folder(out, args.backend)
    except PlanFolderError as refused:
        print(f"verl-ext gpu plan: error: {refused}", file=sys.stderr)
        return 2
    if args.dry_run:
        for step in STEPS:
            status = summary["steps"].get(step.name, {}).get("status", PENDING)
            print(f"{step.name:<8} ~{step.estimate[args.backend]:>4.0f} s  {status:<8} {step.what}")
        return 0
    if args.backend == "gpu":
        from verl_ext.gpu.device import NO_GPU_HELP, gpu_unavailable_reason

        reason = gpu_unavailable_reason()
        if reason is not None:
            print(f"verl-ext gpu plan: needs a CUDA GPU and vLLM: {reason}. Nothing was started.\n{NO_GPU_HELP}\n"
                  f"  rehearse the plan on the CPU backend: python -m verl_ext.gpu.plan --backend cpu --out DIR",
                  file=sys.stderr)
            return 2
    started = time.monotonic()
    from verl_ext.tiny.assets import AssetsFolderError, build_tiny_assets, default_assets_dir

    size = "gpu" if args.backend == "gpu" else "cpu"
    assets = default_assets_dir(size)
    try:
        build_tiny_assets(assets, size=size)
    except AssetsFolderError as refused:
        print(f"verl-ext gpu plan: error: {refused}", file=sys.stderr)
        return 2
    if args.backend == "gpu":
        from verl_ext.gpu.device import describe_device, format_device

        summary["device"] = format_device(describe_device())
    else:
        summary["device"] = "CPU backend (verl_ext.cpu: transformers rollout, float32)"
    call = {"started": time.strftime("%Y-%m-%dT%H:%M:%S"), "budget": args.budget}
    summary.setdefault("calls", []).append(call)
    write_summary(out, summary)
    executor = Executor(args.backend, out, assets)
    budget_left = args.budget - (time.monotonic() - started)
    try:
        ended = run_plan(STEPS, summary["steps"], args.backend, budget_left, executor, lambda: write_summary(out, summary))
    except KeyboardInterrupt:
        call.update(ended="interrupted", seconds=round(time.monotonic() - started, 1))
        write_summary(out, summary)
        print("verl-ext gpu plan: interrupted; the steps finished so far are in the summary", file=sys.stderr)
        return 130
    call.update(ended=ended, seconds=round(time.monotonic() - started, 1))
    write_summary(out, summary)
    print_summary(summary)
    status = exit_status(summary["steps"], STEPS)
    print(f"\n{out / SUMMARY}: " + {0: "every step passed", 1: "a step failed",
                                   3: "steps left: call again with the same --out"}[status])
    return status


if __name__ == "__main__":
    sys.exit(main())
