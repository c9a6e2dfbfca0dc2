"""Benchmark: verl's ``sync`` mode against ``delayed_sync`` on one GPU at the scale users train, and every loss
against verl's ``vanilla`` on CUDA.

    python3 benchmarks/bench_gpu.py --modes sync --json outputs/bench_gpu.json --skip-losses           # one start
    python3 benchmarks/bench_gpu.py --modes delayed_4_0 --json outputs/bench_gpu.json --skip-losses    # the next
    python3 benchmarks/bench_gpu.py --modes sync --steps 3 --response-length 512 --budget 370 ...      # in a lease
    python benchmarks/bench_gpu.py --backend cpu --modes sync,delayed_4_0 --skip-losses               # rehearsal

1. Trainer modes, on the same work: the scale assets (``--size``, default ``qwen2.5-0.5b``: Qwen2.5-0.5B's
   dimensions, random weights, a 151,936-id tokenizer; ``verl-ext tiny-assets --size ...``, built if missing), the
   letters task with every response ``--response-length`` tokens long (vLLM's ``ignore_eos``), 16 prompts x 4
   responses per step, the same prompts in every mode (one data seed), REC-OneSide-NoIS, FSDP2 actor and a
   colocated vLLM in bf16 (the GPU profile, :func:`verl_ext.gpu.profile.scale_overrides`). Modes (:data:`MODES`):
   verl's ``sync``; ``delayed_sync`` (4, 0); (4, 1) without and with ``overlap`` (a resident engine generating
   the next batches while the actor trains; overlap needs n >= 1). One ``main_ppo`` start per mode, each a
   child process: ``--modes`` picks them, ``--json FILE`` merges the figures of several commands (a file from
   another device or size is started afresh), ``--budget SECONDS`` stops a command's last run in time and keeps
   the whole sync intervals it logged (a mode with too few is left for another call: exit 3). Measured on an
   H200 at 1,024 tokens (docs/gpu.md): start-up ~3-3.5 min, ``sync`` ~37 s a step, so one mode per command and
   the two modes need ``--response-length 512`` to fit one 15-minute lease after the kit. Reported per mode:
   start-up (launch to the training loop), steps/s and generated tokens/s over the steps after the first, cut
   to whole sync intervals (each holds one generation: :func:`mode_figures`), the mean weight-push
   time (``timing_s/update_weights`` of the steps that pushed), the time per step split as verl logs it
   (``timing_s/*``: ``gen`` -- generation, with the engine's wake-up and sleep in ``sync`` mode;
   ``update_weights``; ``old_log_prob``; ``ref``; ``adv``; ``update_actor``; averaged over the same steps, so a
   push and its interval's generation every m steps count 1/m), the peak GPU memory of all processes (``nvidia-smi``; on the
   CPU backend the peak PSS) and the actor's own peak (verl's ``actor/perf/max_memory_allocated_gb``).
2. Losses: forward+backward of each loss on the same CUDA tensors in this process (float32), timed with CUDA
   events (median of ``--repeats`` after warm-up), and the peak CUDA memory the pass allocates beyond its
   inputs; as ratios to ``vanilla``. The loss set is ``benchmarks/bench_losses.py``'s.

HEADLINE: each mode's steps/s and tokens/s, and the ratio of each ``delayed_sync`` mode to ``sync``. Every
figure is printed with the GPU model, driver and versions. Without a CUDA GPU and vLLM (``--backend gpu``) it
prints why and exits 0 (skipped). ``--backend cpu`` runs the same modes on the CPU backend with the scale
builder's CPU size (``scale-cpu``, 128-token responses, 8 prompts x 4; the CPU rollout has no ``ignore_eos``, and
a random model over 4,096 ids rarely ends a response early): a rehearsal of the benchmark, no GPU figure.
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
PHASES = ("gen", "update_weights", "old_log_prob", "ref", "adv", "update_actor", "step")
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


def mode_run(name: str, steps: int, backend: str, response_length: int):
    """The run of mode ``name``: the same work in every mode (prompts, steps, responses, their length)."""
    from verl_ext.algorithms.presets import parse_algorithm
    from verl_ext.gpu.profile import scale_overrides
    from verl_ext.runs.run import Run

    overrides = (*scale_overrides(backend, response_length, TRAIN_BATCH_SIZE[backend], ROLLOUT_N), *MODES[name])
    return Run.from_preset(name, parse_algorithm("rec_oneside_nois"), overrides=overrides, steps=steps, seed=0)


def run_mode(name: str, steps: int, base: Path, assets: Path, backend: str = "gpu",
             response_length: int = DEFAULT_RESPONSE_LENGTH["gpu"], timeout: float = MODE_TIMEOUT_SECONDS) -> dict:
    """One ``main_ppo`` start of mode ``name`` and its figures (:func:`mode_figures`). Stopped after ``timeout``
    seconds, it reports the whole sync intervals it logged (``stopped_at_seconds`` set); with fewer, it raises
    :class:`StoppedEarly`."""
    from verl_ext.metrics_file import trained_steps
    from verl_ext.runs.launch import Outputs, launch

    if backend == "gpu":
        from verl_ext.gpu.backend import GPU_PROJECT, GPUBackend

        where, outputs = GPUBackend(assets), Outputs(base, project=GPU_PROJECT)
    else:
        from verl_ext.cpu.backend import CPUBackend

        where, outputs = CPUBackend(assets), Outputs(base)
    result = launch(mode_run(name, steps, backend, response_length), where, outputs, timeout=timeout)
    stopped = result.measurements is not None and not result.ok and result.measurements.wall_seconds >= timeout
    if not result.ok and not stopped:
        raise SystemExit(f"{name}: {result.error}; log {result.log_path}")
    trained = trained_steps(result.steps)
    try:
        figures = mode_figures(trained, TRAIN_BATCH_SIZE[backend] * ROLLOUT_N, sync_interval(name))
    except ValueError as too_few:  # fewer than the first step and one whole sync interval
        if not stopped:
            raise
        raise StoppedEarly(f"{name}: stopped at the budget ({timeout:.0f} s) after {len(trained)} logged steps: "
                           f"{too_few}; log {result.log_path}") from too_few
    if stopped:
        figures["stopped_at_seconds"] = timeout
    measured = result.measurements
    figures.update(
        startup_seconds=measured.startup_seconds(figures["first_step_seconds"]),
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
    if responses_per_step is not None:
        tokens = sum(record[metric_names.RESPONSE_LENGTH_MEAN] * responses_per_step for record in after_first)
        figures["response_tokens_per_step"] = tokens / len(after_first)
        figures["tokens_per_second"] = tokens / sum(record[metric_names.STEP_SECONDS] for record in after_first)
    return figures


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
          + "".join(f"{p:>15}" for p in PHASES[:-1]) + f"{'peak GiB':>10}{'actor GiB':>11}")
    for name in MODES:
        if name in modes:
            m = modes[name]
            nan = float("nan")
            peak = m.get("peak_gpu_gib") or m.get("peak_pss_gib") or nan
            print(f"{name:<21}{m['startup_seconds'] or nan:>11.0f}{m['seconds_per_step']:>8.2f}{m['steps_per_second']:>9.3f}"
                  f"{m.get('tokens_per_second') or nan:>10.0f}{m.get('push_seconds') or nan:>8.2f}"
                  + "".join(f"{m['phase_seconds'][p]:>15.3f}" for p in PHASES[:-1])
                  + f"{peak:>10.1f}{m['actor_peak_allocated_gib'] or nan:>11.2f}")


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


def save_record(path: Path, record: dict) -> None:
    """The figures so far, whole or not at all (a command stopped while writing keeps the previous file)."""
    from verl_ext.files import write_whole

    write_whole(path, lambda file: file.write((json.dumps(record, indent=1) + "\n").encode()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("gpu", "cpu"), default="gpu",
                        help="gpu (default); cpu: the rehearsal on the CPU backend (scale-cpu assets, no GPU figure)")
    parser.add_argument("--size", default=None, help="the assets (verl-ext tiny-assets --size; default qwen2.5-0.5b "
                                                     "on gpu, scale-cpu on cpu)")
    parser.add_argument("--steps", type=int, default=5, help="training steps per mode (default 5: the first, then "
                        "whole sync intervals of every mode: 1 + a multiple of 4)")
    parser.add_argument("--response-length", type=int, default=None, help="tokens per response (default 1024 on gpu, 128 on cpu)")
    parser.add_argument("--modes", default="sync,delayed_4_0", help=f"comma-separated subset of {', '.join(MODES)} ('' for none)")
    parser.add_argument("--skip-losses", action="store_true")
    parser.add_argument("--repeats", type=int, default=50, help="timed loss passes per loss and shape (median)")
    parser.add_argument("--json", type=Path, help="merge the figures into this JSON file (kept between commands)")
    parser.add_argument("--out", type=Path, default=None, help="run folder (default: a temporary one)")
    parser.add_argument("--budget", type=float, default=None, help="seconds for this command: each mode's run is "
                        "stopped at what is left and reports the whole sync intervals it logged; a mode that cannot "
                        "start or logs too little is left for another call (exit 3)")
    args = parser.parse_args()
    started = time.perf_counter()
    from verl_ext.tiny.sizes import SIZES

    size = args.size or DEFAULT_SIZE[args.backend]
    response_length = args.response_length or DEFAULT_RESPONSE_LENGTH[args.backend]
    modes = [name.strip() for name in args.modes.split(",") if name.strip()]
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        parser.error(f"--modes: unknown {', '.join(unknown)}; allowed: {', '.join(MODES)}")
    if size not in SIZES:
        parser.error(f"--size {size}: allowed {', '.join(SIZES)}")
    if args.steps < 2:
        parser.error("--steps must be >= 2 (the first step is reported apart)")
    for name in modes:
        interval = sync_interval(name)
        if (args.steps - 1) % interval:
            parser.error(f"--steps {args.steps}: the steps after the first must be whole sync intervals of {name} "
                         f"({interval} steps), e.g. {', '.join(str(1 + interval * k) for k in (1, 2, 3))}")
    if args.budget is not None and not args.budget > BUDGET_MARGIN_SECONDS:
        parser.error(f"--budget must be more than {BUDGET_MARGIN_SECONDS} seconds")
    if not 1 <= response_length <= SIZES[size].model.max_position_embeddings - 64:
        parser.error(f"--response-length must be in 1..{SIZES[size].model.max_position_embeddings - 64} for {size}")
    if args.backend == "cpu" and not args.skip_losses:
        parser.error("--backend cpu times no loss on CUDA: add --skip-losses (bench_losses.py times them on CPU)")

    from verl_ext.gpu.device import describe_device, format_device, gpu_unavailable_reason

    if args.backend == "gpu":
        reason = gpu_unavailable_reason()
        if reason is not None:
            print(f"bench_gpu: skipped -- needs a CUDA GPU and vLLM: {reason}")
            print_headline({"status": f"skipped: {reason}"})
            return 0
        device = describe_device()
        device_line = format_device(device)
    else:
        device = {"gpu": None, "backend": "cpu"}
        device_line = "CPU backend (rehearsal: no GPU figure)"
    record = json.loads(args.json.read_text()) if args.json and args.json.is_file() else {}
    if (record.get("device"), record.get("size"), record.get("response_length")) not in (
            (None, None, None), (device, size, response_length)):
        print(f"bench_gpu: {args.json} holds figures from another device, size or length: starting afresh")
        record = {}
    record.update(device=device, device_line=device_line, size=size, response_length=response_length)
    print(f"device: {device_line}; assets {size}, {response_length}-token responses", flush=True)

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
            print(f"  running {name} for {args.steps} steps (stopped after {timeout:.0f} s) ...", flush=True)
            try:
                figures = run_mode(name, args.steps, base, assets, args.backend, response_length, timeout)
            except StoppedEarly as stopped:
                print(f"  {stopped}", flush=True)
                left.append(name)
                continue
            record.setdefault("modes", {})[name] = {**figures, "steps_asked": args.steps}
            if args.json:
                save_record(args.json, record)
    if not args.skip_losses:
        record["losses"] = time_losses(args.repeats)
    if args.json:
        save_record(args.json, record)

    if record.get("modes"):
        print(f"\ntrainer modes ({size}, {response_length}-token responses, REC-OneSide-NoIS, {args.steps} steps each; "
              "phases: mean s per step after the first, whole sync intervals)")
        print_modes(record["modes"])
    if record.get("losses"):
        print("\nlosses on CUDA, float32, forward+backward (CUDA events, median)")
        print_losses(record["losses"])
    print(f"\nall figures on: {record['device_line']}")
    figures = headline(record)
    if left:
        figures["left for another call"] = ", ".join(left)
        print(f"left for another call (--budget {args.budget:.0f} s): {', '.join(left)}")
    print_headline(figures)
    return EXIT_STEPS_LEFT if left else 0


if __name__ == "__main__":
    sys.exit(main())
