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


def comma_list(what: str, allowed: Optional[Sequence[str]] = None, item=None):
    """A converter of a comma-separated list (``--only losses,rewards``, ``--shapes 256x2048,64x8192``): refused when
    it is empty, holds an empty entry (``,`` or ``a,,b``), an entry twice, a name not in ``allowed`` (when given), or
    an entry ``item`` rejects (``item(text)`` raises ``argparse.ArgumentTypeError`` or ``ValueError``); the entries in
    the order given."""
    allowed = None if allowed is None else tuple(allowed)
    choices = f" from {', '.join(allowed)}" if allowed else ""

    def convert(text: str) -> list[str]:
        entries = [entry.strip() for entry in text.split(",")]
        if not text.strip() or not all(entries):
            raise argparse.ArgumentTypeError(f"expected comma-separated {what} (none empty){choices}, got {text!r}")
        if allowed is not None:
            unknown = [entry for entry in entries if entry not in allowed]
            if unknown:
                raise argparse.ArgumentTypeError(f"unknown {', '.join(unknown)}; allowed: {', '.join(allowed)}")
        twice = sorted({entry for entry in entries if entries.count(entry) > 1})
        if twice:
            raise argparse.ArgumentTypeError(f"{', '.join(twice)} given twice: each of the {what} runs once")
        for entry in entries if item is not None else ():
            try:
                item(entry)
            except ValueError as problem:
                raise argparse.ArgumentTypeError(f"{entry!r}: {problem}") from None
        return entries

    return convert


def name_list(allowed: Sequence[str], what: str = "names"):
    """:func:`comma_list` of names from ``allowed``."""
    return comma_list(what, allowed)


def shape(text: str) -> tuple[int, int]:
    """``ROWSxCOLUMNS`` with both integers >= 1 (``256x2048``)."""
    try:
        rows, columns = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected ROWSxCOLUMNS (e.g. 256x2048), got {text!r}") from None
    if rows < 1 or columns < 1:
        raise argparse.ArgumentTypeError(f"expected ROWSxCOLUMNS with both >= 1, got {text!r}")
    return rows, columns


def split_at_double_dash(argv: Optional[Sequence[str]] = None) -> tuple[list[str], list[str]]:
    """A command line (default: this process's) -> (the command's own options, what follows the first ``--``: Hydra
    overrides, another command)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        return argv, []
    split = argv.index("--")
    return argv[:split], argv[split + 1 :]
