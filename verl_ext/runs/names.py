"""Run names: what a run or project name may be, and the one format of the names built from the presets.

A name is ``trainer.project_name`` or ``trainer.experiment_name``, a folder and a file name (metrics,
checkpoints, ``<name>.run.json``) at once. Every name is checked here (:func:`check_name`): the run scripts'
``PROJECT_NAME`` and ``EXPERIMENT_NAME``, a sweep's ``--project``, every :class:`verl_ext.runs.run.Run`.

The names built from an algorithm preset and a staleness setting (:func:`run_name`; ``trainer.experiment_name``,
metrics file names, lab tables, plot labels) have one format:

    <algorithm>[-lr<lr>][-zvm][-<setting>][-T<steps>][-P<prompts>][-seed<seed>]

``<algorithm>`` is the preset's label (``rec_oneside_nois`` or ``rec_oneside_nois@0.6_2``), ``<setting>`` the
setting's name (``sync_interval_20``; absent for a run in verl's own ``sync`` mode, the quickstart's), numbers as
:func:`verl_ext.algorithms.presets.number_label` writes them; the parts in brackets appear when the run sets them
(the run scripts name a learning rate only in a learning-rate sweep, zero-variance masking only when on; the lab
adds steps, a non-default batch and the seed). Example: ``rec_oneside_nois@0.6_2-lr2e-06-sync_interval_20``.
It writes only :data:`SAFE` characters.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

from verl_ext.algorithms.presets import number_label

if TYPE_CHECKING:
    from verl_ext.algorithms.presets import AlgorithmChoice
    from verl_ext.staleness.setting import Setting

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


def run_name(
    algorithm: "AlgorithmChoice",
    setting: "Optional[Setting]" = None,
    learning_rate: Optional[float] = None,
    zero_variance_masking: bool = False,
    steps: Optional[int] = None,
    prompts_per_step: Optional[int] = None,
    seed: Optional[int] = None,
) -> str:
    """The run's name in the one format (module docstring); a part that is None (or False) is left out."""
    parts = [algorithm.label]
    if learning_rate is not None:
        parts.append(f"lr{number_label(learning_rate)}")
    if zero_variance_masking:
        parts.append("zvm")
    if setting is not None:
        parts.append(setting.label)
    if steps is not None:
        parts.append(f"T{steps}")
    if prompts_per_step is not None:
        parts.append(f"P{prompts_per_step}")
    if seed is not None:
        parts.append(f"seed{seed}")
    name = "-".join(parts)
    assert SAFE.fullmatch(name), name  # every part above is built from safe characters
    return name
