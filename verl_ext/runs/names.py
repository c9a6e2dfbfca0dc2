"""What a run or project name may be: ``trainer.project_name``, ``trainer.experiment_name``, a folder and a
file name (metrics, checkpoints, ``<name>.run.json``) at once.

Every launcher checks the names it is given here (:func:`check_name`): the run scripts' ``PROJECT_NAME`` and
``EXPERIMENT_NAME``, a sweep's ``--project``, every :class:`verl_ext.cpu.launch.CPURun`. The format of the names
built from a preset and a setting is :func:`verl_ext.experiments.run_names.run_name`; it writes only
:data:`SAFE` characters.
"""

from __future__ import annotations

import re
from typing import Optional

SAFE = re.compile(r"[A-Za-z0-9_.@+=-]+")  # characters file names take as they are (match with fullmatch)
# the longest user-given name: a file name holds 255 bytes, and ``<name>.partN.jsonl`` must fit
MAX_NAME_LENGTH = 200
# what YAML (1.1 and 1.2) or Hydra's override grammar reads as null or a boolean
_NOT_A_STRING = {"null", "~", "true", "false", "yes", "no", "on", "off", "y", "n"}


def reads_as_other_than_text(name: str) -> Optional[str]:
    """What YAML or Hydra would read ``name`` as when it is not text (``"null"``, ``"a number"``, ``"a
    boolean"``), else None: ``null``, ``~``, ``true``, ``1e3``, ``0x10``, ``1_000``, ``inf``, ``.nan`` ..."""
    lowered = name.lower()
    if lowered in _NOT_A_STRING:
        return "null" if lowered in ("null", "~") else "a boolean"
    for parse in (float, lambda text: int(text, 0)):
        try:
            parse(name)
            return "a number"
        except ValueError:
            pass
    return None


def check_name(name: str, what: str) -> str:
    """A user-given project or experiment name (``trainer.project_name``, ``trainer.experiment_name``, a folder
    and a file name): ValueError naming ``what`` unless it is letters, digits and ``_ . @ + = -``, does not start
    with ``.`` or ``-`` (``.`` and ``..`` would put metrics and checkpoints outside their folders or into a
    shared one), is at most :data:`MAX_NAME_LENGTH` characters, and is not what YAML or Hydra reads as null, a
    number or a boolean (``null``, ``true``, ``1e3``, ``0x10``: the config would hold None, a bool or a number)."""
    if name != name.strip():
        raise ValueError(f"{what}={name!r} has white space (a newline?) at its start or end: remove it")
    if not SAFE.fullmatch(name):
        raise ValueError(f"{what}={name!r}: use letters, digits and _ . @ + = - only (it names a folder, files and a "
                         "config value)")
    if name.startswith((".", "-")):
        raise ValueError(f"{what}={name!r} starts with {name[0]!r}: a name must start with a letter, digit, _ @ + or = "
                         "('.' and '..' would put the metrics and checkpoints outside their folders)")
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError(f"{what}: a name of {len(name)} characters is too long (at most {MAX_NAME_LENGTH}: it names files)")
    other = reads_as_other_than_text(name)
    if other:
        raise ValueError(f"{what}={name!r}: YAML and Hydra read it as {other}, not a name: write it otherwise "
                         f"(e.g. run-{name})")
    return name
