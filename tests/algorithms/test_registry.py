"""The registry: each registered name is written once, on its function, in the module of its algorithm (the presets
name the ones they pair up, as uses); the keys the losses read are the declared hyperparameters, whose policy-loss
keys are the policy-loss config's fields and the recipe config's keys, with the declared defaults (one source:
verl_ext/algorithms/hyperparameters.py); and the names and keys are read without importing torch."""

import ast
import subprocess
import sys
from pathlib import Path

from omegaconf import OmegaConf

from tests.recipe_config import RECIPE_CONFIG_DIR, REPO
from verl_ext.algorithms import presets
from verl_ext.algorithms.hyperparameters import ACTOR, CLIPPING_RANGE, DECLARED, POLICY_LOSS_NODE, default_of, key_of
from verl_ext.algorithms.loss_config import OWN_KEYS, RECPolicyLossConfig
from verl_ext.algorithms.registry import ESTIMATORS, POLICY_LOSSES

PACKAGE = REPO / "verl_ext" / "algorithms"  # (figure scripts and grids elsewhere name presets, not definitions)
PRESETS = PACKAGE / "presets.py"  # names the registered names it pairs up: uses, checked there to be registered


def literal_places(values: set[str]) -> dict[str, list[tuple[str, int]]]:
    """value -> [(file, line)] of every string literal of the algorithm core equal to one of ``values``."""
    places: dict[str, list[tuple[str, int]]] = {value: [] for value in values}
    for path in sorted(set(PACKAGE.rglob("*.py")) - {PRESETS}):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in places:
                places[node.value].append((str(path.relative_to(REPO)), node.lineno))
    return places


def decorated_names(path: Path) -> set[str]:
    """The first argument of every ``@policy_loss(...)`` / ``@estimator(...)`` decorator in ``path``."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Call) and getattr(decorator.func, "id", None) in ("policy_loss", "estimator"):
                    names.add(decorator.args[0].value)
    return names


def test_every_registered_name_is_written_once_in_the_core_in_the_decorator_on_its_function():
    specs = {**POLICY_LOSSES, **ESTIMATORS}
    places = literal_places(set(specs))
    for name, spec in specs.items():
        function = getattr(spec, "function", None) or spec.compute
        module = Path(sys.modules[function.__module__].__file__)
        assert places[name] == [(str(module.relative_to(REPO)), places[name][0][1])], (name, places[name])
        assert name in decorated_names(module), name
    assert {presets.REC_ESTIMATOR, presets.RED_DROP} <= set(ESTIMATORS)
    assert {presets.PLAIN_REINFORCE, presets.PAPER_GRPO_LOSS} <= set(POLICY_LOSSES)


def test_the_declared_keys_are_the_config_fields_and_the_recipe_keys_with_their_defaults():
    read = {key for spec in POLICY_LOSSES.values() for key in spec.keys}
    assert read == {key_of(name) for name in DECLARED}  # every key a loss reads is declared, and read by a loss
    declared = {key_of(name): default_of(name) for name in OWN_KEYS}
    assert {key for key in read if key.startswith(POLICY_LOSS_NODE + ".")} == set(declared)
    config = RECPolicyLossConfig(loss_mode="rec_oneside_nois")
    assert {key: getattr(config, key.rsplit(".", 1)[1]) for key in declared} == declared
    recipe_config = OmegaConf.load(RECIPE_CONFIG_DIR / "rec_trainer.yaml").actor_rollout_ref.actor
    node = recipe_config.policy_loss
    recipe = {f"{POLICY_LOSS_NODE}.{name}": node[name] for name in node if name not in ("_target_", "loss_mode")}
    assert recipe == declared  # no other key in the node (no mirrors)
    # verl's clipping range: the declared defaults are verl's and the recipe's
    from verl.workers.config import ActorConfig

    clipping = {key_of(name): default_of(name) for name in CLIPPING_RANGE}
    assert clipping == {f"{ACTOR}.{name}": ActorConfig.__dataclass_fields__[name].default for name in CLIPPING_RANGE}
    assert clipping == {f"{ACTOR}.{name}": recipe_config[name] for name in CLIPPING_RANGE}


def test_names_and_keys_are_read_without_importing_torch():
    code = ("import sys; from verl_ext.algorithms.registry import POLICY_LOSSES, ESTIMATORS; "
            "assert len(POLICY_LOSSES) > 10 and ESTIMATORS; print(sorted({'torch', 'verl', 'numpy'} & set(sys.modules)))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"
