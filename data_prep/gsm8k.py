"""GSM8k (``openai/gsm8k``, config ``main``) to verl parquet.

Raw fields: ``question`` and ``answer``, a worked solution ending in one line ``#### N``. The prompt is
the question plus verl's instruction to answer after ``####``; the ground truth is N with thousands
commas removed (``#### 109,200,000`` -> ``"109200000"``). Only well-formed groups are read that way
(``1,234`` or ``12,345.5``); ``#### 1,2,3`` or ``#### 1.000,5`` is a counted skip, never a guess.

    python -m data_prep.gsm8k --local_save_dir ~/data/gsm8k [--local_dataset_path DIR] [--strict]
                              [--drop_duplicates]

``DIR`` holds ``train.*`` and ``test.*`` (JSON Lines, JSON or Parquet) in the hub schema.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from data_prep.command import (
    base_parser,
    check_outputs_place,
    convert_split,
    print_reports,
    print_written,
    run_command,
    write_outputs,
)
from data_prep.overlap import add_drop_duplicates_flag, flag_shared_prompts
from data_prep.raw_records import RawRecord, RawSplit, find_split_files, load_hub_split, read_files, require_columns
from data_prep.split_report import MalformedRecord, SplitReport, text_field
from data_prep.verl_rows import rl_row, user_prompt
from verl_ext import data_sources

DATASET = "gsm8k"
HUB_NAME, HUB_CONFIG = data_sources.GSM8K, "main"  # the rows' data_source is the hub dataset's name
SPLITS = ("train", "test")
REQUIRED_FIELDS = ("question", "answer")
INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_GROUPED_NUMBER = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")  # 1,234 and 12,345.5; not 1,2,3 nor 1.000,5
_DIGITS_AND_SEPARATORS = re.compile(r"-?[\d.,]+")


def final_answer(solution: str) -> str:
    """The number after the last ``####`` of a worked solution, well-formed thousands commas removed."""
    position = solution.rfind("####")
    if position < 0:
        raise MalformedRecord("answer", "no '#### N' final-answer line")
    value = solution[position + 4 :].strip()
    if _NUMBER.fullmatch(value):
        return value
    if _GROUPED_NUMBER.fullmatch(value):
        return value.replace(",", "")
    if "," in value and _DIGITS_AND_SEPARATORS.fullmatch(value) and any(c.isdigit() for c in value):
        raise MalformedRecord("answer", "the final answer's thousands separators are ill-formed")
    raise MalformedRecord("answer", "the final answer after '####' is not a number")


def convert(data: dict[str, Any], record: RawRecord, report: SplitReport) -> list[dict[str, Any]]:
    question = text_field(data, "question")
    solution = text_field(data, "answer")
    return [
        rl_row(
            data_source=data_sources.GSM8K,
            prompt=user_prompt(f"{question} {INSTRUCTION}"),
            ability="math",
            ground_truth=final_answer(solution),
            extra_info={"split": report.split, "index": record.row, "question": question, "answer": solution},
        )
    ]


def load_raw(split: str, local_dataset_path: str | None) -> RawSplit:
    if local_dataset_path is None:
        return load_hub_split(HUB_NAME, split, HUB_CONFIG)
    from pathlib import Path

    return read_files(split, find_split_files(Path(local_dataset_path).expanduser(), split))


def run(args) -> None:
    raws = {split: load_raw(split, args.local_dataset_path) for split in SPLITS}
    check_outputs_place(args, raws.values())
    for raw in raws.values():  # check every input before converting any
        require_columns(raw, REQUIRED_FIELDS, DATASET)
    outputs, reports = {}, {}
    for split, raw in raws.items():
        reports[split] = SplitReport(DATASET, split, raw.source)
        outputs[split] = convert_split(raw, convert, reports[split], args.strict)
    flag_shared_prompts(outputs, reports, ["test"], args.drop_duplicates)
    print_reports(reports.values())
    print_written(write_outputs(args, DATASET, outputs, list(reports.values())), outputs)


def build_parser():
    parser = base_parser(DATASET, __doc__.splitlines()[0])
    add_drop_duplicates_flag(parser)
    return parser


def main(argv=None) -> int:
    return run_command(run, build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
