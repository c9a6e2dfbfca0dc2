"""Reading JSON-lines files (one JSON value per line), with errors that name the file and the line."""

from __future__ import annotations

import json
import os
from pathlib import Path
from collections.abc import Iterator
from typing import Any


def json_lines(path: str | os.PathLike) -> Iterator[tuple[int, Any]]:
    """``(line_number, value)`` for every non-blank line of ``path``, numbered from 1.

    A line that is not JSON raises ValueError naming the file and the line number.
    """
    with Path(path).open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield line_number, json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}: line {line_number} is not JSON: {error}") from error
