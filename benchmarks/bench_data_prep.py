"""Benchmark: preprocessing throughput (rows per second) of every data_prep command.

    python benchmarks/bench_data_prep.py [--shared ../shared/datasets] [--repeats 3]

* GSM8k and MATH run on the real files in the project's shared folder (skipped, saying so, if absent):
  GSM8k train+test (8,792 rows); MATH train (7,500, PRM800K schema) + the 200-row lighteval test sample
  + MATH-500.
* Guru-Math and ToolACE are not available offline: their hand-made fixture rows are repeated to the real
  datasets' sizes (Guru math file ~54,400 rows; ToolACE ~11,300 conversations) in a temporary folder,
  each copy's first message marked with its copy number so that prompts stay distinct, as in real data.

Each figure is the median wall time of ``--repeats`` in-process runs of the command's ``main`` (reading,
converting, writing parquet; the progress bar goes to stderr), and rows/s counts raw rows read.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from headline import print_headline  # benchmarks/headline.py (this script's folder is on sys.path)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's verl_ext
from verl_ext.checks.arguments import positive_int  # noqa: E402 -- the shared option checks

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "datasets"
GURU_ROWS, TOOLACE_CONVERSATIONS = 54_400, 11_300


def timed_main(module, argv: list[str], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            status = module.main(argv)
        times.append(time.perf_counter() - start)
        if status != 0:
            raise SystemExit(f"{module.__name__} {' '.join(argv)} failed with status {status}")
    return statistics.median(times)


def distinct(record: dict, copy: int, messages_key: str) -> dict:
    """A copy of a fixture record whose first message says which copy it is: real data has (almost) no
    repeated prompts, and the preprocessors keep rows sharing a prompt in one split."""
    record = json.loads(json.dumps(record))
    first = record[messages_key][0]
    text_key = "content" if "content" in first else "value"
    first[text_key] = f"{first[text_key]} (copy {copy})"
    return record


HEADLINE: dict[str, str] = {}


def report(name: str, rows: int, seconds: float) -> None:
    print(f"{name:<50} {rows:>8,} rows  {seconds:7.2f} s  {rows / seconds:>10,.0f} rows/s", flush=True)
    HEADLINE[f"{name.split(' (')[0]} rows/s"] = f"{rows / seconds:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "datasets")
    parser.add_argument("--repeats", type=positive_int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    import pyarrow as pa
    import pyarrow.parquet as pq

    from data_prep import gsm8k, guru, math, toolace

    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; median of {args.repeats} runs", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        out = str(scratch / "out")
        if args.shared.is_dir():
            seconds = timed_main(
                gsm8k, ["--local_save_dir", out, "--local_dataset_path", str(args.shared / "gsm8k")], args.repeats
            )
            report("gsm8k (real: train 7,473 + test 1,319)", 8_792, seconds)
            math_raw = scratch / "math_raw"
            math_raw.mkdir()
            (math_raw / "train.jsonl").symlink_to(args.shared / "math" / "train.jsonl")
            (math_raw / "test.jsonl").symlink_to(args.shared / "math" / "lighteval_test_sample200.jsonl")
            (math_raw / "math500.jsonl").symlink_to(args.shared / "math" / "math500.jsonl")
            seconds = timed_main(math, ["--local_save_dir", out, "--local_dataset_path", str(math_raw)], args.repeats)
            report("math (real: 7,500 + 200 lighteval + 500)", 8_200, seconds)
        else:
            print(f"skipped gsm8k and math: {args.shared} is absent (real data lives in the project's shared folder)")

        guru_rows = json.loads((FIXTURES / "guru" / "math_rows.json").read_text())
        guru_rows = [distinct(row, i, "prompt") for i, row in enumerate(guru_rows * (GURU_ROWS // len(guru_rows) + 1))]
        guru_rows = guru_rows[:GURU_ROWS]
        guru_raw = scratch / "guru_raw"
        guru_raw.mkdir()
        pq.write_table(pa.Table.from_pylist(guru_rows), guru_raw / "math__combined_54.4k.parquet")
        seconds = timed_main(guru, ["--local_save_dir", out, "--local_dataset_path", str(guru_raw)], args.repeats)
        report("guru (fixture rows repeated to 54,400)", GURU_ROWS, seconds)

        conversations = json.loads((FIXTURES / "toolace" / "data.json").read_text())
        conversations = conversations * (TOOLACE_CONVERSATIONS // len(conversations) + 1)
        conversations = [distinct(c, i, "conversations") for i, c in enumerate(conversations)][:TOOLACE_CONVERSATIONS]
        toolace_raw = scratch / "toolace_raw"
        toolace_raw.mkdir()
        (toolace_raw / "data.json").write_text(json.dumps(conversations))
        for flags, label in (([], "single-turn"), (["--multi_turn"], "multi-turn")):
            argv = ["--local_save_dir", out, "--local_dataset_path", str(toolace_raw), *flags]
            seconds = timed_main(toolace, argv, args.repeats)
            report(f"toolace {label} (fixture repeated to 11,300)", TOOLACE_CONVERSATIONS, seconds)
    print_headline(HEADLINE)


if __name__ == "__main__":
    main()
