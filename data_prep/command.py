"""What every dataset command shares: its flags, the conversion loop, the held-out split and the output.

A dataset module supplies a converter, ``convert(data, record, report) -> list[row]``, that turns one raw
record into zero or more verl rows, raising :class:`~data_prep.split_report.MalformedRecord` for a record
it cannot use. :func:`convert_split` runs it over a raw split with a progress bar and counts everything
(a produced row that parquet could not store is a skip too); :func:`check_outputs_place` refuses a bad
``--local_save_dir`` before any conversion; :func:`write_outputs` refuses an empty split and replaces the
output folder's files at once (:mod:`data_prep.save_folder`).
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from data_prep.raw_records import RawRecord, RawSplit
from data_prep.save_folder import check_save_dir, replace_outputs
from data_prep.split_report import DataPrepError, MalformedRecord, MalformedRecordError, SplitReport
from verl_ext.checks.arguments import positive_int

Converter = Callable[[dict[str, Any], RawRecord, SplitReport], list[dict[str, Any]]]

# Inputs with at least this many records get a progress bar (on stderr).
PROGRESS_BAR_MIN_RECORDS = 2000


def base_parser(dataset: str, description: str) -> argparse.ArgumentParser:
    """The flags every command takes, named as in verl's own ``examples/data_preprocess`` scripts."""
    parser = argparse.ArgumentParser(prog=f"python -m data_prep.{dataset}", description=description)
    parser.add_argument(
        "--local_save_dir",
        type=_path_text,
        default=f"~/data/{dataset}",
        help="folder that receives train.parquet and test.parquet (default: %(default)s)",
    )
    parser.add_argument(
        "--local_dataset_path",
        type=_path_text,
        default=None,
        help="folder holding the raw files (see docs/datasets.md); without it the dataset is loaded from the hub",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="stop at the first malformed record, naming file, row and field (default: skip and count it)",
    )
    return parser


def _path_text(text: str) -> str:
    """A path flag's value; an empty one (``--local_save_dir ""``) would mean the current folder."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a path, got an empty value")
    return text


def add_held_out_flags(parser: argparse.ArgumentParser, default_test_size: int) -> None:
    """Flags of datasets that ship one split and get a seeded held-out test split here."""
    parser.add_argument(
        "--test_size",
        type=positive_int,
        default=default_test_size,
        help="rows in the held-out test split (%(default)s)",
    )
    parser.add_argument("--seed", type=int, default=42, help="seed of the held-out split (%(default)s)")


def convert_split(
    raw: RawSplit, convert: Converter, report: SplitReport, strict: bool, progress_label: str | None = None
) -> list[dict[str, Any]]:
    """Run ``convert`` over every record of ``raw``; returns the rows and fills ``report``.

    Each record counts once: out (it gave rows), skipped (malformed: the converter raised, its data is
    nested too deeply to walk, or a produced row holds a value parquet cannot store) or filtered (the
    converter returned no row and said why with ``report.filter``). Produced rows are checked for
    storability in chunks of :data:`STORAGE_CHECK_RECORDS` records (one pyarrow conversion per chunk).
    """
    from tqdm import tqdm

    rows: list[dict[str, Any]] = []
    pending: list[tuple[RawRecord, list[dict[str, Any]]]] = []  # counted out, not yet checked

    def check_pending() -> None:
        problems = _unstorable_records(pending)
        for index, (record, produced) in enumerate(pending):
            if index not in problems:
                rows.extend(produced)
            elif strict:
                raise MalformedRecordError(raw.source, record.location, *problems[index])
            else:
                report.rows_out -= 1
                report.skip(*problems[index], location=record.location)
        pending.clear()

    records = tqdm(
        raw,
        total=raw.num_records,
        desc=progress_label or f"{report.dataset} {report.split}",
        unit="rows",
        file=sys.stderr,
        disable=(raw.num_records or 0) < PROGRESS_BAR_MIN_RECORDS,
    )
    for record in records:
        report.rows_in += 1
        filtered_before = report.rows_filtered
        try:
            if record.problem is not None:
                raise MalformedRecord("<record>", record.problem)
            try:
                produced = convert(record.data, record, report)
            except RecursionError:
                raise MalformedRecord("<record>", "nested too deeply to process") from None
        except MalformedRecord as malformed:
            if strict:
                check_pending()  # an earlier record's problem is the first one
                raise MalformedRecordError(raw.source, record.location, malformed.field, malformed.reason) from None
            report.skip(malformed.field, malformed.reason, location=record.location)
            continue
        if produced:
            report.rows_out += 1
            pending.append((record, produced))
            if len(pending) >= STORAGE_CHECK_RECORDS:
                check_pending()
        elif report.rows_filtered == filtered_before:
            report.filter("gave no row")
    check_pending()
    return rows


STORAGE_CHECK_RECORDS = 2048


def _unstorable_records(pending: list[tuple[RawRecord, list[dict[str, Any]]]]) -> dict[int, tuple[str, str]]:
    """``{index in pending: (field, reason)}``: the first unstorable row of each bad record."""
    from data_prep.verl_rows import unstorable_rows

    owners = [index for index, (_, produced) in enumerate(pending) for _ in produced]
    problems: dict[int, tuple[str, str]] = {}
    for position, problem in unstorable_rows([row for _, produced in pending for row in produced]).items():
        problems.setdefault(owners[position], problem)
    return problems


def held_out_split(
    groups: Sequence[Sequence[dict[str, Any]]], test_size: int, seed: int, what: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Split groups of rows into (train, test), keeping each group whole (no leakage between splits).

    Groups are shuffled with ``random.Random(seed)`` and moved to test until it holds at least
    ``test_size`` rows; each split keeps the original order. Deterministic for a given input and seed.
    """
    total = sum(len(g) for g in groups)
    if test_size >= total:
        raise DataPrepError(f"--test_size {test_size} leaves no training rows: only {total} usable {what}")
    order = list(range(len(groups)))
    random.Random(seed).shuffle(order)
    in_test = set()
    count = 0
    for group_index in order:
        if count >= test_size:
            break
        in_test.add(group_index)
        count += len(groups[group_index])
    train = [row for i, g in enumerate(groups) if i not in in_test for row in g]
    test = [row for i, g in enumerate(groups) if i in in_test for row in g]
    return train, test


