"""What happened to every raw record of one split: rows in, rows out, and each skip with its reason.

A converter raises :class:`MalformedRecord` (naming the field) for a record it cannot use; the conversion
loop counts it under its reason, or, with ``--strict``, turns it into :class:`MalformedRecordError`, which
names the file, the row and the field. Records left out on purpose (by an option such as ToolACE's
single-turn selection) are counted separately as *filtered*: they are not errors and ``--strict`` ignores
them.

Every count is in one unit per report, so that ``rows in = rows out + skipped + filtered`` always holds:
a raw record is either written (``rows out``: it gave at least one row), skipped or filtered. ToolACE,
whose records (conversations) give several samples each, adds a second report in its own unit
(``turns``: the assistant turns of the conversations read) that adds up the same way.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

# Locations kept per skip reason (the first ones met), so a user can open the file at a skipped row.
SKIP_EXAMPLES = 5


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
    """Counts for one split, in one ``unit``: ``rows_in`` units read, ``rows_out`` of them written.

    ``notes`` are remarks on the whole split (a column stored as text, duplicates across splits);
    ``turns`` is an optional second report, in its own unit, on the parts of the records (ToolACE).
    ``skipped_at`` keeps, per skip reason, the locations (row and line) of its first :data:`SKIP_EXAMPLES`
    records.
    """

    dataset: str
    split: str
    source: str
    rows_in: int = 0
    rows_out: int = 0
    skipped: Counter = field(default_factory=Counter)
    filtered: Counter = field(default_factory=Counter)
    unit: str = "rows"
    notes: list[str] = field(default_factory=list)
    turns: "SplitReport | None" = None
    skipped_at: dict = field(default_factory=dict)

    def skip(self, field_name: str, reason: str, location: str | None = None) -> None:
        key = f"{field_name}: {reason}"
        self.skipped[key] += 1
        if location is not None:
            examples = self.skipped_at.setdefault(key, [])
            if len(examples) < SKIP_EXAMPLES:
                examples.append(location)

    def filter(self, reason: str, count: int = 1) -> None:
        self.filtered[reason] += count

    @property
    def rows_skipped(self) -> int:
        return sum(self.skipped.values())

    @property
    def rows_filtered(self) -> int:
        return sum(self.filtered.values())

    @property
    def adds_up(self) -> bool:
        """``rows in = rows out + skipped + filtered``, here and in ``turns``."""
        own = self.rows_in == self.rows_out + self.rows_skipped + self.rows_filtered
        return own and (self.turns is None or self.turns.adds_up)

    def as_dict(self) -> dict:
        """The counts as plain data (for the output folder's manifest)."""
        counts = {
            "split": self.split,
            "source": self.source,
            "unit": self.unit,
            "in": self.rows_in,
            "out": self.rows_out,
            "skipped": dict(self.skipped),
            "skipped_at": {reason: list(locations) for reason, locations in self.skipped_at.items()},
            "filtered": dict(self.filtered),
            "notes": list(self.notes),
        }
        if self.turns is not None:
            counts["turns"] = self.turns.as_dict()
        return counts

    def render(self) -> str:
        """Human-readable lines, one summary line then one line per reason (most frequent first)."""
        lines = [
            f"{self.dataset} {self.split} ({self.source}): {self.unit} in {self.rows_in}, {self.unit} out "
            f"{self.rows_out}, skipped {self.rows_skipped}"
            + (f", filtered {self.rows_filtered}" if self.filtered else "")
        ]
        lines += [
            f"    skipped {count:>6}  {reason}{_locations(self.skipped_at.get(reason), count)}"
            for reason, count in self.skipped.most_common()
        ]
        lines += [f"    filtered {count:>5}  {reason}" for reason, count in self.filtered.most_common()]
        lines += [f"    note: {note}" for note in self.notes]
        if self.turns is not None:
            lines.append(self.turns.render())
        return "\n".join(lines)


def _locations(locations: list[str] | None, count: int) -> str:
    """`` (at row 3 (line 4), ...)``: where the first records skipped for one reason are."""
    if not locations:
        return ""
    more = ", ..." if count > len(locations) else ""
    return f" (at {', '.join(locations)}{more})"


def text_field(data: dict, name: str) -> str:
    """``data[name]`` as a non-empty string, or :class:`MalformedRecord` naming the field."""
    value = data.get(name)
    if value is None:
        raise MalformedRecord(name, "missing")
    if not isinstance(value, str):
        raise MalformedRecord(name, f"not a string (a {type(value).__name__})")
    if not value.strip():
        raise MalformedRecord(name, "empty")
    if not is_valid_unicode(value):
        raise MalformedRecord(name, INVALID_UNICODE)
    return value


INVALID_UNICODE = "not valid Unicode (a lone surrogate such as \\ud83d)"


def is_valid_unicode(text: str) -> bool:
    """False for a string holding a lone surrogate (JSON allows ``"\\ud83d"``; UTF-8 and parquet do not)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
