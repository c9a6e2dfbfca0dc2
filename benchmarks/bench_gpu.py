"""Benchmark: verl's ``sync`` mode against ``delayed_sync`` on one GPU at the scale users train, and every loss
against verl's ``vanilla`` on CUDA (how to use it, and the one-lease command: docs/gpu.md).

    python3 benchmarks/bench_gpu.py --phases sync:4,delayed_4_1_overlap:12,delayed_4_0:12 --response-length 512 \
        --enforce-eager --profile-update --skip-losses --budget 570                # every mode after one start-up
    python3 benchmarks/bench_gpu.py --modes sync,delayed_4_0 --steps 9 --skip-losses   # one start per mode
    python benchmarks/bench_gpu.py --backend cpu --phases sync:4,delayed_4_1_overlap:12,delayed_4_0:12 --skip-losses

1. Trainer modes, on the same work: the scale assets (``--size``, default ``qwen2.5-0.5b``: Qwen2.5-0.5B's
   dimensions, random weights, a 151,936-id tokenizer; built if missing), the letters task with every response
   ``--response-length`` tokens long (vLLM's ``ignore_eos``), 16 prompts x 4 responses per step, the same prompts in
   every mode (one data seed), REC-OneSide-NoIS, FSDP2 actor and a colocated vLLM in bf16 (the GPU profile,
   :func:`verl_ext.gpu.profile.scale_overrides`), with a user's configuration on a GPU (:data:`USER_CONFIG`).
   Modes (:data:`MODES`): verl's ``sync``; ``delayed_sync`` (4, 0); (4, 1) without and with ``overlap``.
   ``--modes``: one ``main_ppo`` start per mode; ``--phases MODE:STEPS,...``: every mode in one start
   (``trainer.v1.delayed_sync.phases``; ``sync`` is ``delayed_sync`` (1, 0) step for step), each phase reported
   apart over its own window (:func:`phase_figures`). Reported per mode: start-up, ``steps_averaged``, steps/s and
   generated tokens/s over whole sync intervals after the first step (each holds one generation), the actor's MFU
   (verl's ``perf/mfu/actor``), the mean weight-push time, the time per step split as verl logs it (``timing_s/*``),
   the peak GPU memory (``nvidia-smi``; on the CPU backend the peak PSS) and the actor's own peak.
   ``--profile-update`` adds a torch-profiler summary of one update no figure averages.
2. Losses: forward+backward of each loss on the same CUDA tensors in this process (float32), timed with CUDA
   events (median of ``--repeats`` after warm-up), and the peak CUDA memory the pass allocates beyond its
   inputs; as ratios to ``vanilla``. The loss set is ``benchmarks/bench_losses.py``'s.

The result file (``--json``, default ``benchmarks/results/bench_gpu.json``; ``benchmarks/gpu_results.py``) keeps one
record per device, size, response length and commit, never replacing another's. HEADLINE: each mode's steps/s,
tokens/s and MFU, and the ratio of each ``delayed_sync`` mode to ``sync``. Without a CUDA GPU and vLLM
(``--backend gpu``) it prints why and exits 0, writing nothing. ``--backend cpu`` runs the same modes on the CPU
backend with the scale builder's CPU size (``scale-cpu``, 128-token responses, 8 prompts x 4): a rehearsal of the
benchmark, no GPU figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from headline import print_headline  # benchmarks/headline.py (this script's folder is on sys.path)

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from verl_ext import metric_names  # noqa: E402 -- after the checkout is on sys.path

DELAYED = "trainer.v1.trainer_mode=delayed_sync"
MODES = {  # name -> the run's trainer overrides
    "sync": ("trainer.v1.trainer_mode=sync",),
    "delayed_4_0": (DELAYED, "trainer.v1.delayed_sync.sync_interval=4", "trainer.v1.delayed_sync.sync_offset=0"),
    "delayed_4_1": (DELAYED, "trainer.v1.delayed_sync.sync_interval=4", "trainer.v1.delayed_sync.sync_offset=1"),
    "delayed_4_1_overlap": (DELAYED, "trainer.v1.delayed_sync.sync_interval=4", "trainer.v1.delayed_sync.sync_offset=1",
                            "trainer.v1.delayed_sync.overlap=true", "actor_rollout_ref.rollout.free_cache_engine=false"),
}
PHASES = ("gen", "update_weights", "old_log_prob", "ref", "adv", "update_actor", "step")  # verl's timers (the time split)
# what a user's verl run on a GPU uses, where verl 0.9.1 has the key and the kit carries what it needs (each key is
# composed and checked against the installed verl by tests/gpu/test_bench_gpu.py); --plain-config leaves them out
USER_CONFIG = {
    # token-budget micro-batches instead of 8 responses per forward pass: the actor's, and (through verl's
    # oc.select defaults) the rollout's and reference's log-prob passes
    "actor_rollout_ref.actor.use_dynamic_bsz": "True",
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": "16384",
    # verl's fused output layer + log-prob (Triton): no [tokens x 151,936] logits tensor in the update
    "actor_rollout_ref.model.use_fused_kernels": "True",
    # vLLM captures CUDA graphs (verl's default); the GPU profile runs it eager for start-up time
    "actor_rollout_ref.rollout.enforce_eager": "False",
}
# not in USER_CONFIG: actor_rollout_ref.model.use_remove_padding=True patches flash-attn's varlen kernel
# (verl/models/transformers/monkey_patch.py), which the kit does not carry (see docs/gpu.md)
LOSS_SHAPES = ("256x2048", "64x8192")
DEFAULT_SIZE = {"gpu": "qwen2.5-0.5b", "cpu": "scale-cpu"}
DEFAULT_RESPONSE_LENGTH = {"gpu": 1024, "cpu": 128}
TRAIN_BATCH_SIZE = {"gpu": 16, "cpu": 8}
ROLLOUT_N = 4
MODE_TIMEOUT_SECONDS = 20 * 60
BUDGET_MARGIN_SECONDS = 15  # kept from --budget to stop the last run and write the figures
MIN_MODE_SECONDS = 120  # a main_ppo start takes longer than this on any machine: a mode with less is not started
EXIT_STEPS_LEFT = 3  # a mode stopped at --budget before it logged whole sync intervals: call again


def sync_interval(name: str) -> int:
    """Gradient steps between two weight pushes in mode ``name`` (verl's ``sync`` pushes after every step): a
    window of that many consecutive steps holds exactly one generation of the interval's batches."""
    from verl_ext.overrides import override_value

    return int(override_value(MODES[name], "trainer.v1.delayed_sync.sync_interval") or 1)


def mode_setting(name: str) -> tuple[int, int, bool]:
    """(m, n, overlap) of mode ``name``; verl's ``sync`` is (1, 0) (``delayed_sync`` at (1, 0) is it step for step)."""
    from verl_ext.overrides import override_value

    overrides = MODES[name]
    interval = int(override_value(overrides, "trainer.v1.delayed_sync.sync_interval") or 1)
    offset = int(override_value(overrides, "trainer.v1.delayed_sync.sync_offset") or 0)
    overlap = str(override_value(overrides, "trainer.v1.delayed_sync.overlap") or "false").lower() == "true"
    return interval, offset, overlap


PHASED = "phased"  # the name of a --phases run


def parse_phases(text: str) -> list[tuple[str, int]]:
    """``--phases`` (``MODE:STEPS,...``) -> [(mode, steps)]; ValueError naming what is wrong."""
    phases = []
    for part in (piece.strip() for piece in text.split(",")):
        if not part:
            continue
        name, _, count = part.partition(":")
        if name not in MODES:
            raise ValueError(f"unknown mode {name!r}; allowed: {', '.join(MODES)}")
        if not count.isdigit() or int(count) < 1 or int(count) > 10_000:
            raise ValueError(f"{part!r}: the steps of a phase are an integer 1..10000 (MODE:STEPS)")
        phases.append((name, int(count)))
    names = [name for name, _ in phases]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"{', '.join(repeated)} given twice")
    if len(phases) < 2:
        raise ValueError("two phases at least (MODE:STEPS,MODE:STEPS); one mode is --modes")
    return phases