def number_rows(rows: list[dict[str, Any]], split: str) -> list[dict[str, Any]]:
    """Set ``extra_info.split`` and a running ``extra_info.index`` (0, 1, ...) on every row."""
    for index, row in enumerate(rows):
        row["extra_info"]["split"] = split
        row["extra_info"]["index"] = index
    return rows


def check_outputs_place(args: argparse.Namespace, raws: Iterable[RawSplit | None]) -> Path:
    """The save folder, checked against the inputs before anything is converted (see save_folder)."""
    files = [path for raw in raws if raw is not None for path in raw.files]
    return check_save_dir(args.local_save_dir, args.local_dataset_path, files)


def write_outputs(
    args: argparse.Namespace, dataset: str, outputs: dict[str, list[dict[str, Any]]], reports: Sequence[SplitReport]
) -> dict[str, Path]:
    """Replace ``<save_dir>/<name>.parquet`` for every output and the manifest, all at once.

    An empty output is an error, and then nothing is written.
    """
    empty = [name for name, rows in outputs.items() if not rows]
    if empty:
        raise DataPrepError(f"no rows left for {empty} after skipping; nothing written (see the report above)")
    save_dir = check_save_dir(args.local_save_dir, None, [])
    return replace_outputs(save_dir, outputs, dataset, vars(args), [report.as_dict() for report in reports])


def print_reports(reports: Sequence[SplitReport]) -> None:
    for report in reports:
        print(report.render(), flush=True)


def print_written(paths: dict[str, Path], outputs: dict[str, list[dict[str, Any]]]) -> None:
    for name, path in paths.items():
        print(f"wrote {len(outputs[name])} rows to {path}", flush=True)


def run_command(main: Callable[[argparse.Namespace], None], parser: argparse.ArgumentParser, argv=None) -> int:
    """Parse ``argv``, run ``main``; a :class:`DataPrepError` prints ``error: ...`` and returns status 2,
    Ctrl-C prints that nothing was written and returns 130 (the previous outputs are untouched).

    An ``OSError`` that no step turned into a :class:`DataPrepError` (every known one is: reading in
    :mod:`data_prep.raw_records`, writing in :mod:`data_prep.save_folder`) is reported the same way,
    naming its file and cause, so that no file-system fault ends in a traceback."""
    args = parser.parse_args(argv)
    for stream in (sys.stdout, sys.stderr):  # a file name that is not valid UTF-8 must not stop a report
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    try:
        check_save_dir(args.local_save_dir, args.local_dataset_path, [])  # before any loading; files later
        main(args)
    except DataPrepError as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        return 2
    except OSError as error:
        where = ": ".join(str(name) for name in (error.filename, error.filename2) if name is not None)
        cause = error.strerror or str(error) or type(error).__name__
        print(f"error: {where + ': ' if where else ''}{cause}", file=sys.stderr, flush=True)
        return 2
    except KeyboardInterrupt:
        print(
            f"error: interrupted; {args.local_save_dir} holds the files of the last complete run",
            file=sys.stderr,
            flush=True,
        )
        return 130
    return 0
