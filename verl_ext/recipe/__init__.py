"""The recipe config, ``rec_trainer.yaml``: verl's ``ppo_trainer`` plus every key verl-ext adds.

It ships here, as package data of ``verl_ext``, so an installed verl-ext finds it without a checkout and
installing writes no top-level ``recipe`` package (site-packages already has a ``recipe/`` from one of
verl's dependencies). A checkout keeps ``recipe/rec/config/rec_trainer.yaml``, a symlink to this file, for
``--config-path=$PWD/recipe/rec/config``: one file, two paths.
"""

from pathlib import Path

CONFIG_NAME = "rec_trainer"


def config_dir() -> Path:
    """The folder to pass as ``--config-path`` (with ``--config-name=rec_trainer``)."""
    directory = Path(__file__).resolve().parent
    if not (directory / f"{CONFIG_NAME}.yaml").is_file():
        raise FileNotFoundError(f"recipe config {CONFIG_NAME}.yaml is missing from {directory}: reinstall verl-ext")
    return directory