def phased_schedule(phases: list[tuple[str, int]]):
    """The :class:`verl_ext.staleness.schedule.PhasedSchedule` of ``--phases``, checked by the config's own check
    (a ConfigError naming ``trainer.v1.delayed_sync.phases[i]`` and what it allows)."""
    from verl_ext.staleness.config import read_phases
    from verl_ext.staleness.schedule import PhasedSchedule

    return PhasedSchedule(read_phases(phase_entries(phases)))


def phase_entries(phases: list[tuple[str, int]]) -> list[dict]:
    entries, start = [], 0
    for name, count in phases:
        interval, offset, overlap = mode_setting(name)
        entries.append({"start_step": start, "sync_interval": interval, "sync_offset": offset, "overlap": overlap})
        start += count
    return entries


def phase_overrides(phases: list[tuple[str, int]]) -> tuple[str, ...]:
    """The trainer overrides of a --phases run: ``delayed_sync`` with ``trainer.v1.delayed_sync.phases``, and a
    resident engine for the whole run when a phase overlaps (docs/staleness.md#phases)."""
    entries = phase_entries(phases)
    items = ",".join("{" + ",".join(f"{key}:{str(value).lower() if isinstance(value, bool) else value}"
                                    for key, value in entry.items()) + "}" for entry in entries)
    overrides = (DELAYED, f"trainer.v1.delayed_sync.phases=[{items}]")
    if any(entry["overlap"] for entry in entries):
        overrides += ("actor_rollout_ref.rollout.free_cache_engine=false",)
    return overrides


