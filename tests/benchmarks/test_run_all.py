"""benchmarks/run_all.py runs real benchmarks and gathers their headline figures into one table."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCHMARKS = REPO / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from headline import PREFIX, parse_headline  # noqa: E402

# its child processes (a fresh interpreter importing verl or torch) may take minutes on a loaded machine: the
# per-test limit stays above their own time-outs, so a slow child fails with its own message, a hang still here
pytestmark = pytest.mark.timeout(600)


def test_headline_lines_round_trip_and_other_lines_are_not_headlines():
    assert parse_headline(PREFIX + '{"rows/s": "1,000", "n": 3}') == {"rows/s": "1,000", "n": "3"}
    assert parse_headline("gsm8k 8,792 rows") is None
    with pytest.raises(ValueError, match="JSON object"):
        parse_headline(PREFIX + "[1, 2]")


def test_run_all_gathers_the_data_prep_benchmark_figures_into_one_table(tmp_path):
    out = tmp_path / "report.md"
    completed = subprocess.run(
        [sys.executable, str(BENCHMARKS / "run_all.py"), "--quick", "--only", "data_prep", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    report = out.read_text()
    assert PREFIX not in report  # the machine-readable line is folded into the table
    table = report[report.index("== headline figures"):]
    rows = dict(re.findall(r"^\| data_prep \| (.+?) \| ([\d,]+) \|$", table, flags=re.MULTILINE))
    for dataset in ("guru", "toolace single-turn", "toolace multi-turn"):
        assert int(rows[f"{dataset} rows/s"].replace(",", "")) > 0, table
    assert re.search(r"^   data_prep\s+ok\s", report, flags=re.MULTILINE)


def test_run_all_rejects_an_unknown_benchmark_name():
    completed = subprocess.run(
        [sys.executable, str(BENCHMARKS / "run_all.py"), "--only", "losses,speed"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )
    assert completed.returncode == 2
    assert "unknown speed" in completed.stderr and "allowed: losses" in completed.stderr
