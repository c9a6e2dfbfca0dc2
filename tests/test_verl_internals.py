"""verl_ext/verl_internals.py lists every private verl thing verl-ext touches; ``verl-ext doctor`` checks it.

- every entry holds against the installed verl 0.9.1;
- a renamed method, a changed signature, a verl function that stopped reading what we write: the check (and
  the doctor, which exits 1) names the entry, the verl file and what changed;
- the table is complete: every private method a verl-ext class shadows in its verl base class (found through
  the classes' MRO, in every verl_ext module that imports verl), every CPU patch (checked on the objects the
  patches really replace) and every module a registration waits for.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import verl  # noqa: F401  (loads the plugin, as in every verl process)
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
from verl.trainer.ppo.v1.trainer_base import PPOTrainer

import verl_ext
from verl_ext.cli import doctor_main
from verl_ext.verl_internals import (
    CALL,
    IMPORT_HOOK,
    KINDS,
    OVERRIDE,
    PATCH,
    VERL_INTERNALS,
    VerlInternal,
)
from verl_ext.verl_internals_check import mismatches, module_file, problem_with

PACKAGE_DIR = Path(verl_ext.__file__).parent


def test_every_entry_holds_against_the_installed_verl():
    assert mismatches() == []


def test_every_entry_names_a_kind_a_reason_and_an_existing_verl_file():
    for entry in VERL_INTERNALS:
        assert entry.kind in KINDS, entry
        assert entry.why.strip() and entry.used_by.strip(), entry
        file = module_file(entry.verl_file[: -len(".py")].replace("/", "."))
        assert file.as_posix().endswith((entry.verl_file, entry.verl_file[: -len(".py")] + "/__init__.py")), entry
        if entry.kind in (OVERRIDE, CALL, PATCH) and not entry.instance_attribute:
            assert entry.parameters is not None, f"{entry.what}: a callable needs its expected parameters"
    keys = [(entry.what, entry.kind) for entry in VERL_INTERNALS]
    assert len(keys) == len(set(keys)), "an entry is listed twice"


def test_a_renamed_private_method_makes_the_doctor_fail_naming_it(monkeypatch, capsys):
    original = PPOTrainer._load_checkpoint
    monkeypatch.delattr(PPOTrainer, "_load_checkpoint")
    monkeypatch.setattr(PPOTrainer, "_load_checkpoint_v2", original, raising=False)

    assert doctor_main([]) == 1
    out = capsys.readouterr().out
    failing = [line for line in out.splitlines() if line.startswith("FAIL verl internals")]
    assert failing == [
        "FAIL verl internals: verl.trainer.ppo.v1.trainer_base.PPOTrainer._load_checkpoint (override, "
        "verl/trainer/ppo/v1/trainer_base.py; used by verl_ext/staleness/trainer.py DelayedSyncTrainer): "
        "PPOTrainer._load_checkpoint no longer exists in verl.trainer.ppo.v1.trainer_base"
    ], out


def test_a_changed_signature_is_named_with_the_old_and_new_parameters(monkeypatch):
    def _clear_groups(self, partition_id, keys):  # verl renamed a parameter we pass
        return None

    monkeypatch.setattr(ReplayBuffer, "_clear_groups", _clear_groups)
    lines = mismatches()
    assert len(lines) == 1, lines
    assert lines[0].startswith("verl.trainer.ppo.v1.replay_buffer.ReplayBuffer._clear_groups (call, "
                               "verl/trainer/ppo/v1/replay_buffer.py")
    assert lines[0].endswith("parameters changed: expected (self, partition_id, uids), found (self, partition_id, keys)")


def test_an_attribute_verl_no_longer_reads_and_a_missing_module_are_named():
    unread = VerlInternal(
        "verl.trainer.ppo.v1.trainer_base", "PPOTrainer._enable_colocated_replicas", "attribute write", "test",
        "test", instance_attribute=True, read_in=("verl.trainer.ppo.v1.trainer_base:PPOTrainer._setup",),
    )
    assert problem_with(unread) == (
        "verl.trainer.ppo.v1.trainer_base:PPOTrainer._setup no longer contains '_enable_colocated_replicas': "
        "verl may not use it any more"
    )
    moved = VerlInternal("verl.trainer.ppo.v2.trainer_base", "PPOTrainer._setup", OVERRIDE, "test", "test", ("self",))
    assert problem_with(moved).startswith("module verl.trainer.ppo.v2.trainer_base does not import")
    gone = VerlInternal("verl.workers.rollout.base", "get_rollout_class", CALL, "test", "test",
                        read_in=("verl.workers.rollout.base:RolloutRegistry.get",))
    assert problem_with(gone) == "cannot read verl.workers.rollout.base:RolloutRegistry.get: verl.workers.rollout.base has no RolloutRegistry.get"


# ---------------------------------------------------------------- completeness


def _may_subclass_verl(path: Path) -> bool:
    """A module that imports verl at module level, or builds a class on a base computed at import time (the CPU
    rollout's ``class CPUServerAdapter(_base_rollout())``, which imports verl's base inside a function)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "verl":
            return True
        if isinstance(node, ast.Import) and any(alias.name.split(".")[0] == "verl" for alias in node.names):
            return True
        if isinstance(node, ast.ClassDef) and any(isinstance(base, ast.Call) for base in node.bases):
            return True
    return False