def run_overrides(name: str, phases: list[tuple[str, int]] | None = None) -> tuple[str, ...]:
    return phase_overrides(phases) if name == PHASED else MODES[name]


PROFILE_FOLDER = "profile"


def profile_overrides(run_folder: Path, step: int) -> tuple[str, ...]:
    """verl's torch profiler on the actor for global step ``step`` (one update), traces under ``run_folder``."""
    return ("global_profiler.tool=torch", f"global_profiler.steps=[{step}]",
            f"global_profiler.save_path={run_folder / PROFILE_FOLDER}", "actor_rollout_ref.actor.profiler.enable=True",
            "actor_rollout_ref.actor.profiler.tool_config.torch.contents=[cuda]")


def mode_run(name: str, steps: int, backend: str, response_length: int, phases=None, user_config: bool = False,
             extra: tuple[str, ...] = ()):
    """The run of mode ``name`` (or of the ``--phases``): the same work in every mode (prompts, steps, responses,
    their length); ``user_config`` adds :data:`USER_CONFIG` (GPU only)."""
    from verl_ext.algorithms.presets import parse_algorithm
    from verl_ext.gpu.profile import scale_overrides
    from verl_ext.runs.run import Run

    user = tuple(f"{key}={value}" for key, value in USER_CONFIG.items()) if user_config else ()
    overrides = (*scale_overrides(backend, response_length, TRAIN_BATCH_SIZE[backend], ROLLOUT_N), *user,
                 *run_overrides(name, phases), *extra)
    return Run.from_preset(name, parse_algorithm("rec_oneside_nois"), overrides=overrides, steps=steps, seed=0)


def run_mode(name: str, steps: int, base: Path, assets: Path, backend: str = "gpu",
             response_length: int = DEFAULT_RESPONSE_LENGTH["gpu"], timeout: float = MODE_TIMEOUT_SECONDS,
             phases=None, user_config: bool = False, profile_step: int | None = None, eager: bool = False) -> dict:
    """One ``main_ppo`` start of mode ``name`` and its figures (:func:`mode_figures`); for ``name`` =
    :data:`PHASED`, one start of the ``phases`` and ``{"phases": {mode: figures}}`` (:func:`phase_figures`).
    Stopped after ``timeout`` seconds, it reports the whole sync intervals it logged (``stopped_at_seconds`` set);
    with fewer, it raises :class:`StoppedEarly`."""
    from verl_ext.metrics_file import trained_steps
    from verl_ext.runs.launch import Outputs, launch

    if backend == "gpu":
        from verl_ext.gpu.backend import GPU_PROJECT, GPUBackend

        where, outputs = GPUBackend(assets), Outputs(base, project=GPU_PROJECT)
    else:
        from verl_ext.cpu.backend import CPUBackend

        where, outputs = CPUBackend(assets), Outputs(base)
    extra = ()
    if profile_step is not None:
        extra = profile_overrides(base / name, profile_step)
    if eager:
        extra += ("actor_rollout_ref.rollout.enforce_eager=True",)
    run = mode_run(name, steps, backend, response_length, phases, user_config, extra)
    result = launch(run, where, outputs, timeout=timeout)
    stopped = result.measurements is not None and not result.ok and result.measurements.wall_seconds >= timeout
    if not result.ok and not stopped:
        raise SystemExit(f"{name}: {result.error}; log {result.log_path}")
    trained = trained_steps(result.steps)
    try:
        if name == PHASED:
            figures = phase_figures(trained, phases, TRAIN_BATCH_SIZE[backend] * ROLLOUT_N)
        else:
            figures = mode_figures(trained, TRAIN_BATCH_SIZE[backend] * ROLLOUT_N, sync_interval(name))
    except ValueError as too_few:  # fewer than the first step and one whole sync interval
        if not stopped:
            raise
        raise StoppedEarly(f"{name}: stopped at the budget ({timeout:.0f} s) after {len(trained)} logged steps: "
                           f"{too_few}; log {result.log_path}") from too_few
    if stopped:
        figures["stopped_at_seconds"] = timeout
    measured = result.measurements
    first_step = trained[0][metric_names.STEP_SECONDS]
    figures.update(
        startup_seconds=measured.startup_seconds(first_step),
        peak_gpu_gib=None if result.peak_gpu_mib is None else result.peak_gpu_mib / 1024,
        peak_pss_gib=measured.peak_pss_bytes / 2**30,
        wall_seconds=measured.wall_seconds,
        log=str(result.log_path),
    )
    return figures


class StoppedEarly(RuntimeError):
    """A mode's run reached its time budget before it logged the first step and one whole sync interval."""


