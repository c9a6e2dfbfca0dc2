"""argparse ``type=`` converters shared by verl-ext's commands: a bad value is rejected while the command
line is parsed, before any work starts, with a message naming what was expected."""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence


def _number(text: str, kind: type, expected: str):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None


def positive_int(text: str) -> int:
    """An integer >= 1."""
    value = _number(text, int, "an integer >= 1")
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0."""
    value = _number(text, int, "an integer >= 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


def int_in(low: int, high: int, what: str = "an integer"):
    """A converter of integers in ``low..high`` (both included)."""
    expected = f"{what} in {low}..{high}"

    def convert(text: str) -> int:
        value = _number(text, int, expected)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text if len(text) <= 40 else text[:40] + '...'}")
        return value

    return convert


def positive_float(text: str) -> float:
    """A finite number > 0."""
    value = _number(text, float, "a number > 0")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {value}")
    return value


def split_at_double_dash(argv: Optional[Sequence[str]] = None) -> tuple[list[str], list[str]]:
    """A command line (default: this process's) -> (the command's own options, what follows the first ``--``: Hydra
    overrides, another command)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        return argv, []
    split = argv.index("--")
    return argv[:split], argv[split + 1 :]
