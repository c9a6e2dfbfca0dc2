"""Benchmark: the CPU backend -- the quickstart's start-up, steps per second and peak memory, the cost of a
run inside a shared Ray session, and the rollout's batched generation.

    python benchmarks/bench_cpu_backend.py [--steps 60] [--session-runs 2] [--skip-quickstart] [--skip-session]

1. quickstart: ``python -m verl.trainer.main_ppo`` in a child process, exactly as
   ``bash run_scripts/cpu/quickstart.sh`` runs it (REC-OneSide-NoIS, ``--steps`` steps): start-up (launch to
   the training loop), first step, steady seconds per step, teardown, wall time, peak PSS and RSS of the
   whole process tree, reward at the start and end (:mod:`verl_ext.runs.monitor`).
2. session: ``--session-runs`` runs of 2 steps in one :class:`verl_ext.cpu.ray_session.CPURaySession`
   (what the e2e tests do): Ray start-up once, then the wall time of each run.
3. generation: the CPU rollout's ``generate()`` of a fixed shape (at most 12 new tokens, the untrained model's
   own stopping, one seed per request, prompts padded as the rollout pads them) for 1, 8 and 32 requests in
   the default 32 rows (bit-exact whatever shares the batch), 32 requests one at a time in 32 rows each,
   and for comparison 1 request and 32 one at a time in a batch of one row (the previous default,
   ``max_batch_size=1``), in-process, in CPU time of the process (fastest of 7, so that other load disturbs
   it little); and the weight checksum of the model.

Figures depend on the machine and on other load: the docs record them with the machine they came from.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from headline import print_headline  # benchmarks/headline.py (this script's folder is on sys.path)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's verl_ext
from verl_ext.checks.arguments import positive_int  # noqa: E402 -- the shared option checks

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def machine() -> str:
    import psutil

    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    return (
        f"{platform.machine()}, {psutil.cpu_count(logical=True)} logical CPUs, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB; load average at start {load}"
    )


def bench_quickstart(steps: int, assets: Path, out: Path) -> dict:
    from verl_ext.cpu.quickstart import run_quickstart

    result, summary = run_quickstart(steps=steps, out=out, assets=assets, echo=False)
    if summary is None:
        raise SystemExit(f"quickstart failed: {result.error}; log {result.log_path}")
    return summary


def bench_session(runs: int, assets: Path, out: Path) -> dict:
    from verl_ext.cpu.ray_session import CPURaySession
    from verl_ext.runs.run import Run

    started = time.perf_counter()
    walls = []
    with CPURaySession(out, assets) as session:
        ray_started = time.perf_counter() - started
        for index in range(runs):
            result = session.run(Run(f"session_{index}", steps=2)).raise_for_error()
            walls.append(result.wall_seconds)
    return {"ray_start_seconds": ray_started, "run_wall_seconds": walls, "total_seconds": time.perf_counter() - started}


def bench_generation(assets: Path) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from verl_ext.cpu_runtime.generation import SamplingRequest, generate_batch_with_log_probs, prompt_width
    from verl_ext.cpu.profile import DEFAULTS
    from verl_ext.cpu_runtime.rollout_server import DEFAULT_MAX_BATCH_SIZE
    from verl_ext.cpu_runtime.weight_checksum import weight_checksum

    torch.set_num_threads(1)
    tokenizer = AutoTokenizer.from_pretrained(str(assets / "model"))
    model = AutoModelForCausalLM.from_pretrained(str(assets / "model"), dtype=torch.float32).eval()
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "count 3"}], add_generation_prompt=True, tokenize=True)[
        "input_ids"
    ]
    width = prompt_width(len(prompt), DEFAULTS["max_prompt_length"])
    figures = {}
    eos = [tokenizer.eos_token_id, tokenizer.pad_token_id]

    def generate(batch: list[SamplingRequest], rows: int = DEFAULT_MAX_BATCH_SIZE):
        return generate_batch_with_log_probs(
            model, [prompt] * len(batch), batch, eos_token_ids=eos, pad_token_id=tokenizer.pad_token_id, rows=rows,
            width=width,
        )

    def measure(name: str, work, repeats: int) -> None:
        times, tokens = [], []
        for _ in range(repeats):
            start = time.process_time()
            results = work()
            times.append(time.process_time() - start)
            tokens.append(sum(len(result.token_ids) for result in results))
        figures[f"{name}_cpu_seconds"] = min(times)
        figures[f"{name}_tokens_per_cpu_second"] = statistics.mean(tokens) / min(times)

    requests = [SamplingRequest(max_new_tokens=12, seed=seed) for seed in range(32)]
    for batch in (1, 8, 32):
        measure(f"batch_{batch}", lambda: generate(requests[:batch]), 7)
    measure("alone_32", lambda: [generate([request])[0] for request in requests], 3)
    measure("one_row_1", lambda: generate(requests[:1], rows=1), 7)
    measure("one_row_alone_32", lambda: [generate([request], rows=1)[0] for request in requests], 3)
    start = time.process_time()
    weight_checksum(model.named_parameters())
    figures["checksum_cpu_seconds"] = time.process_time() - start
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=positive_int, default=60)
    parser.add_argument("--session-runs", type=positive_int, default=2)
    parser.add_argument("--skip-quickstart", action="store_true")
    parser.add_argument("--skip-session", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    args = parser.parse_args()

    from verl_ext.tiny.assets import build_tiny_assets

    figures: dict = {"machine": machine()}
    with tempfile.TemporaryDirectory(prefix="bench_cpu_") as scratch:
        scratch = Path(scratch)
        assets = scratch / "assets"
        build_tiny_assets(assets)
        figures["generation"] = bench_generation(assets)
        print(json.dumps({"generation": figures["generation"]}, indent=2), flush=True)
        if not args.skip_quickstart:
            summary = bench_quickstart(args.steps, assets, scratch / "quickstart")
            figures["quickstart"] = {key: value for key, value in summary.items() if key not in ("command",)}
            print(json.dumps({"quickstart": figures["quickstart"]}, indent=2), flush=True)
        if not args.skip_session:
            figures["session"] = bench_session(args.session_runs, assets, scratch / "session")
            print(json.dumps({"session": figures["session"]}, indent=2), flush=True)
    figures["load_average_at_end"] = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"machine: {figures['machine']}; load average at end {figures['load_average_at_end']}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    print_headline(headline_figures(figures))
    return 0


def headline_figures(figures: dict) -> dict[str, str]:
    headline = {
        "generation, 32 requests in one batch (default): tokens per CPU second": f"{figures['generation']['batch_32_tokens_per_cpu_second']:,.0f}",
        "generation, 32 requests one at a time in 32 rows: tokens per CPU second": f"{figures['generation']['alone_32_tokens_per_cpu_second']:,.0f}",
        "generation, 32 requests one at a time in one row (previous default): tokens per CPU second": f"{figures['generation']['one_row_alone_32_tokens_per_cpu_second']:,.0f}",
    }
    quickstart = figures.get("quickstart")
    if quickstart:
        headline["quickstart start-up s (launch to first step)"] = f"{quickstart['startup_seconds']:.0f}"
        headline["quickstart s/step (steady)"] = f"{quickstart['seconds_per_step']:.2f}"
        headline[f"quickstart wall s ({quickstart['steps']} steps)"] = f"{quickstart['wall_seconds']:.0f}"
        headline["quickstart peak PSS GiB"] = f"{quickstart['peak_pss_gib']:.1f}"
        headline["quickstart reward start -> end"] = f"{quickstart['reward_start']:.3f} -> {quickstart['reward_end']:.3f}"
    session = figures.get("session")
    if session:
        headline["shared Ray session: start s"] = f"{session['ray_start_seconds']:.0f}"
        headline["shared Ray session: 2-step run wall s"] = ", ".join(f"{value:.0f}" for value in session["run_wall_seconds"])
    return headline


if __name__ == "__main__":
    sys.exit(main())