def mode_figures(trained: list[dict], responses_per_step: int | None = None, sync_interval: int = 1) -> dict:
    """Step rate, token rate, push time and time split of one run from verl's logged steps.

    The first step is reported apart: it also waits for the workers' start (and verl-ext's ``delayed_sync``
    generates the first interval's batches before it, outside every step's timer). The rest are averaged over
    the steps after it, cut to whole sync intervals (``sync_interval`` steps hold exactly one generation of an
    interval's batches, inside the timer of the step that pushes): fewer steps would leave the generation out,
    more would spread it over more steps than the schedule does. ``steps_averaged`` says how many."""
    if len(trained) < 2:
        raise ValueError(f"a mode needs at least 2 logged training steps, got {len(trained)}")
    whole = (len(trained) - 1) // sync_interval * sync_interval
    if whole == 0:
        raise ValueError(f"a mode with a sync interval of {sync_interval} needs the first step and {sync_interval} "
                         f"more logged, got {len(trained)} steps")
    after_first = trained[1:1 + whole]
    phases = {phase: statistics.fmean(record.get(metric_names.timing(phase), 0.0) for record in after_first) for phase in PHASES}
    pushes = [record[metric_names.timing("update_weights")] for record in trained
              if record.get(metric_names.timing("update_weights"), 0.0) > 0]
    figures = {
        "steps": len(trained),
        "steps_averaged": len(after_first),
        "first_step_seconds": trained[0][metric_names.STEP_SECONDS],
        "seconds_per_step": phases["step"],
        "steps_per_second": 1.0 / phases["step"],
        "phase_seconds": phases,
        "push_seconds": statistics.fmean(pushes) if pushes else None,
        "actor_peak_allocated_gib": max((r.get(metric_names.MAX_MEMORY_ALLOCATED_GB, 0.0) for r in trained), default=None),
    }
    figures.update(window_rates(after_first, responses_per_step))
    return figures


def window_rates(window: list[dict], responses_per_step: int | None) -> dict:
    """Generated tokens per step and per second, and the actor's MFU (verl's ``perf/mfu/actor``, mean over the
    window's steps that logged it), over the averaged steps ``window``."""
    figures: dict = {}
    mfu = [record[MFU_ACTOR] for record in window if isinstance(record.get(MFU_ACTOR), (int, float))]
    figures["actor_mfu"] = statistics.fmean(mfu) if mfu else None
    if responses_per_step is not None:
        tokens = sum(record[metric_names.RESPONSE_LENGTH_MEAN] * responses_per_step for record in window)
        figures["response_tokens_per_step"] = tokens / len(window)
        figures["tokens_per_second"] = tokens / sum(record[metric_names.STEP_SECONDS] for record in window)
    return figures


MFU_ACTOR = metric_names.PERF_PREFIX + "mfu/actor"  # verl/trainer/ppo/v1/trainer_base.py


