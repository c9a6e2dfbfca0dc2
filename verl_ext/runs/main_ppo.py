"""The one command line of verl's trainer, ``python -m verl.trainer.main_ppo --config-path=DIR --config-name=NAME
[overrides...]``, as every launcher writes it.

:func:`arguments` is what follows the module (what the dry run checks, :func:`verl_ext.preflight.preflight`, and
what :func:`verl_ext.preflight.parse_main_ppo_argv` reads back); :func:`command` starts it with this Python. The
one launcher (:func:`verl_ext.runs.launch.main_ppo_arguments`) builds every run's here.
"""

from __future__ import annotations

import os
import sys
from typing import Iterable, Sequence

MODULE = "verl.trainer.main_ppo"


def arguments(config_dir: str | os.PathLike, config_name: str, overrides: Iterable[str]) -> list[str]:
    """``--config-path=DIR --config-name=NAME overrides...``."""
    return [f"--config-path={config_dir}", f"--config-name={config_name}", *overrides]


def command(main_ppo_arguments: Sequence[str]) -> list[str]:
    """``python -m verl.trainer.main_ppo ARGUMENTS`` with this process's Python."""
    return [sys.executable, "-m", MODULE, *main_ppo_arguments]