def verl_ext_classes_on_verl_bases() -> list[type]:
    """Every class with a verl class in its MRO, of each verl_ext module that may define one; and the CPU
    platform, built on first use."""
    from verl_ext.cpu_runtime.platform import cpu_platform_class

    classes = {cpu_platform_class()}
    for info in pkgutil.walk_packages([str(PACKAGE_DIR)], prefix="verl_ext."):
        path = PACKAGE_DIR.joinpath(*info.name.split(".")[1:])
        path = path / "__init__.py" if info.ispkg else path.with_name(path.name + ".py")
        if not _may_subclass_verl(path):
            continue
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and any(b.__module__.startswith("verl.") for b in cls.__mro__[1:]):
                classes.add(cls)
    return sorted(classes, key=lambda cls: cls.__qualname__)


def shadowed_private_methods() -> set[tuple[str, str]]:
    """(verl module, 'Base.method') for every private method a verl-ext class redefines over a verl base."""
    found = set()
    for cls in verl_ext_classes_on_verl_bases():
        for name in vars(cls):
            if not name.startswith("_") or name.startswith("__") or name.startswith("_abc"):
                continue
            base = next((b for b in cls.__mro__[1:] if b.__module__.startswith("verl.") and name in vars(b)), None)
            if base is not None:
                found.add((base.__module__, f"{base.__qualname__}.{name}"))
    return found


def test_the_completeness_check_finds_the_subclasses_it_must():
    names = {cls.__qualname__ for cls in verl_ext_classes_on_verl_bases()}
    assert {"DelayedSyncTrainer", "ScheduledReplayBuffer", "CPURolloutReplica", "CPUServerAdapter",
            "GlooCheckpointEngine", "SeededSingleTurnAgentLoop", "CPUPlatform"} <= names


def test_every_private_method_a_verl_ext_class_shadows_is_listed_as_an_override():
    listed = {(entry.module, entry.name) for entry in VERL_INTERNALS if entry.kind == OVERRIDE}
    shadowed = shadowed_private_methods()
    assert len(shadowed) >= 15  # the trainer's 13 and the replay buffer's 2, at verl 0.9.1
    assert shadowed - listed == set(), "add these to verl_ext/verl_internals.py"


def test_every_cpu_patch_is_listed_with_the_object_it_really_replaces():
    from verl_ext.cpu_runtime import patches

    listed = {entry.why.split(":", 1)[0]: entry for entry in VERL_INTERNALS
              if entry.kind == PATCH and entry.used_by == "verl_ext/cpu_runtime/patches.py"}
    assert set(listed) == {patch.name for patch in patches.PATCHES}
    active = patches.active_patches()
    patches.apply_cpu_patches()
    try:
        for name, entry in listed.items():
            target = importlib.import_module(entry.module)
            for part in entry.name.split("."):
                target = getattr(target, part)
            assert getattr(target, "__verl_ext_patch__", None) == name, entry.what
    finally:
        if not active:
            patches.remove_cpu_patches()


def test_the_driver_checks_patch_is_listed_on_the_function_it_replaces():
    from verl.utils import config as verl_config

    from verl_ext.driver_checks import VERL_EXT_HOOK

    entry = next(entry for entry in VERL_INTERNALS if entry.name == "validate_config")
    assert entry.kind == PATCH and entry.module == verl_config.__name__
    assert getattr(verl_config.validate_config, VERL_EXT_HOOK, False)


def test_the_mismatch_in_update_patch_is_listed_on_the_method_it_replaces():
    from verl.workers import engine_workers

    from verl_ext.staleness import mismatch_in_update

    entry = next(entry for entry in VERL_INTERNALS if entry.used_by == "verl_ext/staleness/mismatch_in_update.py"
                 and entry.kind == PATCH)
    assert (entry.module, entry.name) == (engine_workers.__name__, "TrainingWorker.train_batch")
    assert entry.why.startswith(mismatch_in_update.PATCH_NAME + ":")
    # installed by the plugin's hook when verl imported its engine workers (above)
    assert getattr(engine_workers.TrainingWorker.train_batch, mismatch_in_update.PATCH_MARK) == mismatch_in_update.PATCH_NAME


def test_every_module_a_registration_waits_for_is_listed_as_an_import_hook():
    from verl_ext import plugin

    waited_for = {row.module for row in plugin.wiring()}
    assert waited_for == {entry.module for entry in VERL_INTERNALS if entry.kind == IMPORT_HOOK}


def _imported_modules(module: str, top_level_only: bool) -> set[str]:
    tree = ast.parse(module_file(module).read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    names = {alias.name for node in nodes if isinstance(node, ast.Import) for alias in node.names}
    return names | {node.module for node in nodes if isinstance(node, ast.ImportFrom)}


def test_seeding_and_the_seeded_agent_loop_import_one_way():
    """seeded_agent_loop imports seeding, never the reverse; the plugin imports the agent loop only inside the
    hook that runs when verl imports its own single-turn agent loop."""
    assert "verl_ext.seeding" in _imported_modules("verl_ext.seeded_agent_loop", top_level_only=True)
    assert "verl_ext.seeded_agent_loop" not in _imported_modules("verl_ext.seeding", top_level_only=False)
    assert "verl_ext.seeded_agent_loop" not in _imported_modules("verl_ext.plugin", top_level_only=True)
