"""What installing verl-ext writes: a real wheel built from a copy of the sources (``pip wheel``), installed
into a fresh target folder (``pip install --target``). It holds ``verl_ext`` and ``data_prep`` with the recipe
config inside ``verl_ext``, and no top-level name that any installed distribution (verl and its dependencies)
owns; verl's own installed files still have the hashes its RECORD lists.

Needs the ``wheel`` package (in the ``test`` extra) and no network: ``--no-build-isolation --no-index``.
"""

import base64
import hashlib
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

# its child processes (a fresh interpreter importing verl or torch) may take minutes on a loaded machine: the
# per-test limit stays above their own time-outs, so a slow child fails with its own message, a hang still here
pytestmark = pytest.mark.timeout(600)

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("setup.py", "README.md", "verl_ext", "data_prep", "recipe")


def _pip(*args: str, cwd: Path) -> None:
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args, "--no-deps", "--no-index"]
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The target folder a wheel of this checkout was installed into."""
    pytest.importorskip("wheel", reason="building a wheel needs the 'wheel' package (pip install -e '.[test]')")
    root = tmp_path_factory.mktemp("packaging")
    source = root / "src"
    source.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, source / name, symlinks=True, ignore=ignore)
        else:
            shutil.copy2(path, source / name)
    wheels = root / "wheels"
    _pip("wheel", "--no-build-isolation", "-w", str(wheels), str(source), cwd=root)
    (wheel,) = wheels.glob("verl_ext-*.whl")
    target = root / "target"
    _pip("install", "--target", str(target), str(wheel), cwd=root)
    return target


def top_level_names(distribution: metadata.Distribution) -> set[str]:
    names = set()
    for file in distribution.files or ():
        first = file.parts[0]
        if first not in ("..", "__pycache__") and not first.endswith((".dist-info", ".egg-info", ".pth")):
            names.add(first.removesuffix(".py"))
    return names


def test_install_writes_no_top_level_recipe_and_collides_with_no_installed_distribution(installed):
    ours = {path.name for path in installed.iterdir() if not path.name.endswith(".dist-info") and path.name != "bin"}
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


def test_verls_installed_files_are_untouched(installed):
    """Every file verl's RECORD lists with a hash is there with that hash (nothing verl-ext did rewrote one),
    and the wheel installs none of verl's paths."""
    verl = metadata.distribution("verl")
    checked, changed = 0, []
    for file in verl.files or ():
        if file.hash is None or file.hash.mode != "sha256":
            continue
        digest = base64.urlsafe_b64encode(hashlib.sha256(Path(verl.locate_file(file)).read_bytes()).digest()).rstrip(b"=").decode()
        checked += 1
        if digest != file.hash.value:
            changed.append(str(file))
    assert checked > 100 and not changed, f"verl files changed: {changed[:10]}"
    ours = {str(path.relative_to(installed)) for path in installed.rglob("*") if path.is_file()}
    assert not ours & {str(file) for file in verl.files or ()}


def test_the_recipe_config_ships_in_verl_ext_and_is_the_checkouts_file(installed):
    packaged = installed / "verl_ext" / "recipe" / "rec_trainer.yaml"
    assert packaged.is_file() and not packaged.is_symlink()
    checkout = REPO / "recipe" / "rec" / "config" / "rec_trainer.yaml"
    assert checkout.resolve() == (REPO / "verl_ext" / "recipe" / "rec_trainer.yaml").resolve()  # one file, two paths
    assert packaged.read_bytes() == checkout.read_bytes()
    assert not (REPO / "recipe" / "__init__.py").exists()  # the checkout's recipe/ is not a package


def test_an_install_without_a_checkout_finds_its_packaged_recipe(installed):
    """``verl-ext list`` reads the recipe's defaults from the installed package (run from outside the checkout)."""
    code = (
        "from verl_ext.cli import recipe_defaults; from verl_ext.recipe import config_dir; "
        "print(config_dir()); print(recipe_defaults()['actor_rollout_ref.actor.policy_loss._target_'])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=installed.parent, capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(installed), "PATH": ""}
    )
    assert result.returncode == 0, result.stderr
    directory, target = result.stdout.split()
    assert Path(directory) == installed / "verl_ext" / "recipe" and target == "verl_ext.algorithms.loss_config.RECPolicyLossConfig"
