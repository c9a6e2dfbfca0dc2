"""Benchmark: forward+backward time and peak memory of every verl-ext loss against verl's ``vanilla``.

    python benchmarks/bench_losses.py [--shapes 256x2048,64x8192] [--repeats 7]

Each (loss, shape) runs in a fresh process on identical tensors (same seed), on one thread: the time is
the fastest of ``--repeats`` forward+backward passes through verl's registry (``agg_loss`` included), in
CPU time of the process, so that other load on the machine disturbs it little; the peak memory
is the growth of the process's peak resident set over the pass (inputs excluded), so numbers compare
across losses, not with GPU memory. Goal: every loss within 1.15x of vanilla's time, no more memory.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from headline import print_headline  # benchmarks/headline.py (this script's folder is on sys.path)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's verl_ext
from verl_ext.checks.arguments import comma_list, positive_int, shape as shape_option  # noqa: E402 -- the shared option checks

REPO = Path(__file__).resolve().parents[1]
TIME_GOAL = 1.15


def measure(loss_mode: str, rows: int, columns: int, repeats: int) -> dict:
    import torch

    sys.path.insert(0, str(REPO))
    from tests.recipe_config import call_registered_loss, loss_config

    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(0)
    old_log_prob = -torch.rand(rows, columns, generator=generator) * 3
    log_prob_data = old_log_prob + (torch.rand(rows, columns, generator=generator) - 0.5) * 0.6
    advantages = (torch.rand(rows, 1, generator=generator) - 0.5).expand(rows, columns).contiguous()
    response_mask = torch.rand(rows, columns, generator=generator) < 0.9
    behaviour_ratio = torch.exp((torch.rand(rows, columns, generator=generator) - 0.5) * 0.2)
    config = loss_config(loss_mode)  # verl's vanilla reads the same actor keys (clip ratios)

    def one_pass():
        log_prob = log_prob_data.clone().requires_grad_(True)
        loss, _ = call_registered_loss(loss_mode, log_prob, old_log_prob, advantages, response_mask, config=config, behaviour_ratio=behaviour_ratio)
        loss.backward()
        return log_prob.grad

    baseline_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    one_pass()  # warm-up, and the peak-memory measurement
    peak_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - baseline_kb) / 1024
    times = []
    for _ in range(repeats):
        start = time.process_time()
        one_pass()
        times.append(time.process_time() - start)
    return {"loss": loss_mode, "shape": f"{rows}x{columns}", "ms": min(times) * 1e3, "peak_mb": peak_mb}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", type=comma_list("shapes", item=shape_option), default="256x2048,64x8192",
                        help="ROWSxCOLUMNS, comma-separated (default 256x2048,64x8192)")
    parser.add_argument("--repeats", type=positive_int, default=7)
    parser.add_argument("--worker", nargs=2, metavar=("LOSS", "SHAPE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        rows, columns = map(int, args.worker[1].split("x"))
        print(json.dumps(measure(args.worker[0], rows, columns, args.repeats)))
        return 0

    from verl_ext.algorithms.registry import POLICY_LOSSES

    results = {}
    names = ["vanilla", *POLICY_LOSSES]
    for shape in args.shapes:
        for name in names:
            output = subprocess.run(
                [sys.executable, __file__, "--worker", name, shape, "--repeats", str(args.repeats)],
                capture_output=True, text=True, check=True, cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1"},
            ).stdout  # fmt: skip
            results[name, shape] = json.loads(output.strip().splitlines()[-1])
            print(f"  measured {name} {shape}", file=sys.stderr)
    print(f"{'loss':<18}{'shape':>10}{'ms':>9}{'x vanilla':>11}{'peak MB':>9}{'x vanilla':>11}  goal")
    over = 0
    for shape in args.shapes:
        base = results["vanilla", shape]
        for name in names:
            row = results[name, shape]
            time_ratio = row["ms"] / base["ms"]
            memory_ratio = row["peak_mb"] / base["peak_mb"] if base["peak_mb"] > 0 else float("nan")
            ok = time_ratio <= TIME_GOAL and row["peak_mb"] <= base["peak_mb"] * 1.02
            over += not ok
            print(f"{name:<18}{shape:>10}{row['ms']:>9.1f}{time_ratio:>11.2f}{row['peak_mb']:>9.1f}{memory_ratio:>11.2f}  {'ok' if ok else 'OVER'}")
    print(f"{over} of {len(names) * len(args.shapes)} rows miss the goal (time <= {TIME_GOAL}x, memory <= vanilla)")
    ours = [(name, shape) for shape in args.shapes for name in POLICY_LOSSES]
    time_ratios = [results[key]["ms"] / results["vanilla", key[1]]["ms"] for key in ours]
    memory_ratios = [results[key]["peak_mb"] / results["vanilla", key[1]]["peak_mb"] for key in ours
                     if results["vanilla", key[1]]["peak_mb"] > 0]
    headline = {f"vanilla ms at {shape}": f"{results['vanilla', shape]['ms']:.1f}" for shape in args.shapes}
    headline["verl-ext losses, time x vanilla"] = f"{min(time_ratios):.2f}-{max(time_ratios):.2f}"
    if memory_ratios:
        headline["verl-ext losses, peak memory x vanilla"] = f"{min(memory_ratios):.2f}-{max(memory_ratios):.2f}"
    headline["cells missing the goal"] = f"{over} of {len(names) * len(args.shapes)}"
    print_headline(headline)
    return 0


if __name__ == "__main__":
    sys.exit(main())
