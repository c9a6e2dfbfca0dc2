"""Reading raw dataset files (JSON Lines, JSON or Parquet) or a hub dataset, one record at a time.

A :class:`RawSplit` is an iterable of :class:`RawRecord` plus what the conversion loop needs to report
on it: where it came from, how many records it holds (for the progress bar), and its column names, which
:func:`require_columns` checks before any record is converted, so a wrong file fails at once.

A JSON Lines line that is not valid JSON, or a JSON array element that is not an object, becomes a record
with ``problem`` set: the loop skips and counts it like any other malformed record.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from data_prep.split_report import DataPrepError

RAW_FORMATS = ("jsonl", "json", "parquet")


@dataclass
class RawRecord:
    row: int  # 0-based position of the record in its file (or hub split)
    data: dict[str, Any] | None
    line: int | None = None  # 1-based line number, JSON Lines only
    problem: str | None = None  # why ``data`` could not be read, if it could not

    @property
    def location(self) -> str:
        return f"row {self.row}" + (f" (line {self.line})" if self.line is not None else "")


@dataclass
class RawSplit:
    """Records of one raw split. ``open_records`` yields them; each call starts from the beginning."""

    name: str
    source: str  # a file path, or "hub:<name>[<split>]"
    num_records: int | None
    columns: list[str] | None  # None when only the records can tell (checked on the first one)
    open_records: Callable[[], Iterator[RawRecord]]

    def __iter__(self) -> Iterator[RawRecord]:
        return self.open_records()


def find_split_files(directory: Path, split: str) -> list[Path]:
    """The raw files of ``split`` in ``directory``: ``split.<fmt>`` or shards ``split-*.<fmt>``.

    Raises :class:`DataPrepError` when the directory is missing, holds no such file, or holds the split in
    more than one format.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise DataPrepError(f"--local_dataset_path {directory}: no such directory")
    by_format = {}
    for fmt in RAW_FORMATS:
        files = sorted(p for p in directory.glob(f"{split}.{fmt}") if p.is_file())
        files += sorted(p for p in directory.glob(f"{split}-*.{fmt}") if p.is_file())
        if files:
            by_format[fmt] = files
    if not by_format:
        present = sorted(p.name for p in directory.iterdir())[:20]
        raise DataPrepError(
            f"{directory}: no raw file for split '{split}' (expected {split}.jsonl, {split}.json, {split}.parquet "
            f"or shards {split}-*.<format>); the directory holds: {present or 'nothing'}"
        )
    if len(by_format) > 1:
        found = [str(p.name) for files in by_format.values() for p in files]
        raise DataPrepError(f"{directory}: split '{split}' is present in several formats ({found}); keep one")
    return next(iter(by_format.values()))


def read_files(name: str, files: Sequence[Path]) -> RawSplit:
    """One raw split from one file or several shards of the same format, read lazily in order."""
    files = [Path(f) for f in files]
    for path in files:
        if not path.is_file():
            raise DataPrepError(f"{path}: no such file")
    if len(files) == 1:
        return _read_file(name, files[0])
    parts = [_read_file(name, f) for f in files]
    counts = [p.num_records for p in parts]

    def open_records() -> Iterator[RawRecord]:
        offset = 0
        for part in parts:
            for record in part:
                record.row += offset
                yield record
            offset += part.num_records or 0

    return RawSplit(
        name=name,
        source=", ".join(str(f) for f in files),
        num_records=None if None in counts else sum(counts),
        columns=parts[0].columns,
        open_records=open_records,
    )


def _read_file(name: str, path: Path) -> RawSplit:
    suffix = path.suffix.lstrip(".").lower()
    if suffix == "jsonl":
        return _read_jsonl(name, path)
    if suffix == "json":
        return _read_json(name, path)
    if suffix == "parquet":
        return _read_parquet(name, path)
    raise DataPrepError(f"{path}: unsupported file format '.{suffix}' (use one of {', '.join(RAW_FORMATS)})")


def _read_jsonl(name: str, path: Path) -> RawSplit:
    with path.open("rb") as handle:
        num_records = sum(1 for line in handle if line.strip())

    def open_records() -> Iterator[RawRecord]:
        row = 0
        with path.open(encoding="utf-8", errors="replace") as handle:
            for line_number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    data = json.loads(line)
                except json.JSONDecodeError:
                    yield RawRecord(row, None, line_number, "invalid JSON")
                else:
                    if isinstance(data, dict):
                        yield RawRecord(row, data, line_number)
                    else:
                        yield RawRecord(row, None, line_number, f"a JSON {type(data).__name__}, not an object")
                row += 1

    return RawSplit(name, str(path), num_records, None, open_records)


def _read_json(name: str, path: Path) -> RawSplit:
    try:
        with path.open(encoding="utf-8") as handle:
            data = json.load(handle)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise DataPrepError(f"{path}: not a valid JSON file ({error})") from error
    if not isinstance(data, list):
        raise DataPrepError(f"{path}: expected a JSON array of records, found a JSON {type(data).__name__}")

    def open_records() -> Iterator[RawRecord]:
        for row, item in enumerate(data):
            if isinstance(item, dict):
                yield RawRecord(row, item)
            else:
                yield RawRecord(row, None, None, f"a JSON {type(item).__name__}, not an object")

    return RawSplit(name, str(path), len(data), None, open_records)


def _read_parquet(name: str, path: Path) -> RawSplit:
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except Exception as error:  # pyarrow raises several types for a file that is not parquet
        raise DataPrepError(f"{path}: not a readable parquet file ({error})") from error

    def open_records() -> Iterator[RawRecord]:
        row = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=2048):
            for item in batch.to_pylist():
                yield RawRecord(row, item)
                row += 1

    return RawSplit(name, str(path), parquet.metadata.num_rows, list(parquet.schema_arrow.names), open_records)


def load_hub_split(hub_name: str, split: str, config: str | None = None, data_files: str | None = None) -> RawSplit:
    """One split of a Hugging Face hub dataset via ``datasets.load_dataset`` (needs network or its cache)."""
    import datasets

    try:
        dataset = datasets.load_dataset(hub_name, config, split=split, data_files=data_files)
    except Exception as error:
        raise DataPrepError(
            f"could not load {hub_name} ({config or 'default'} config, split {split}) from the hub: {error}. "
            "Offline, download the raw files and pass --local_dataset_path."
        ) from error

    def open_records() -> Iterator[RawRecord]:
        for row, item in enumerate(dataset):
            yield RawRecord(row, dict(item))

    return RawSplit(split, f"hub:{hub_name}[{split}]", len(dataset), list(dataset.column_names), open_records)


def columns_of(raw: RawSplit) -> list[str]:
    """The split's column names: declared (parquet, hub) or the keys of its first readable record."""
    if raw.columns is not None:
        return list(raw.columns)
    first = next((r.data for r in raw if r.data is not None), None)
    if first is None:
        raise DataPrepError(f"{raw.source}: no readable record (empty file, or no line is a JSON object)")
    return list(first)


def require_columns(raw: RawSplit, required: Sequence[str], dataset: str) -> None:
    """Fail before converting anything when the split's columns lack a required field.

    Uses the declared columns of a parquet file or hub split, otherwise the keys of the first readable
    record (JSON and JSON Lines have no header).
    """
    columns = columns_of(raw)
    missing = [name for name in required if name not in columns]
    if missing:
        raise DataPrepError(
            f"{raw.source}: wrong schema for {dataset}: missing field(s) {missing}; "
            f"required: {list(required)}; found: {sorted(columns)}"
        )
