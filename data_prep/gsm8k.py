"""GSM8k (``openai/gsm8k``, config ``main``) to verl parquet.

Raw fields: ``question`` and ``answer``, a worked solution ending in one line ``#### N``. The prompt is
the question plus verl's instruction to answer after ``####``; the ground truth is N with thousands
commas removed (``#### 109,200,000`` -> ``"109200000"``).

    python -m data_prep.gsm8k --local_save_dir ~/data/gsm8k [--local_dataset_path DIR] [--strict]

``DIR`` holds ``train.*`` and ``test.*`` (JSON Lines, JSON or Parquet) in the hub schema.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from data_prep.command import base_parser, convert_split, print_reports, print_written, run_command, write_outputs
from data_prep.raw_records import RawRecord, RawSplit, find_split_files, load_hub_split, read_files, require_columns
from data_prep.split_report import MalformedRecord, SplitReport, text_field
from data_prep.verl_rows import rl_row, user_prompt

DATASET = "gsm8k"
DATA_SOURCE = "openai/gsm8k"
HUB_NAME, HUB_CONFIG = "openai/gsm8k", "main"
SPLITS = ("train", "test")
REQUIRED_FIELDS = ("question", "answer")
INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def final_answer(solution: str) -> str:
    """The number after the last ``####`` of a worked solution, commas removed."""
    position = solution.rfind("####")
    if position < 0:
        raise MalformedRecord("answer", "no '#### N' final-answer line")
    value = solution[position + 4 :].strip().replace(",", "")
    if not _NUMBER.fullmatch(value):
        raise MalformedRecord("answer", "the final answer after '####' is not a number")
    return value


def convert(data: dict[str, Any], record: RawRecord, report: SplitReport) -> list[dict[str, Any]]:
    question = text_field(data, "question")
    solution = text_field(data, "answer")
    return [
        rl_row(
            data_source=DATA_SOURCE,
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
    for raw in raws.values():  # check every input before converting any
        require_columns(raw, REQUIRED_FIELDS, DATASET)
    outputs, reports = {}, []
    for split, raw in raws.items():
        report = SplitReport(DATASET, split, raw.source)
        outputs[split] = convert_split(raw, convert, report, args.strict)
        reports.append(report)
    print_reports(reports)
    print_written(write_outputs(args.local_save_dir, outputs), outputs)


def main(argv=None) -> int:
    parser = base_parser(DATASET, __doc__.splitlines()[0])
    return run_command(run, parser, argv)


if __name__ == "__main__":
    sys.exit(main())
