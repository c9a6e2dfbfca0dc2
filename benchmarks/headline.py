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
