"""What installing verl-ext writes into site-packages: ``verl_ext`` and ``data_prep``, with the recipe config
inside ``verl_ext``, and no top-level name that any installed distribution (verl and its dependencies) owns.

The files come from ``setup.py build_py`` run on a copy of the sources: the step of ``pip install`` / ``pip
wheel`` that collects packages and package data, i.e. what the wheel's purelib holds (the venv has no
``wheel`` package and the machine no network, so the wheel itself is not zipped here). Every file a
distribution writes lies under one of its top-level names, so disjoint names mean verl's files are untouched.
"""

import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("setup.py", "README.md", "verl_ext", "data_prep", "recipe")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("packaging")
    source = root / "src"
    source.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, source / name, symlinks=True, ignore=ignore)
        else:
            shutil.copy2(path, source / name)
    lib = root / "lib"
    result = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(lib)], cwd=source, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return lib


def top_level_names(distribution: metadata.Distribution) -> set[str]:
    names = set()
    for file in distribution.files or ():
        first = file.parts[0]
        if first not in ("..", "__pycache__") and not first.endswith((".dist-info", ".egg-info", ".pth")):
            names.add(first.removesuffix(".py"))
    return names


def test_install_writes_no_top_level_recipe_and_collides_with_no_installed_distribution(built):
    ours = {path.name.removesuffix(".py") for path in built.iterdir()}
    assert ours == {"verl_ext", "data_prep"}
    owners = {}
    for distribution in metadata.distributions():
        if distribution.metadata["Name"] in ("verl-ext", "verl_ext"):
            continue
        for name in top_level_names(distribution) & ours:
            owners.setdefault(name, []).append(distribution.metadata["Name"])
    assert not owners, f"installing verl-ext would overwrite files of {owners}"
    verl = top_level_names(metadata.distribution("verl"))
    assert "verl" in verl and not verl & ours  # guards the loop above: verl's RECORD is read


def test_the_recipe_config_ships_in_verl_ext_and_is_the_checkouts_file(built):
    packaged = built / "verl_ext" / "recipe" / "rec_trainer.yaml"
    assert packaged.is_file() and not packaged.is_symlink()
    checkout = REPO / "recipe" / "rec" / "config" / "rec_trainer.yaml"
    assert checkout.resolve() == (REPO / "verl_ext" / "recipe" / "rec_trainer.yaml").resolve()  # one file, two paths
    assert packaged.read_bytes() == checkout.read_bytes()
    assert not (REPO / "recipe" / "__init__.py").exists()  # the checkout's recipe/ is not a package


def test_an_install_without_a_checkout_finds_its_packaged_recipe(built):
    """``verl-ext list`` reads the recipe's defaults from the installed package (run from outside the checkout)."""
    code = (
        "from verl_ext.cli import recipe_defaults; from verl_ext.recipe import config_dir; "
        "print(config_dir()); print(recipe_defaults()['actor_rollout_ref.actor.policy_loss._target_'])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=built.parent, capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(built), "PATH": ""}
    )
    assert result.returncode == 0, result.stderr
    directory, target = result.stdout.split()
    assert Path(directory) == built / "verl_ext" / "recipe" and target == "verl_ext.config.RECPolicyLossConfig"
