"""The result file of ``bench_gpu.py --json``: several records side by side, one per device, assets size, response
length and commit, so that a command never replaces another device's (or size's) figures.

Layout::

    {"format": "verl-ext bench_gpu results 2",
     "records": {"<gpu> | <size> | <response length> tokens | <commit>": {record}, ...}}

A record holds ``device`` (GPU, driver, CUDA and versions), ``device_line``, ``commit``, ``size``,
``response_length``, ``modes`` (per mode or phase: ``steps_averaged``, ``steps_per_second``, ``tokens_per_second``,
``phase_seconds`` -- the time split --, ``push_seconds``, ``peak_gpu_gib``, ``actor_mfu`` ...) and, when timed,
``losses``. A file of the first layout (one record at the top level, before records were keyed) is read as one
record under its own key, so its figures are kept beside the new ones.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

FORMAT = "verl-ext bench_gpu results 2"
MAX_BYTES = 16 * 2**20  # a results file of hundreds of records is well under this


class ResultsFileError(ValueError):
    """A ``--json`` file that cannot be read or written as a results file (the message names it)."""


def record_key(record: dict) -> str:
    device = record.get("device") or {}
    gpu = device.get("gpu") or device.get("backend") or "no GPU"
    return f"{gpu} | {record.get('size')} | {record.get('response_length')} tokens | {record.get('commit') or 'no commit'}"


def check_target(path: Path) -> None:
    """Refuse, before any run, a ``--json`` that cannot be the results file (the project's output-place rules,
    :func:`verl_ext.files.output_place_problem`: a link, a folder, a FIFO, a path below a file, a place where nothing
    can be written) or whose folder does not exist (the benchmark makes no folder the user did not name); a file that
    is there must be a results file (:func:`load_records`)."""
    from verl_ext.files import check_output_place

    if not path.parent.is_dir():
        raise ResultsFileError(f"{path}: its folder {path.parent} does not exist or is not a folder")
    check_output_place(path, "bench_gpu results file", ResultsFileError, folder=False)
    if path.exists():
        load_records(path)


def load_records(path: Path) -> dict[str, dict]:
    """The records of the results file ``path`` ({} when there is none); ResultsFileError naming the file when it
    is not one (not JSON, a list, a folder, a FIFO, too large, records that are not objects)."""
    from verl_ext.files import parse_json, read_bounded

    if not os.path.lexists(path):
        return {}
    content = parse_json(read_bounded(path, MAX_BYTES, "bench_gpu results file", ResultsFileError), path, ResultsFileError)
    if not isinstance(content, dict):
        raise ResultsFileError(f"{path}: a JSON {type(content).__name__}, not a bench_gpu results file (a JSON object)")
    if "records" not in content:
        if "device" in content or "modes" in content:  # the first layout: one record
            return {record_key(content): content}
        if not content:
            return {}
        raise ResultsFileError(f"{path}: a JSON object without 'records': not a bench_gpu results file")
    records = content["records"]
    if not isinstance(records, dict) or not all(isinstance(record, dict) for record in records.values()):
        raise ResultsFileError(f"{path}: 'records' must map keys to JSON objects")
    return dict(records)


def merge_record(records: dict[str, dict], record: dict) -> dict[str, dict]:
    """``records`` with ``record`` merged in: a record of the same key gets its modes updated (the modes of an
    earlier command kept), any other record is kept as it is."""
    merged = dict(records)
    key = record_key(record)
    earlier = merged.get(key, {})
    combined = {**earlier, **record}
    combined["modes"] = {**earlier.get("modes", {}), **record.get("modes", {})}
    if not combined["modes"]:
        del combined["modes"]
    merged[key] = combined
    return merged


def save_records(path: Path, records: dict[str, dict]) -> None:
    """Write the file whole or not at all (a command stopped while writing keeps the previous file)."""
    from verl_ext.files import write_whole

    if path.is_symlink():
        raise ResultsFileError(f"{path}: a symbolic link; nothing is written through a link")
    document = {"format": FORMAT, "records": records}
    write_whole(path, lambda file: file.write((json.dumps(document, indent=1) + "\n").encode()))
