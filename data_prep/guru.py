"""Guru-Math (the math subset of ``LLM360/guru-RL-92k``) to verl parquet with a seeded held-out test split.

The raw math file (``train/math__combined_54.4k.parquet``, about 54k rows) is already close to verl's
format: ``data_source`` (``math__...``), ``prompt`` (one user message asking for ``\\boxed{}``),
``ability``, ``reward_model.ground_truth`` and ``extra_info``, plus pass-rate columns. Rows keep their own
``data_source`` and prompt; other top-level columns (pass rates) are copied into ``extra_info``.

    python -m data_prep.guru --local_save_dir ~/data/guru_math [--local_dataset_path PATH]
                             [--test_size 500] [--seed 42] [--strict]

``PATH`` is the math file itself or a folder holding ``math__*.parquet`` (also ``.jsonl``/``.json``),
directly or under ``train/`` as in the hub repository. Required fields: ``data_source``, ``prompt``,
``reward_model``; ``ability`` and ``extra_info`` are optional.

Pass-through values are stored as they are when parquet can hold them; a row with one it cannot (an
integer beyond 64 bits, text with a lone surrogate) is skipped naming the field. A pass-through field
whose values differ in type from row to row (a number here, text there) has no single parquet column
type: it is stored as text in every row, and the report says so.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from data_prep.command import (
    add_held_out_flags,
    base_parser,
    check_outputs_place,
    convert_split,
    held_out_split,
    number_rows,
    print_reports,
    print_written,
    run_command,
    write_outputs,
)
from data_prep.overlap import merge_by_prompt
from data_prep.raw_records import (
    RAW_FORMATS,
    OversizedInt,
    RawRecord,
    RawSplit,
    exists_as_entry,
    load_hub_split,
    read_files,
    require_columns,
)
from data_prep.split_report import DataPrepError, MalformedRecord, SplitReport, text_field
from data_prep.verl_rows import rl_row
from verl_ext import data_sources

DATASET = "guru"
HUB_NAME = "LLM360/guru-RL-92k"
HUB_MATH_FILE = "train/math__combined_54.4k.parquet"
REQUIRED_FIELDS = ("data_source", "prompt", "reward_model")
CORE_FIELDS = (*REQUIRED_FIELDS, "ability", "extra_info")
DEFAULT_TEST_SIZE = 500


def find_math_file(path: Path) -> Path:
    """The math file: ``path`` itself, or the one ``math__*`` file in ``path`` or ``path/train``."""
    if exists_as_entry(path):  # the raw file, whatever it is (a FIFO, a link: read_files says what)
        return path
    if not path.is_dir():
        raise DataPrepError(f"--local_dataset_path {path}: no such file or directory")
    found = [
        candidate
        for folder in (path, path / "train")
        for fmt in RAW_FORMATS
        for candidate in sorted(folder.glob(f"math__*.{fmt}"))
    ]
    if not found:
        raise DataPrepError(
            f"{path}: no Guru math file (expected math__*.parquet, e.g. {Path(HUB_MATH_FILE).name}, "
            "in this folder or its train/ subfolder)"
        )
    if len(found) > 1:
        raise DataPrepError(f"{path}: several Guru math files {[str(f) for f in found]}; pass the one to use")
    return found[0]


def _chat_messages(prompt: Any) -> list[dict[str, str]]:
    if not isinstance(prompt, list) or not prompt:
        raise MalformedRecord("prompt", "not a non-empty list of chat messages")
    for message in prompt:
        if not (
            isinstance(message, dict)
            and isinstance(message.get("role"), str)
            and isinstance(message.get("content"), str)
        ):
            raise MalformedRecord("prompt", "a message without string 'role' and 'content'")
    return prompt


def _ground_truth(reward_model: Any) -> str:
    if not isinstance(reward_model, dict) or "ground_truth" not in reward_model:
        raise MalformedRecord("reward_model", "no 'ground_truth'")
    value = reward_model["ground_truth"]
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise MalformedRecord("reward_model.ground_truth", f"not a string or number (a {type(value).__name__})")
    if isinstance(value, float) and not math.isfinite(value):
        raise MalformedRecord("reward_model.ground_truth", "not a finite number")
    value = str(value).strip()
    if not value:
        raise MalformedRecord("reward_model.ground_truth", "empty")
    return value


def _scalar(key: str, value: Any) -> Any:
    """Keep JSON scalars as they are; store lists and dicts as JSON text (parquet needs one type per key)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value

    def other(item: Any) -> str:
        if isinstance(item, OversizedInt):
            raise MalformedRecord(f"extra_info.{key}", "an integer beyond the 64-bit range")
        return str(item)  # parquet's own types (dates, decimals, bytes) as text

    if isinstance(value, OversizedInt):
        other(value)
    return json.dumps(value, ensure_ascii=False, default=other)


