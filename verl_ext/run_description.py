"""A run's description files: ``<experiment>.run.json`` beside its metrics file, and the lab's run record
``runs/<name>.json``. This module is their one writer and their one reader.

``<experiment>.run.json`` is written by the run scripts' launcher (:mod:`verl_ext.experiments.modes`, from
:func:`verl_ext.runs.claims.describe`: what the composed config trains) and read by ``verl-ext plot``
(:mod:`verl_ext.plotting`):

===================  ======  ===================================================================
field                type    meaning
===================  ======  ===================================================================
``run``              str     the curve's label (the run name without its setting); not empty
``group``            str     the figure's row: the staleness setting
``profile``          str     the run profile (Table 1 column)
``algorithm``        str     the algorithm preset, with its clipping range (``rec_oneside_nois@0.6_2``)
``setting``          str     the staleness setting
``learning_rate``    str     the learning rate as named in a learning-rate sweep, else ``""``
``cpu_smoke``        bool    whether the run was a CPU smoke run (the tiny model)
``config``           object  what ran: the composed value of each key that defines the run (estimator, loss,
                             clipping range, learning rate, trainer mode and schedule, seeds, rollout.n, batch
                             sizes, steps, model; :func:`verl_ext.runs.claims.recorded_values`), by full key;
                             each value a string, number, true/false or null
===================  ======  ===================================================================

``run`` and ``group`` are required (a description written by hand may hold only them); the others are optional.

The lab's run record (:func:`read_lab_record`, :data:`LAB_RECORD_FIELDS`) says what a lab run was run with, for
``verl-ext lab --reuse``: ``steps``, ``overrides`` (the run's own) and ``assets`` (the initial model's
fingerprint) required; ``name``, ``all_overrides`` (what ``main_ppo`` was given) and ``config`` optional.

Both are written whole (:func:`verl_ext.files.write_whole`) and read back as a regular file of bounded size (a
FIFO, a device, a link to an endless file or a huge file is refused before it is read), UTF-8, a JSON object with
these fields only, each of its type: anything else is a :class:`RunDescriptionError` naming the file and the field.
"""

from __future__ import annotations

import json
import os
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Mapping

from verl_ext.files import parse_json, read_bounded, write_whole

SUFFIX = ".run.json"
MAX_BYTES = 64 * 1024
MAX_LAB_RECORD_BYTES = 4 * 1024 * 1024  # a run's every override, paths included: tens of KiB
REQUIRED = ("run", "group")
MAX_CONFIG_KEYS = 1000


class RunDescriptionError(ValueError):
    """A run description that is not one (names the file and the field)."""


@dataclass(frozen=True)
class RunDescription:
    run: str
    group: str
    profile: str = ""
    algorithm: str = ""
    setting: str = ""
    learning_rate: str = ""
    cpu_smoke: bool = False
    config: Mapping[str, Any] = field(default_factory=dict)  # what ran (module docstring)


def description_path(metrics_file: str | os.PathLike, experiment: str) -> Path:
    """``<experiment>.run.json`` in the folder of the metrics file."""
    return Path(metrics_file).parent / f"{experiment}{SUFFIX}"


def write_run_description(path: str | os.PathLike, description: RunDescription) -> Path:
    text = json.dumps(asdict(_checked(asdict(description), str(path)))) + "\n"
    return write_whole(path, lambda file: file.write(text.encode("utf-8")))


def read_run_description(path: str | os.PathLike) -> RunDescription:
    content = read_bounded(path, MAX_BYTES, "run description (<experiment>.run.json)", RunDescriptionError)
    data = parse_json(content, path, RunDescriptionError)
    return _checked(data, str(path))


def _string(value) -> bool:
    return type(value) is str


def _flag(value) -> bool:
    return type(value) is bool


def _strings(value) -> bool:
    return type(value) is list and all(type(item) is str for item in value)


def _steps(value) -> bool:
    return value is None or (type(value) is int and value >= 1)


def _config(value) -> bool:
    """A mapping of keys to JSON scalars (a finite number)."""
    return (type(value) is dict and len(value) <= MAX_CONFIG_KEYS and all(
        type(item) in (str, bool, int, type(None)) or (type(item) is float and math.isfinite(item))
        for item in value.values()))


# field -> (check, what it must be)
_KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "str": (_string, "a string"),
    "bool": (_flag, "true or false"),
    "list": (_strings, "a list of strings"),
    "steps": (_steps, "an integer >= 1 or null"),
    "config": (_config, f"an object of at most {MAX_CONFIG_KEYS} keys, each a string, a finite number, true/false "
                        "or null"),
}
DESCRIPTION_FIELDS = {"run": "str", "group": "str", "profile": "str", "algorithm": "str", "setting": "str",
                      "learning_rate": "str", "cpu_smoke": "bool", "config": "config"}
assert list(DESCRIPTION_FIELDS) == [item.name for item in fields(RunDescription)]
LAB_RECORD_FIELDS = {"name": "str", "steps": "steps", "overrides": "list", "assets": "str", "all_overrides": "list",
                     "config": "config"}
LAB_RECORD_REQUIRED = ("steps", "overrides", "assets")


def _checked_fields(data, where: str, kinds: Mapping[str, str], required: tuple[str, ...], what: str) -> dict:
    if not isinstance(data, dict):
        raise RunDescriptionError(f"{where}: expected a JSON object with the fields {', '.join(kinds)} ({what}), "
                                  f"got {type(data).__name__}")
    for name in required:
        if name not in data:
            raise RunDescriptionError(f"{where}, field {name!r}: missing")
    for name, value in data.items():
        if name not in kinds:
            raise RunDescriptionError(f"{where}, field {name!r}: not a field of a {what} (fields: {', '.join(kinds)})")
        check, wanted = _KINDS[kinds[name]]
        if not check(value):
            shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
            raise RunDescriptionError(f"{where}, field {name!r}: expected {wanted}, got {shown}")
    return data


def _checked(data, where: str) -> RunDescription:
    _checked_fields(data, where, DESCRIPTION_FIELDS, REQUIRED, "run description")
    if not data["run"].strip():
        raise RunDescriptionError(f"{where}, field 'run': empty (the curve's label)")
    return RunDescription(**data)


def write_lab_record(path: str | os.PathLike, record: Mapping[str, Any]) -> Path:
    """The lab's run record (module docstring), checked, written whole."""
    text = json.dumps(_checked_fields(dict(record), str(path), LAB_RECORD_FIELDS, LAB_RECORD_REQUIRED,
                                      "lab run record"), indent=1) + "\n"
    return write_whole(path, lambda file: file.write(text.encode("utf-8")))


def read_lab_record(path: str | os.PathLike) -> dict[str, Any]:
    """The lab's run record at ``path`` (module docstring), or :class:`RunDescriptionError` naming the file and what
    is wrong (a FIFO, a device, a huge file, not UTF-8, not JSON, not an object, a field of the wrong type)."""
    content = read_bounded(path, MAX_LAB_RECORD_BYTES, "lab run record (runs/<name>.json)", RunDescriptionError)
    data = parse_json(content, path, RunDescriptionError)
    return _checked_fields(data, str(path), LAB_RECORD_FIELDS, LAB_RECORD_REQUIRED, "lab run record")
