"""Benchmark: what verl-ext's plugin adds to ``import verl``, in every process that imports verl.

    python benchmarks/bench_plugin_import.py [--repeats 8]

verl loads every ``verl.plugins`` entry point on ``import verl`` (verl-ext's is :mod:`verl_ext.plugin`), in the
driver, the TaskRunner and each Ray worker. A: ``python -c "import verl"`` as a user runs it; B: the same
with ``VERL_USE_EXTERNAL_PLUGINS=none`` (verl skips every plugin). The two run in turn, A B A B ..., each a
fresh process after one warm-up of each; measured per process: CPU seconds (user + system, the kernel's
accounting of the reaped child), wall seconds and peak resident memory. The ratio A/B is taken pair by pair,
so a change of the machine's load during the run moves both sides of a pair alike. The issue's target: A
within 5% of B (ratio of the median CPU seconds <= 1.05).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from headline import print_headline  # benchmarks/headline.py (this script's folder is on sys.path)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's verl_ext
from verl_ext.checks.arguments import positive_int  # noqa: E402 -- the shared option checks

REPO = Path(__file__).resolve().parents[1]
COMMAND = [sys.executable, "-c", "import verl"]
TARGET_RATIO = 1.05


@dataclass(frozen=True)
class Sample:
    cpu_s: float
    wall_s: float
    peak_mib: float


def measure(env: dict[str, str]) -> Sample:
    """One fresh ``python -c "import verl"``: its CPU seconds, wall seconds and peak RSS (the child's own rusage)."""
    started = time.perf_counter()
    child = subprocess.Popen(COMMAND, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(COMMAND)} exited {child.returncode} (VERL_USE_EXTERNAL_PLUGINS="
                         f"{env.get('VERL_USE_EXTERNAL_PLUGINS', 'auto')})")
    return Sample(cpu_s=usage.ru_utime + usage.ru_stime, wall_s=wall, peak_mib=usage.ru_maxrss / 1024)


def spread(values: list[float], digits: int = 3) -> str:
    return f"median {statistics.median(values):.{digits}f}  (min {min(values):.{digits}f}, max {max(values):.{digits}f})"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=positive_int, default=8, help="pairs of processes measured (after one warm-up pair)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    base = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    with_plugin = {key: value for key, value in base.items() if key != "VERL_USE_EXTERNAL_PLUGINS"}
    without_plugin = {**base, "VERL_USE_EXTERNAL_PLUGINS": "none"}

    print(f"load average before: {os.getloadavg()[0]:.2f}; {args.repeats} pairs (A = with verl-ext, B = without)")
    measure(with_plugin), measure(without_plugin)  # warm-up: file caches, .pyc files
    pairs = []
    for index in range(args.repeats):
        a, b = measure(with_plugin), measure(without_plugin)
        pairs.append((a, b))
        print(f"  pair {index + 1}: A {a.cpu_s:.3f} CPU-s {a.wall_s:.3f} s {a.peak_mib:.1f} MiB | "
              f"B {b.cpu_s:.3f} CPU-s {b.wall_s:.3f} s {b.peak_mib:.1f} MiB")
    figures = {}
    for label, field in (("CPU-s", "cpu_s"), ("wall s", "wall_s"), ("peak MiB", "peak_mib")):
        a_values = [getattr(a, field) for a, _ in pairs]
        b_values = [getattr(b, field) for _, b in pairs]
        ratios = [getattr(a, field) / getattr(b, field) for a, b in pairs]
        print(f"{label:>9}: A {spread(a_values)}\n{'':>9}  B {spread(b_values)}\n{'':>9}  A/B {spread(ratios)}")
        figures[label] = (statistics.median(a_values), statistics.median(b_values), statistics.median(ratios))
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    cpu_a, cpu_b, cpu_ratio = figures["CPU-s"]
    verdict = "within" if cpu_ratio <= TARGET_RATIO else "NOT within"
    print(f"import verl with verl-ext costs {cpu_ratio:.3f}x the CPU time without it: {verdict} the 5% target")
    print_headline({
        "import verl CPU-s with / without verl-ext": f"{cpu_a:.2f} / {cpu_b:.2f}",
        "CPU ratio": f"{cpu_ratio:.3f}",
        "peak MiB with / without": f"{figures['peak MiB'][0]:.0f} / {figures['peak MiB'][1]:.0f}",
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
