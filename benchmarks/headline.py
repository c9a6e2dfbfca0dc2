"""A benchmark's headline figures: one line, ``HEADLINE {"figure": "value", ...}``, printed last.

Each ``bench_*.py`` prints its full report and then this line; ``run_all.py`` reads it back from every
benchmark it ran and prints all the headline figures side by side in one table (and in ``--out``).
"""

from __future__ import annotations

import json
from typing import Optional

PREFIX = "HEADLINE "


def print_headline(figures: dict[str, str]) -> None:
    print(PREFIX + json.dumps(figures), flush=True)


def parse_headline(line: str) -> Optional[dict[str, str]]:
    """The figures of a ``HEADLINE`` line, None for any other line."""
    if not line.startswith(PREFIX):
        return None
    figures = json.loads(line[len(PREFIX):])
    if not isinstance(figures, dict):
        raise ValueError(f"a HEADLINE line must hold a JSON object, got {line!r}")
    return {str(key): str(value) for key, value in figures.items()}


def load_average() -> str:
    """The machine's load averages (1, 5, 15 min), as the reports print them."""
    import os

    return ", ".join(f"{value:.1f}" for value in os.getloadavg())


def print_report(summary: dict, record: dict, load_start: str, json_path=None) -> None:
    """Print ``summary`` and the load at start and now; write ``record`` with both loads to ``json_path`` if given."""
    import os

    load_end = load_average()
    print(json.dumps({"summary": summary}, indent=2))
    print(f"{os.cpu_count()} CPUs; load average at start {load_start}, at end {load_end}")
    if json_path:
        json_path.write_text(json.dumps({**record, "summary": summary, "load": [load_start, load_end]}, indent=2) + "\n")
