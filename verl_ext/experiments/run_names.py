"""The one format of run names (``trainer.experiment_name``, metrics file names, lab tables, plot labels).

    <algorithm>[-lr<lr>][-zvm]-<setting>[-T<steps>][-P<prompts>][-seed<seed>]

``<algorithm>`` is the preset's label (``rec_oneside_nois`` or ``rec_oneside_nois@0.6_2``), ``<setting>`` the
setting's name (``sync_interval_20``), numbers as :func:`verl_ext.experiments.algorithms.number_label` writes
them; the parts in brackets appear when the run sets them (the run scripts name a learning rate only in a
learning-rate sweep, zero-variance masking only when on; the lab adds steps, a non-default batch and the
seed). Example: ``rec_oneside_nois@0.6_2-lr2e-06-sync_interval_20``. What any name may hold (a user-given one
too): :mod:`verl_ext.runs.names`.
"""

from __future__ import annotations

from typing import Optional

from verl_ext.experiments.algorithms import AlgorithmChoice, number_label
from verl_ext.staleness.setting import Setting
from verl_ext.runs.names import SAFE


def run_name(
    algorithm: AlgorithmChoice,
    setting: Setting,
    learning_rate: Optional[float] = None,
    zero_variance_masking: bool = False,
    steps: Optional[int] = None,
    prompts_per_step: Optional[int] = None,
    seed: Optional[int] = None,
) -> str:
    parts = [algorithm.label]
    if learning_rate is not None:
        parts.append(f"lr{number_label(learning_rate)}")
    if zero_variance_masking:
        parts.append("zvm")
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