def phase_figures(trained: list[dict], phases: list[tuple[str, int]], responses_per_step: int | None = None) -> dict:
    """Per phase of a ``--phases`` run, the figures of :func:`mode_figures`, over the phase's window
    (:meth:`verl_ext.staleness.schedule.PhasedSchedule.windows`): its first step apart, then whole sync intervals
    of its own, each with its own generation, the step that ends the phase (it pushes and generates the next
    phase's start-up) left out. A phase whose window was not (wholly) logged is left out; none: ValueError."""
    schedule = phased_schedule(phases)
    by_step = {int(record[metric_names.GLOBAL_STEP]) - 1: record for record in trained}
    total = sum(count for _, count in phases)
    out: dict = {}
    for (name, _), window in zip(phases, schedule.windows(total)):
        interval = schedule.phases[window.phase].schedule.sync_interval
        logged = 0
        for step in window.averaged:  # a run stopped at its budget: the whole intervals it logged
            if step not in by_step:
                break
            logged += 1
        steps = list(window.averaged)[:logged // interval * interval]
        if not steps or window.first not in by_step:
            continue
        averaged = [by_step[step] for step in steps]
        phases_seconds = {phase: statistics.fmean(record.get(metric_names.timing(phase), 0.0) for record in averaged)
                          for phase in PHASES}
        pushes = [record[metric_names.timing("update_weights")] for record in averaged
                  if record.get(metric_names.timing("update_weights"), 0.0) > 0]
        out[name] = {
            "steps": len(steps) + 1,
            "steps_averaged": len(steps),
            "first_step": window.first + 1,  # verl's global step
            "averaged_steps": [steps[0] + 1, steps[-1] + 1],
            "first_step_seconds": by_step[window.first][metric_names.STEP_SECONDS],
            "seconds_per_step": phases_seconds["step"],
            "steps_per_second": 1.0 / phases_seconds["step"],
            "phase_seconds": phases_seconds,
            "push_seconds": statistics.fmean(pushes) if pushes else None,
            "actor_peak_allocated_gib": max((r.get(metric_names.MAX_MEMORY_ALLOCATED_GB, 0.0) for r in averaged), default=None),
            **window_rates(averaged, responses_per_step),
        }
    if not out:
        raise ValueError(f"no phase logged its first step and one whole sync interval ({len(trained)} steps logged)")
    return {"phases": out, "steps": len(trained), "first_step_seconds": trained[0][metric_names.STEP_SECONDS]}


def time_losses(repeats: int) -> dict:
    """{shape: {loss: {"ms": median CUDA-event time, "peak_mib": allocation beyond the inputs}}}."""
    import torch

    from tests.gpu.loss_reference import aggregation, loss_inputs
    from tests.recipe_config import call_registered_loss, loss_config
    from verl_ext.algorithms.registry import POLICY_LOSSES

    names = ["vanilla", *POLICY_LOSSES]
    results: dict = {}
    for shape in LOSS_SHAPES:
        rows, columns = map(int, shape.split("x"))
        tensors = {key: value.to("cuda", torch.float32 if value.is_floating_point() else value.dtype)
                   for key, value in loss_inputs(rows, columns).items()}
        results[shape] = {}
        for name in names:
            config = loss_config(name)

            def one_pass():
                log_prob = tensors["log_prob"].clone().requires_grad_(True)
                loss, _ = call_registered_loss(name, log_prob, tensors["old_log_prob"], tensors["advantages"],
                                               tensors["response_mask"], aggregation(name), config=config,
                                               behaviour_ratio=tensors["behaviour_ratio"])
                loss.backward()

            for _ in range(3):
                one_pass()
            torch.cuda.synchronize()
            baseline = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            one_pass()
            torch.cuda.synchronize()
            peak_mib = (torch.cuda.max_memory_allocated() - baseline) / 2**20
            times = []
            for _ in range(repeats):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                one_pass()
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end))
            results[shape][name] = {"ms": statistics.median(times), "peak_mib": peak_mib}
    return results


def print_modes(modes: dict) -> None:
    print(f"{'mode':<21}{'start-up s':>11}{'s/step':>8}{'steps/s':>9}{'tokens/s':>10}{'push s':>8}"
          + "".join(f"{p:>15}" for p in PHASES[:-1]) + f"{'peak GiB':>10}{'actor GiB':>11}{'actor MFU':>10}")
    for name in MODES:
        if name in modes:
            m = modes[name]
            nan = float("nan")
            peak = m.get("peak_gpu_gib") or m.get("peak_pss_gib") or nan
            print(f"{name:<21}{m.get('startup_seconds') or nan:>11.0f}{m['seconds_per_step']:>8.2f}{m['steps_per_second']:>9.3f}"
                  f"{m.get('tokens_per_second') or nan:>10.0f}{m.get('push_seconds') or nan:>8.2f}"
                  + "".join(f"{m['phase_seconds'][p]:>15.3f}" for p in PHASES[:-1])
                  + f"{peak:>10.1f}{m['actor_peak_allocated_gib'] or nan:>11.2f}"
                  + f"{100 * (nan if m.get('actor_mfu') is None else m['actor_mfu']):>9.1f}%")


def loss_ratios(losses: dict) -> tuple[list[float], list[float]]:
    time_ratios, memory_ratios = [], []
    for shape, rows in losses.items():
        base = rows["vanilla"]
        for name, row in rows.items():
            if name == "vanilla":
                continue
            time_ratios.append(row["ms"] / base["ms"])
            if base["peak_mib"] > 0:
                memory_ratios.append(row["peak_mib"] / base["peak_mib"])
    return time_ratios, memory_ratios


def print_losses(losses: dict) -> None:
    print(f"{'loss':<18}{'shape':>10}{'ms':>9}{'x vanilla':>11}{'peak MiB':>10}{'x vanilla':>11}")
    for shape, rows in losses.items():
        base = rows["vanilla"]
        for name, row in rows.items():
            memory = row["peak_mib"] / base["peak_mib"] if base["peak_mib"] > 0 else float("nan")
            print(f"{name:<18}{shape:>10}{row['ms']:>9.3f}{row['ms'] / base['ms']:>11.2f}{row['peak_mib']:>10.1f}{memory:>11.2f}")


