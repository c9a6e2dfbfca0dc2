"""Reading raw dataset files (JSON Lines, JSON or Parquet) or a hub dataset, one record at a time.

A :class:`RawSplit` is an iterable of :class:`RawRecord` plus what the conversion loop needs to report
on it: where it came from, how many records it holds (for the progress bar), and its column names, which
:func:`require_columns` checks before any record is converted, so a wrong file fails at once.

A JSON Lines line that cannot be read (invalid UTF-8, invalid JSON, nested too deeply, not an object), or a
JSON array element that is not an object, becomes a record with ``problem`` set: the loop skips and counts
it like any other malformed record. A whole file that cannot be read (missing, unreadable, a JSON array
that is not valid JSON, a corrupt parquet page) is a :class:`DataPrepError`. A UTF-8 byte-order mark at the
start of a JSON or JSON Lines file is ignored. An integer too long for Python to read (more than 4,300
digits) becomes an :class:`OversizedInt`: harmless in a field nobody reads, a counted skip where a value is
written (it cannot be stored).

**What a raw file may be.** A regular file (a link to one is fine) of at most :data:`MAX_RAW_BYTES` (a JSON file,
read whole, at most :data:`MAX_JSON_BYTES`), checked on the open descriptor before anything is read
(:func:`verl_ext.files.open_regular`): a FIFO would block the command for ever and a link to ``/dev/zero`` never ends,
so either is a :class:`DataPrepError` saying what the path is ("a FIFO, not a regular file", "more than the ..."),
never "no such file" while the path is there.

**Which files are a split.** For a split ``S`` and a format ``F`` (``jsonl``, ``json``, ``parquet``) a
folder holds the split either as one file ``S.F`` or as a complete set of shards ``S-<i>-of-<n>.F`` with
``<i>`` and ``<n>`` decimal numbers of at most 9 digits (the hub writes ``train-00000-of-00002.parquet``)
and every index ``0 .. n-1`` present once. Any other name (``train-old-backup.jsonl``, ``train_v2.jsonl``)
is not part of the split: it is ignored, with a note on stderr.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from data_prep.split_report import DataPrepError

RAW_FORMATS = ("jsonl", "json", "parquet")
MAX_RAW_BYTES = 256 * 1024**3  # read a record at a time: well beyond any dataset this reads (Guru's math file: ~0.1 GB)
MAX_JSON_BYTES = 4 * 1024**3  # a JSON array is read whole into memory (ToolACE's data.json: ~0.05 GB)


def open_raw(path: Path, max_bytes: int = MAX_RAW_BYTES):
    """``path`` open for reading (binary) when it is a regular file of at most ``max_bytes``; a
    :class:`DataPrepError` saying what it is otherwise (a FIFO, a device, too large, missing, unreadable)."""
    from verl_ext.files import open_regular

    return open_regular(path, max_bytes, "raw dataset file", DataPrepError)


def exists_as_entry(path: Path) -> bool:
    """Whether something other than a folder is at ``path`` (a file, a FIFO, a device, a link, even to nothing)."""
    return os.path.lexists(path) and not path.is_dir()


class OversizedInt:
    """A JSON integer too long to convert (Python refuses more than 4,300 digits): kept as its digit count."""

    def __init__(self, digits: int):
        self.digits = digits

    def __repr__(self) -> str:
        return f"<integer of {self.digits} digits>"


def _parse_int(text: str) -> int | OversizedInt:
    try:
        return int(text)
    except ValueError:
        return OversizedInt(len(text.lstrip("-")))


_DECODER = json.JSONDecoder(parse_int=_parse_int)  # one decoder: json.loads(..., parse_int=) builds one per call


def parse_json(text: str):
    """``json.loads`` that reads any integer (see :class:`OversizedInt`); raises ValueError or RecursionError."""
    return _DECODER.decode(text)


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
    files: list[Path] = field(default_factory=list)  # the local files read (none for a hub split)

    def __iter__(self) -> Iterator[RawRecord]:
        return self.open_records()


def _shard_pattern(split: str, fmt: str) -> re.Pattern:
    return re.compile(rf"{re.escape(split)}-([0-9]{{1,9}})-of-([0-9]{{1,9}})\.{fmt}")


def has_split_files(directory: Path, split: str) -> bool:
    """Whether ``directory`` holds any file that is part of ``split`` (whole or a shard, any format)."""
    return any(_files_of(Path(directory), split, fmt)[0] for fmt in RAW_FORMATS)


def _files_of(directory: Path, split: str, fmt: str) -> tuple[list[Path], list[Path]]:
    """(files of ``split`` in format ``fmt``, other files whose name starts like the split's)."""
    whole = directory / f"{split}.{fmt}"
    pattern = _shard_pattern(split, fmt)
    shards, others = [], []
    for path in sorted(directory.glob(f"{split}[-._]*.{fmt}")):
        if path == whole or not exists_as_entry(path):  # a FIFO or a link is the split's too: refused when read
            continue
        (shards if pattern.fullmatch(path.name) else others).append(path)
    files = ([whole] if exists_as_entry(whole) else []) + shards
    return files, others


def _check_shards(directory: Path, split: str, fmt: str, files: list[Path]) -> list[Path]:
    """The shards of one split in index order; a DataPrepError when the set is incomplete or mixed."""
    if any(f.name == f"{split}.{fmt}" for f in files):
        if len(files) > 1:
            raise DataPrepError(
                f"{directory}: split '{split}' is present both whole ({split}.{fmt}) and as shards "
                f"({[f.name for f in files[1:]]}); keep one"
            )
        return files
    pattern = _shard_pattern(split, fmt)
    numbered = {}
    totals = set()
    for path in files:
        index, total = (int(group) for group in pattern.fullmatch(path.name).groups())
        totals.add(total)
        if index in numbered or index >= total:
            raise DataPrepError(f"{directory}: shard {path.name} repeats an index or is out of range")
        numbered[index] = path
    if len(totals) != 1:
        raise DataPrepError(f"{directory}: shards of '{split}' disagree on their count: {sorted(totals)}")
    (total,) = totals
    if len(numbered) < total:
        first_missing = next(i for i in range(total) if i not in numbered)
        raise DataPrepError(
            f"{directory}: incomplete shard set for split '{split}': {total - len(numbered)} of {total} missing "
            f"(first missing: index {first_missing})"
        )
    return [numbered[i] for i in range(total)]


def find_split_files(directory: Path, split: str) -> list[Path]:
    """The raw files of ``split`` in ``directory``: ``split.<fmt>`` or a complete set of shards
    ``split-<i>-of-<n>.<fmt>`` (see the module docstring).

    Raises :class:`DataPrepError` when the directory is missing, holds no such file, holds the split in
    more than one format or both whole and sharded, or holds an incomplete shard set.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise DataPrepError(f"--local_dataset_path {directory}: no such directory")
    by_format, ignored = {}, []
    try:
        for fmt in RAW_FORMATS:
            files, others = _files_of(directory, split, fmt)
            ignored += others
            if files:
                by_format[fmt] = files
        present = sorted(p.name for p in directory.iterdir())[:20] if not by_format else []
    except OSError as error:
        raise DataPrepError(f"{directory}: cannot list the folder ({error.strerror or error})") from None
    for path in ignored:
        print(
            f"note: {path} is not read: not a file of split '{split}' ({split}.<format> or shards "
            f"{split}-<i>-of-<n>.<format>)",
            file=sys.stderr,
            flush=True,
        )
    if not by_format:
        raise DataPrepError(
            f"{directory}: no raw file for split '{split}' (expected {split}.jsonl, {split}.json, {split}.parquet "
            f"or shards {split}-<i>-of-<n>.<format>); the directory holds: {present or 'nothing'}"
        )
    if len(by_format) > 1:
        found = [str(p.name) for files in by_format.values() for p in files]
        raise DataPrepError(f"{directory}: split '{split}' is present in several formats ({found}); keep one")
    fmt, files = next(iter(by_format.items()))
    return _check_shards(directory, split, fmt, files)


def read_files(name: str, files: Sequence[Path]) -> RawSplit:
    """One raw split from one file or several shards of the same format, read lazily in order."""
    files = [Path(f) for f in files]
    for path in files:
        if not os.path.lexists(path):
            raise DataPrepError(f"{path}: no such file")
        if path.is_symlink() and not path.exists():
            raise DataPrepError(f"{path}: a symbolic link to nothing ({os.readlink(path)}), not a raw dataset file")
        open_raw(path, MAX_JSON_BYTES if path.suffix.lower() == ".json" else MAX_RAW_BYTES).close()  # kind and size
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
        files=files,
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


def _unreadable(path: Path, error: OSError) -> DataPrepError:
    return DataPrepError(f"{path}: cannot read the file ({error.strerror or error})")


def _read_jsonl(name: str, path: Path) -> RawSplit:
    try:
        with open_raw(path) as handle:
            num_records = sum(1 for number, line in enumerate(handle) if _content(line, number))
    except OSError as error:
        raise _unreadable(path, error) from None

    def open_records() -> Iterator[RawRecord]:
        row = 0
        try:
            with open_raw(path) as handle:
                for number, line in enumerate(handle):
                    content = _content(line, number)
                    if content:
                        yield _jsonl_record(row, number + 1, content)
                        row += 1
        except OSError as error:
            raise _unreadable(path, error) from None

    return RawSplit(name, str(path), num_records, None, open_records, [path])


def _content(line: bytes, number: int) -> bytes:
    """The line without a leading byte-order mark (first line only); empty when the line is blank."""
    if number == 0 and line.startswith(codecs.BOM_UTF8):
        line = line[len(codecs.BOM_UTF8) :]
    return line if line.strip() else b""


def _jsonl_record(row: int, line_number: int, line: bytes) -> RawRecord:
    """One JSON Lines record, or one with ``problem`` saying why the line cannot be read."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as error:
        return RawRecord(row, None, line_number, f"invalid UTF-8 (byte {error.start} of the line)")
    try:
        data = parse_json(text)
    except RecursionError:
        return RawRecord(row, None, line_number, "JSON nested too deeply")
    except ValueError:
        return RawRecord(row, None, line_number, "invalid JSON")
    if not isinstance(data, dict):
        return RawRecord(row, None, line_number, f"a JSON {type(data).__name__}, not an object")
    return RawRecord(row, data, line_number)


def _read_json(name: str, path: Path) -> RawSplit:
    try:
        with open_raw(path, MAX_JSON_BYTES) as handle:
            content = handle.read(MAX_JSON_BYTES + 1)
    except OSError as error:
        raise _unreadable(path, error) from None
    if len(content) > MAX_JSON_BYTES:
        raise DataPrepError(f"{path}: more than the {MAX_JSON_BYTES} bytes a raw JSON file may have (it grew while read)")
    try:
        data = parse_json(content.decode("utf-8-sig"))
    except UnicodeDecodeError as error:
        raise DataPrepError(f"{path}: not valid UTF-8 (byte {error.start}); nothing converted") from None
    except RecursionError:
        raise DataPrepError(f"{path}: JSON nested too deeply to read") from None
    except ValueError as error:
        raise DataPrepError(f"{path}: not a valid JSON file ({error})") from None
    if not isinstance(data, list):
        raise DataPrepError(f"{path}: expected a JSON array of records, found a JSON {type(data).__name__}")

    def open_records() -> Iterator[RawRecord]:
        for row, item in enumerate(data):
            if isinstance(item, dict):
                yield RawRecord(row, item)
            else:
                yield RawRecord(row, None, None, f"a JSON {type(item).__name__}, not an object")

    return RawSplit(name, str(path), len(data), None, open_records, [path])


def _read_parquet(name: str, path: Path) -> RawSplit:
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
        num_rows, columns = parquet.metadata.num_rows, list(parquet.schema_arrow.names)
    except Exception as error:  # pyarrow raises several types for a file that is not parquet
        raise DataPrepError(f"{path}: not a readable parquet file ({error})") from error

    def open_records() -> Iterator[RawRecord]:
        row = 0
        try:
            for batch in pq.ParquetFile(path).iter_batches(batch_size=2048):
                for item in _batch_records(batch, row):
                    yield item
                    row += 1
        except DataPrepError:
            raise
        except Exception as error:  # a corrupt page, a truncated file: pyarrow's own error types
            raise DataPrepError(
                f"{path}: cannot read the rows from row {row} on ({type(error).__name__}: {error}); "
                "nothing written"
            ) from None

    return RawSplit(name, str(path), num_rows, columns, open_records, [path])


def _batch_records(batch, first_row: int) -> list[RawRecord]:
    """A parquet batch as records; when the batch cannot be converted whole (a string that is not valid
    UTF-8), row by row, so that only the bad rows become records with a problem."""
    try:
        return [RawRecord(first_row + i, item) for i, item in enumerate(batch.to_pylist())]
    except UnicodeDecodeError:
        pass
    records = []
    for i in range(batch.num_rows):
        try:
            records.append(RawRecord(first_row + i, batch.slice(i, 1).to_pylist()[0]))
        except UnicodeDecodeError as error:
            records.append(RawRecord(first_row + i, None, None, f"invalid UTF-8 in a text column ({error.reason})"))
    return records


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