def _kind(value: Any) -> str | None:
    """The parquet column kind of a pass-through value (int and float share one: numbers)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "bool"
    return "number" if isinstance(value, (int, float)) else "text"


def unify_pass_through(rows: list[dict[str, Any]], report: SplitReport) -> None:
    """Store as text every ``extra_info`` field whose values mix kinds across rows, with a note."""
    kinds: dict[str, set[str]] = {}
    for row in rows:
        for key, value in row["extra_info"].items():
            kind = _kind(value)
            if kind is not None:
                kinds.setdefault(key, set()).add(kind)
    for key in sorted(key for key, found in kinds.items() if len(found) > 1):
        for row in rows:
            value = row["extra_info"].get(key)
            if value is not None and not isinstance(value, str):
                row["extra_info"][key] = json.dumps(value)
        report.notes.append(f"extra_info.{key} holds {' and '.join(sorted(kinds[key]))} values: stored as text")


def convert(data: dict[str, Any], record: RawRecord, report: SplitReport) -> list[dict[str, Any]]:
    data_source = text_field(data, "data_source")
    if not data_source.startswith(data_sources.GURU_MATH_PREFIX):
        report.filter(f"data_source does not start with '{data_sources.GURU_MATH_PREFIX}'")
        return []
    prompt = _chat_messages(data.get("prompt"))
    ground_truth = _ground_truth(data.get("reward_model"))
    ability = data.get("ability") if isinstance(data.get("ability"), str) else "math"
    original_extra = data.get("extra_info") if isinstance(data.get("extra_info"), dict) else {}
    extra_info = {str(key): _scalar(str(key), value) for key, value in original_extra.items()}
    extra_info.update({key: _scalar(key, data[key]) for key in data if key not in CORE_FIELDS})
    if "index" in extra_info:  # the index written below numbers rows within our split; keep theirs too
        extra_info["original_index"] = extra_info["index"]
    extra_info.update({"split": "", "index": record.row, "source_index": record.row})
    return [
        rl_row(
            data_source=data_source, prompt=prompt, ability=ability, ground_truth=ground_truth, extra_info=extra_info
        )
    ]


def load_raw(local_dataset_path: str | None) -> RawSplit:
    if local_dataset_path is None:
        return load_hub_split(HUB_NAME, "train", data_files=HUB_MATH_FILE)
    return read_files("train", [find_math_file(Path(local_dataset_path).expanduser())])


def run(args) -> None:
    raw = load_raw(args.local_dataset_path)
    check_outputs_place(args, [raw])
    require_columns(raw, REQUIRED_FIELDS, DATASET)
    report = SplitReport(DATASET, "source", raw.source)
    rows = convert_split(raw, convert, report, args.strict)
    unify_pass_through(rows, report)
    groups = merge_by_prompt([[row] for row in rows], report)
    print_reports([report])
    train, test = held_out_split(groups, args.test_size, args.seed, "math rows")
    outputs = {"train": number_rows(train, "train"), "test": number_rows(test, "test")}
    print(f"held-out split (seed {args.seed}): train {len(train)} rows, test {len(test)} rows", flush=True)
    print_written(write_outputs(args, DATASET, outputs, [report]), outputs)


def build_parser():
    parser = base_parser(DATASET, __doc__.splitlines()[0])
    add_held_out_flags(parser, DEFAULT_TEST_SIZE)
    return parser


def main(argv=None) -> int:
    return run_command(run, build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
