"""What happened to every raw record of one split: rows in, rows out, and each skip with its reason.

A converter raises :class:`MalformedRecord` (naming the field) for a record it cannot use; the conversion
loop counts it under its reason, or, with ``--strict``, turns it into :class:`MalformedRecordError`, which
names the file, the row and the field. Records left out on purpose (by an option such as ToolACE's
single-turn selection) are counted separately as *filtered*: they are not errors and ``--strict`` ignores
them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


class DataPrepError(Exception):
    """A problem with the input or the options: the command prints it and exits with status 2."""


class MalformedRecord(Exception):
    """Raised by a converter for one record it cannot use.

    ``field`` names where in the record the problem is (``"answer"``, ``"conversations[3].value"``);
    ``reason`` is a short, stable phrase used as the counting key in the report.
    """

    def __init__(self, field: str, reason: str):
        super().__init__(f"field '{field}': {reason}")
        self.field = field
        self.reason = reason


class MalformedRecordError(DataPrepError):
    """``--strict`` mode: the first malformed record stops the command."""

    def __init__(self, source: str, location: str, field: str, reason: str):
        super().__init__(
            f"{source}: {location}: field '{field}': {reason} (drop --strict to skip such records and count them)"
        )
        self.source = source
        self.location = location
        self.field = field
        self.reason = reason


@dataclass
class SplitReport:
    """Counts for one output split. ``rows_in`` counts raw records read; ``rows_out`` counts rows written."""

    dataset: str
    split: str
    source: str
    rows_in: int = 0
    rows_out: int = 0
    skipped: Counter = field(default_factory=Counter)
    filtered: Counter = field(default_factory=Counter)

    def skip(self, field_name: str, reason: str) -> None:
        self.skipped[f"{field_name}: {reason}"] += 1

    def filter(self, reason: str, count: int = 1) -> None:
        self.filtered[reason] += count

    @property
    def rows_skipped(self) -> int:
        return sum(self.skipped.values())

    def render(self) -> str:
        """Human-readable lines, one summary line then one line per reason (most frequent first)."""
        lines = [
            f"{self.dataset} {self.split} ({self.source}): rows in {self.rows_in}, rows out {self.rows_out}, "
            f"skipped {self.rows_skipped}" + (f", filtered {sum(self.filtered.values())}" if self.filtered else "")
        ]
        lines += [f"    skipped {count:>6}  {reason}" for reason, count in self.skipped.most_common()]
        lines += [f"    filtered {count:>5}  {reason}" for reason, count in self.filtered.most_common()]
        return "\n".join(lines)


def text_field(data: dict, name: str) -> str:
    """``data[name]`` as a non-empty string, or :class:`MalformedRecord` naming the field."""
    value = data.get(name)
    if value is None:
        raise MalformedRecord(name, "missing")
    if not isinstance(value, str):
        raise MalformedRecord(name, f"not a string (a {type(value).__name__})")
    if not value.strip():
        raise MalformedRecord(name, "empty")
    return value
