"""Benchmark: latency (p50 / p99 / max) and throughput of every scorer behind verl_ext.rewards.compute_score.

    python benchmarks/bench_rewards.py [--shared ../shared/datasets] [--threads 8]

Workloads (real data from the project's shared folder where present, else the repository's fixtures):

* gsm8k: each GSM8k test solution scored against its own answer, and again with the answer + 1.
* math (same answer): each MATH-500 solution against its own answer (string rules decide, in-thread).
* math (other answer): each MATH-500 solution against the next row's answer (mostly decided by
  math-verify in the child process).
* math (symbolic): equivalent forms only sympy can match (``(x+1)^2`` vs ``x^2+2x+1``, ...).
* guru: solutions wrapped in ``<think>...</think>`` with a draft box inside the thinking.
* toolace exact / partial: ToolACE fixture truths answered with reordered calls, and with a changed value.
* math (pathological): exponent towers and huge factorials (caught by the guard), and one check that
  needs ~20 s of sympy (cut at a 1 s budget: the worst case a response can cost).

Each call is timed alone in the main thread (after one warm-up call that starts the first child
process, timed separately); then all non-pathological calls run through a thread pool the way verl's
reward manager runs them, for aggregate throughput.

Last, the latency bound under concurrency (``--concurrency-only`` runs just this): 16 MATH checks that
need ~20 s of sympy each and 4 that need milliseconds, all submitted at once from 20 threads (the easy ones
right behind the slow ones), under the default budget and start-up allowance. Every call must end by
budget + allowance after it was submitted; the worst slow and easy latencies are printed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import sys
import time
from pathlib import Path

from headline import print_headline  # benchmarks/headline.py (this script's folder is on sys.path)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's verl_ext
from verl_ext.checks.arguments import positive_int  # noqa: E402 -- the shared option checks

from verl_ext import data_sources
from verl_ext.jsonl import json_lines

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "datasets"


def read_jsonl(path: Path) -> list[dict]:
    return [record for _, record in json_lines(path)]


def workloads(shared: Path) -> dict[str, list[tuple]]:
    from data_prep.gsm8k import final_answer

    gsm8k_dir = shared / "gsm8k" if (shared / "gsm8k").is_dir() else FIXTURES / "gsm8k"
    gsm8k_rows = [r for r in read_jsonl(gsm8k_dir / "test.jsonl")]
    gsm8k = []
    for row in gsm8k_rows:
        truth = final_answer(row["answer"])
        gsm8k += [(data_sources.GSM8K, row["answer"], truth), (data_sources.GSM8K, row["answer"], str(int(float(truth)) + 1))]

    math500_path = shared / "math" / "math500.jsonl"
    math_rows = read_jsonl(math500_path if math500_path.is_file() else FIXTURES / "math_prm800k" / "math500.jsonl")
    source = data_sources.MATH_500
    same = [(source, row["solution"], row["answer"]) for row in math_rows]
    other = [
        (source, math_rows[(i + 1) % len(math_rows)]["solution"], row["answer"]) for i, row in enumerate(math_rows)
    ]
    symbolic_pairs = [
        ("x^2+2x+1", "(x+1)^2"),
        ("3\\sqrt{2}", "\\sqrt{18}"),
        ("\\frac{\\sqrt{3}}{3}", "\\frac{1}{\\sqrt{3}}"),
        ("\\{1,2\\}", "\\{2,1\\}"),
        ("\\pi/2", "\\frac{\\pi}{2}"),
        ("2\\cos^2 x - 1", "\\cos 2x"),
    ]
    symbolic = [(source, f"so \\boxed{{{answer}}}", truth) for truth, answer in symbolic_pairs] * 20
    guru = [
        (f"{data_sources.GURU_MATH_PREFIX}__deepscaler_preview", f"<think>draft: \\boxed{{0}} ...</think> {row['solution']}", row["answer"])
        for row in math_rows
    ]

    toolace_exact, toolace_partial = [], []
    for conversation in json.loads((FIXTURES / "toolace" / "data.json").read_text()):
        from data_prep.tool_call_syntax import CallSyntaxError, parse_call_list

        for turn in conversation["conversations"]:
            if turn["from"] != "assistant" or not turn["value"].startswith("["):
                continue
            try:
                calls = parse_call_list(turn["value"])
            except CallSyntaxError:
                continue
            truth = json.dumps(calls)
            reordered = [{"arguments": dict(reversed(list(c["arguments"].items()))), "name": c["name"]} for c in calls]
            changed = [{"name": c["name"], "arguments": {**c["arguments"], "extra": 1}} for c in calls]
            for response_calls in (list(reversed(reordered)), changed):
                response = f"<think>Call the tools.</think>\n<tool_call>{json.dumps(response_calls)}</tool_call>"
                toolace_exact.append((data_sources.TOOLACE, response, truth, {}))
                toolace_partial.append((data_sources.TOOLACE, response, truth, {"toolace_mode": "partial"}))
    toolace_exact *= 100
    toolace_partial *= 100

    pathological = [
        (source, f"\\boxed{{{answer}}}", "1", {"math_timeout_s": 1.0})
        for answer in ("2^{2^{2^{100}}}", "10^{10^{10}}", "100000000!", "(x+y+z)^{300}")
    ] * 5 + [(source, "\\boxed{(a+b+c+d+e)^{10}}", "(a+b+c+d+e)^{9}", {"math_timeout_s": 1.0})] * 3
    return {
        f"gsm8k ({gsm8k_dir.name} test)": gsm8k,
        "math (same answer)": same,
        "math (other answer)": other,
        "math (symbolic)": symbolic,
        "guru (think + box)": guru,
        "toolace exact": toolace_exact,
        "toolace partial": toolace_partial,
        "math (pathological, 1 s budget)": pathological,
    }


def call(case: tuple) -> dict:
    from verl_ext.rewards import compute_score

    data_source, response, truth, *rest = case
    return compute_score(data_source, response, truth, None, **(rest[0] if rest else {}))


def percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


SLOW_CASE = (data_sources.MATH_500, "\\boxed{(a+b+c+d+e)^{10}}", "(a+b+c+d+e)^{9}")  # ~20 s of sympy
EASY_CASE = (data_sources.MATH_500, "\\boxed{(x+1)^2}", "x^2+2x+1")  # milliseconds of sympy


def concurrency_bound(slow: int = 16, easy: int = 4) -> dict[str, str]:
    """Submit ``slow`` then ``easy`` checks at once from ``slow + easy`` threads; report latencies vs the bound."""
    from verl_ext.rewards import equivalence_pool

    settings = equivalence_pool.settings()
    bound = settings.timeout_s + settings.startup_allowance_s

    def timed(case: tuple) -> tuple[tuple, dict, float]:
        start = time.perf_counter()
        result = call(case)
        return case, result, time.perf_counter() - start

    cases = [SLOW_CASE] * slow + [EASY_CASE] * easy
    with concurrent.futures.ThreadPoolExecutor(len(cases)) as pool:
        start = time.perf_counter()
        outcomes = list(pool.map(timed, cases))
        wall = time.perf_counter() - start
    slow_s = sorted(elapsed for case, _, elapsed in outcomes if case is SLOW_CASE)
    easy_s = sorted(elapsed for case, _, elapsed in outcomes if case is EASY_CASE)
    worst = max(slow_s[-1], easy_s[-1])
    easy_right = sum(result["score"] == 1.0 for case, result, _ in outcomes if case is EASY_CASE)
    print(
        f"\n{slow} slow + {easy} easy math checks submitted at once from {len(cases)} threads "
        f"(budget {settings.timeout_s:g} s + start-up allowance {settings.startup_allowance_s:g} s = bound {bound:g} s, "
        f"{equivalence_pool.get_checker().max_workers} children): all done in {wall:.1f} s\n"
        f"  slow: median {statistics.median(slow_s):.1f} s, worst {slow_s[-1]:.1f} s "
        f"(all timed out: {all(r['timed_out'] == 1.0 for c, r, _ in outcomes if c is SLOW_CASE)})\n"
        f"  easy: median {statistics.median(easy_s):.1f} s, worst {easy_s[-1]:.1f} s, {easy_right}/{easy} scored 1 "
        f"(the others timed out in line)\n"
        f"  checker counts: {dict(equivalence_pool.get_checker().counts)}\n"
        f"  worst call {worst:.2f} s: {1e3 * (worst - bound):+.0f} ms past the bound of {bound:g} s "
        f"(the OS running the waiting thread again; a killed child exits in the background)",
        flush=True,
    )
    return {
        f"concurrent worst s ({slow} slow + {easy} easy; bound {bound:g})": f"{worst:.2f}",
        "concurrent easy worst s": f"{easy_s[-1]:.1f}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "datasets")
    parser.add_argument("--threads", type=positive_int, default=8)
    parser.add_argument("--concurrency-only", action="store_true", help="only the latency bound under concurrency")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from verl_ext.rewards import equivalence_pool

    checker = equivalence_pool.get_checker()
    print(
        f"checker: {type(checker).__name__}, {checker.max_workers} workers, "
        f"budget {equivalence_pool.default_timeout_s()} s, start-up allowance "
        f"{equivalence_pool.settings().startup_allowance_s} s; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    start = time.perf_counter()
    call(EASY_CASE)
    print(f"first math check (starts a child process): {time.perf_counter() - start:.2f} s\n")
    if args.concurrency_only:
        print_headline(concurrency_bound())
        return
    loads = workloads(args.shared)

    print(
        f"{'scorer (workload)':<34} {'calls':>6} {'mean score':>10} "
        f"{'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'calls/s':>8}"
    )
    headline = {}
    for name, cases in loads.items():
        latencies, scores, timeouts = [], [], 0
        for case in cases:
            start = time.perf_counter()
            result = call(case)
            latencies.append(time.perf_counter() - start)
            scores.append(result["score"])
            timeouts += int(result["timed_out"])
        latencies.sort()
        print(
            f"{name:<34} {len(cases):>6} {statistics.mean(scores):>10.3f} {percentile(latencies, 0.5) * 1e3:>8.2f} "
            f"{percentile(latencies, 0.99) * 1e3:>8.2f} {latencies[-1] * 1e3:>8.1f} {len(cases) / sum(latencies):>8.0f}"
            + (f"   ({timeouts} timed out)" if timeouts else ""),
            flush=True,
        )
        headline[f"{name} p50/p99 ms"] = f"{percentile(latencies, 0.5) * 1e3:.2f}/{percentile(latencies, 0.99) * 1e3:.2f}"

    mixed = [case for name, cases in loads.items() if "pathological" not in name for case in cases]
    with concurrent.futures.ThreadPoolExecutor(args.threads) as pool:
        start = time.perf_counter()
        list(pool.map(call, mixed))
        elapsed = time.perf_counter() - start
    print(
        f"\nall non-pathological calls through {args.threads} threads: {len(mixed)} calls in {elapsed:.2f} s, "
        f"{len(mixed) / elapsed:,.0f} calls/s"
    )
    headline[f"mixed calls/s ({args.threads} threads)"] = f"{len(mixed) / elapsed:,.0f}"
    headline.update(concurrency_bound())
    print_headline(headline)


if __name__ == "__main__":
    main()
