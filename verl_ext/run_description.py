"""A run's description, ``<experiment>.run.json`` beside its metrics file: written by the run scripts' launcher
(:mod:`verl_ext.experiments.modes`, from :meth:`verl_ext.runs.run.Run.description`), read by ``verl-ext plot``
(:mod:`verl_ext.plotting`).

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
===================  ======  ===================================================================

``run`` and ``group`` are required (a description written by hand may hold only them); the others are optional.
Written whole (:func:`verl_ext.files.write_whole`); read back as a regular file of at most :data:`MAX_BYTES`,
a JSON object with these fields only, each of its type: anything else is a :class:`RunDescriptionError`
naming the file and the field.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from verl_ext.files import parse_json, read_bounded, write_whole

SUFFIX = ".run.json"
MAX_BYTES = 64 * 1024
REQUIRED = ("run", "group")


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


def _checked(data, where: str) -> RunDescription:
    types = {field.name: field.type for field in fields(RunDescription)}
    if not isinstance(data, dict):
        raise RunDescriptionError(f"{where}: expected a JSON object with the fields {', '.join(types)}, "
                                  f"got {type(data).__name__}")
    for name in REQUIRED:
        if name not in data:
            raise RunDescriptionError(f"{where}, field {name!r}: missing")
    for name, value in data.items():
        if name not in types:
            raise RunDescriptionError(f"{where}, field {name!r}: not a field of a run description "
                                      f"(fields: {', '.join(types)})")
        wanted = bool if types[name] in (bool, "bool") else str
        if type(value) is not wanted:
            shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
            raise RunDescriptionError(f"{where}, field {name!r}: expected {'true or false' if wanted is bool else 'a string'}, "
                                      f"got {shown}")
    if not data["run"].strip():
        raise RunDescriptionError(f"{where}, field 'run': empty (the curve's label)")
    return RunDescription(**data)