def headline(record: dict) -> dict[str, str]:
    figures = {"device": record["device_line"], "assets": record.get("size", "?")}
    modes = record.get("modes", {})
    for name in MODES:
        if name in modes:
            mode = modes[name]
            stopped = f", stopped at {mode['stopped_at_seconds']:.0f} s" if mode.get("stopped_at_seconds") else ""
            figures[f"{name} steps/s"] = f"{mode['steps_per_second']:.3f} ({mode.get('steps_averaged', '?')} steps{stopped})"
            if mode.get("tokens_per_second"):
                figures[f"{name} generated tokens/s"] = f"{mode['tokens_per_second']:.0f}"
            if mode.get("actor_mfu") is not None:
                figures[f"{name} actor MFU"] = f"{100 * mode['actor_mfu']:.1f}%"
    if "sync" in modes:
        for name in MODES:
            if name != "sync" and name in modes:
                figures[f"{name} / sync, steps/s"] = f"{modes[name]['steps_per_second'] / modes['sync']['steps_per_second']:.2f}x"
    startups = [m["startup_seconds"] for m in modes.values() if m.get("startup_seconds") is not None]
    if startups:
        figures["start-up s (launch to step 1)"] = f"{min(startups):.0f}-{max(startups):.0f}"
    peaks = [m["peak_gpu_gib"] for m in modes.values() if m.get("peak_gpu_gib") is not None]
    if peaks:
        figures["peak GPU memory GiB"] = f"{max(peaks):.1f}"
    if record.get("losses"):
        time_ratios, memory_ratios = loss_ratios(record["losses"])
        figures["losses on CUDA, time x vanilla"] = f"{min(time_ratios):.2f}-{max(time_ratios):.2f}"
        if memory_ratios:
            figures["losses on CUDA, peak memory x vanilla"] = f"{min(memory_ratios):.2f}-{max(memory_ratios):.2f}"
    return figures


def git_commit() -> str | None:
    """The checkout's commit, ``+dirty`` when the tree has changes (None outside a git checkout)."""
    import subprocess

    try:
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                                text=True, timeout=30, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "") if commit else None


DEFAULT_JSON = {"gpu": REPO / "benchmarks" / "results" / "bench_gpu.json",  # the kept results (committed)
                "cpu": REPO / "outputs" / "bench_gpu_cpu.json"}  # a rehearsal is no result


def profile_summary(folder: Path, top: int = 15) -> dict:
    """The torch profiler's traces under ``folder`` (Chrome trace JSON, ``.json`` or ``.json.gz``) summed by
    kernel: the ``top`` kernels by total device time, each with its share, and the update's own annotated ranges
    (verl's ``update_actor`` and friends, CPU-side)."""
    import gzip

    kernels: dict[str, float] = {}
    ranges: dict[str, float] = {}
    traces = sorted(p for p in folder.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz")))
    for trace in traces:
        opener = gzip.open if trace.name.endswith(".gz") else open
        with opener(trace, "rt") as file:
            try:
                events = json.load(file)
            except ValueError:
                continue
        events = events.get("traceEvents", []) if isinstance(events, dict) else events
        for event in events if isinstance(events, list) else []:
            if not isinstance(event, dict) or event.get("ph") != "X" or not isinstance(event.get("dur"), (int, float)):
                continue
            category = str(event.get("cat", ""))
            if category == "kernel":
                kernels[event.get("name", "?")] = kernels.get(event.get("name", "?"), 0.0) + event["dur"] / 1e6
            elif category == "user_annotation":
                ranges[event.get("name", "?")] = ranges.get(event.get("name", "?"), 0.0) + event["dur"] / 1e6
    total = sum(kernels.values())
    ranked = sorted(kernels.items(), key=lambda item: -item[1])[:top]
    return {
        "traces": [str(trace) for trace in traces],
        "kernel_seconds": total,
        "top_kernels": [{"name": name, "seconds": seconds, "share": seconds / total if total else None}
                        for name, seconds in ranked],
        "annotated_seconds": dict(sorted(ranges.items(), key=lambda item: -item[1])[:top]),
    }


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not >= 1")
    return value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("gpu", "cpu"), default="gpu",
                        help="gpu (default); cpu: the rehearsal on the CPU backend (scale-cpu assets, no GPU figure)")
    parser.add_argument("--size", default=None, help="the assets (verl-ext tiny-assets --size; default qwen2.5-0.5b "
                                                     "on gpu, scale-cpu on cpu)")
    parser.add_argument("--steps", type=positive_int, default=5, help="training steps per mode (default 5: the first, "
                        "then whole sync intervals of every mode: 1 + a multiple of 4)")
    parser.add_argument("--response-length", type=positive_int, default=None,
                        help="tokens per response (default 1024 on gpu, 128 on cpu)")
    parser.add_argument("--modes", default=None, help=f"comma-separated subset of {', '.join(MODES)} ('' for none); "
                        "one main_ppo start each (default sync,delayed_4_0)")
    parser.add_argument("--phases", default=None, help="MODE:STEPS,MODE:STEPS,...: every mode in ONE main_ppo start, "
                        "each from the step after the one before (trainer.v1.delayed_sync.phases), reported apart; "
                        "instead of --modes and --steps")
    parser.add_argument("--plain-config", action="store_true", help="leave out the user configuration (dynamic "
                        "batch sizes, fused kernels, vLLM CUDA graphs): the GPU profile's small-run settings")
    parser.add_argument("--enforce-eager", action="store_true", help="the user configuration with vLLM eager (no "
                        "CUDA-graph capture: a shorter start-up, slower small-batch decoding)")
    parser.add_argument("--profile-update", action="store_true", help="GPU only: verl's torch profiler around one "
                        "actor update that no figure averages (a --phases run: the last step of the first phase, "
                        "which starts the next; else the second step); a kernel summary goes into the result")
    parser.add_argument("--skip-losses", action="store_true")
    parser.add_argument("--repeats", type=positive_int, default=50, help="timed loss passes per loss and shape (median)")
    parser.add_argument("--json", type=Path, default=None, help="the results file: this command's record is merged "
                        "into it, records of other devices, sizes, lengths or commits kept beside (default "
                        "benchmarks/results/bench_gpu.json on gpu, outputs/bench_gpu_cpu.json on cpu)")
    parser.add_argument("--out", type=Path, default=None, help="run folder (default: a temporary one)")
    parser.add_argument("--budget", type=float, default=None, help="seconds for this command: each mode's run is "
                        "stopped at what is left and reports the whole sync intervals it logged; a mode that cannot "
                        "start or logs too little is left for another call (exit 3)")
    args = parser.parse_args()
    started = time.perf_counter()
    from verl_ext.tiny.sizes import SIZES

    size = args.size or DEFAULT_SIZE[args.backend]
    response_length = args.response_length if args.response_length is not None else DEFAULT_RESPONSE_LENGTH[args.backend]
    phases = None
    if args.phases is not None:
        if args.modes is not None:
            parser.error("--phases runs its modes in one start: give --phases or --modes, not both")
        try:
            phases = parse_phases(args.phases)
            phased_schedule(phases)
        except ValueError as error:
            parser.error(f"--phases {args.phases}: {error}")
        empty = [name for (name, _), window in zip(phases, phased_schedule(phases).windows(sum(c for _, c in phases)))
                 if not window.averaged]
        if empty:
            parser.error(f"--phases {args.phases}: {', '.join(empty)} would average no whole sync interval (a phase "
                         "needs its first step, whole intervals whose generations stay inside it, and, before "
                         "another phase, the step that starts the next one): give it more steps")
        modes = [PHASED]
        steps = sum(count for _, count in phases)
    else:
        modes = [name.strip() for name in (args.modes if args.modes is not None else "sync,delayed_4_0").split(",")
                 if name.strip()]
        if args.modes is not None and args.modes.strip() and not modes:
            parser.error(f"--modes {args.modes!r} names no mode; allowed: {', '.join(MODES)} ('' for none)")
        unknown = sorted(set(modes) - set(MODES))
        if unknown:
            parser.error(f"--modes: unknown {', '.join(unknown)}; allowed: {', '.join(MODES)}")
        repeated = sorted({name for name in modes if modes.count(name) > 1})
        if repeated:
            parser.error(f"--modes: {', '.join(repeated)} given twice")
        steps = args.steps
        if steps < 2:
            parser.error("--steps must be >= 2 (the first step is reported apart)")
        for name in modes:
            interval = sync_interval(name)
            if (steps - 1) % interval:
                parser.error(f"--steps {steps}: the steps after the first must be whole sync intervals of {name} "
                             f"({interval} steps), e.g. {', '.join(str(1 + interval * k) for k in (1, 2, 3))}")
    if size not in SIZES:
        parser.error(f"--size {size}: allowed {', '.join(SIZES)}")
    if args.budget is not None and not (args.budget > BUDGET_MARGIN_SECONDS and args.budget < 10**7):
        parser.error(f"--budget must be more than {BUDGET_MARGIN_SECONDS} seconds")
    if not 1 <= response_length <= SIZES[size].model.max_position_embeddings - 64:
        parser.error(f"--response-length must be in 1..{SIZES[size].model.max_position_embeddings - 64} for {size}")
    if args.backend == "cpu" and not args.skip_losses:
        parser.error("--backend cpu times no loss on CUDA: add --skip-losses (bench_losses.py times them on CPU)")
    if args.backend == "cpu" and args.profile_update:
        parser.error("--profile-update profiles the update on a GPU (CUDA kernels); the CPU backend has none")
    if args.profile_update and steps < 2:
        parser.error("--profile-update profiles the second step's update: give 2 steps or more")
    json_path = args.json if args.json is not None else DEFAULT_JSON[args.backend]
    if args.json is None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
    from gpu_results import ResultsFileError, check_target, load_records, merge_record, save_records

    try:
        check_target(json_path)
    except ResultsFileError as error:
        print(f"error: --json {error}", file=sys.stderr)
        return 2
    # the user configuration on both backends: the CPU rehearsal runs its actor keys (dynamic batch sizes, verl's
    # fused kernels with their default torch implementation); the CPU rollout has no CUDA graphs to capture
    user_config = not args.plain_config
    if args.enforce_eager and not user_config:
        parser.error("--enforce-eager changes the user configuration (without --plain-config)")
    profile_step = None
    if args.profile_update:  # 1-based global step
        profile_step = phases[0][1] if phases else 2  # a phased run: its first phase's last step (global step)

    from verl_ext.gpu.device import describe_device, format_device, gpu_unavailable_reason

    if args.backend == "gpu":
        reason = gpu_unavailable_reason()
        if reason is not None:
            print(f"bench_gpu: skipped -- needs a CUDA GPU and vLLM: {reason} (nothing written)")
            print_headline({"status": f"skipped: {reason}"})
            return 0
        device = describe_device()
        device_line = format_device(device)
    else:
        device = {"gpu": None, "backend": "cpu"}
        device_line = "CPU backend (rehearsal: no GPU figure)"
    record = {"device": device, "device_line": device_line, "commit": git_commit(), "size": size,
              "response_length": response_length,
              "config": "user" if user_config else "plain",
              "user_config": [f"{key}={value}" for key, value in USER_CONFIG.items()] if user_config else []}
    print(f"device: {device_line}; assets {size}, {response_length}-token responses; results {json_path}", flush=True)

    def save() -> None:
        save_records(json_path, merge_record(load_records(json_path), record))

    left: list[str] = []  # modes left for another call (--budget)
    if modes:
        from verl_ext.tiny.assets import build_tiny_assets, default_assets_dir

        assets = default_assets_dir(size)
        build_tiny_assets(assets, size=size)
        base = args.out or Path(tempfile.mkdtemp(prefix="bench_gpu_"))
        for name in modes:
            timeout = MODE_TIMEOUT_SECONDS
            if args.budget is not None:
                timeout = min(timeout, args.budget - BUDGET_MARGIN_SECONDS - (time.perf_counter() - started))
            if timeout < MIN_MODE_SECONDS:
                left.append(name)
                continue
            print(f"  running {name if phases is None else args.phases} for {steps} steps (stopped after "
                  f"{timeout:.0f} s) ...", flush=True)
            try:
                figures = run_mode(name, steps, base, assets, args.backend, response_length, timeout, phases=phases,
                                   user_config=user_config, profile_step=profile_step,
                                   eager=args.enforce_eager)
            except StoppedEarly as stopped:
                print(f"  {stopped}", flush=True)
                left.append(name)
                continue
            if args.profile_update:
                record["profile"] = {"global_step": profile_step, **profile_summary(base / name / PROFILE_FOLDER)}
            if name == PHASED:
                shared = {key: value for key, value in figures.items() if key not in ("phases", "steps")}
                for phase, phase_figures_ in figures["phases"].items():
                    record.setdefault("modes", {})[phase] = {**phase_figures_, **shared, "run": "phased",
                                                             "phases_asked": args.phases,
                                                             "first_step_seconds": phase_figures_["first_step_seconds"]}
                left += [phase for phase, _ in phases if phase not in figures["phases"]]
            else:
                record.setdefault("modes", {})[name] = {**figures, "steps_asked": steps}
            save()
    if not args.skip_losses:
        record["losses"] = time_losses(args.repeats)
    if record.get("modes") or record.get("losses"):
        save()

    if record.get("modes"):
        print(f"\ntrainer modes ({size}, {response_length}-token responses, REC-OneSide-NoIS, "
              f"{'phases ' + args.phases if phases else f'{steps} steps each'}; phases: mean s per step after the "
              "first, whole sync intervals)")
        print_modes(record["modes"])
    if record.get("profile"):
        print(f"\nthe update of step {record['profile']['global_step']}, torch profiler: top kernels by device time")
        for row in record["profile"]["top_kernels"]:
            print(f"  {row['seconds']:8.3f} s {100 * (row['share'] or 0):5.1f}%  {row['name'][:100]}")
    if record.get("losses"):
        print("\nlosses on CUDA, float32, forward+backward (CUDA events, median)")
        print_losses(record["losses"])
    print(f"\nall figures on: {record['device_line']}; written to {json_path}")
    figures = headline(record)
    if left:
        figures["left for another call"] = ", ".join(left)
        print(f"left for another call (--budget {args.budget or 0:.0f} s): {', '.join(left)}")
    print_headline(figures)
    return EXIT_STEPS_LEFT if left else 0


if __name__ == "__main__":
    sys.exit(main())
