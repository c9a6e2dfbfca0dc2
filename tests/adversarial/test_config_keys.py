"""Every verl-ext config key, set to nan, +-inf or a value of the wrong type, is rejected by the driver's config
check (:func:`verl_ext.driver_checks.validate_run_config`, what ``main_ppo`` runs before Ray) with a ConfigError
that names the key.

The keys are read from the recipe config itself (every leaf verl-ext sets there) plus every key the catalog lists, so a key added later is tested without editing this file.
"""

import math
from contextlib import contextmanager
from functools import lru_cache

import pytest
from omegaconf import OmegaConf

from tests.recipe_config import OFFPOLICY_GRPO_OVERRIDES, compose_recipe
from verl_ext.algorithms.registry import ESTIMATORS, POLICY_LOSSES
from verl_ext.cli import recipe_defaults
from verl_ext.config_values import ConfigError
from verl_ext.driver_checks import LEARNING_RATE, validate_run_config

NAN, INF = float("nan"), float("inf")
# verl-ext checks this verl key (off-policy GRPO needs it >= 100); the recipe does not set it
THRESHOLD = "algorithm.rollout_correction.rollout_is_threshold"


def recipe_keys() -> dict[str, object]:
    """Dotted key -> default, for every leaf of the recipe config except Hydra's."""
    return {
        key: raw
        for key, raw in recipe_defaults().items()  # the recipe's own leaves, interpolations unresolved
        if not key.startswith(("hydra", "defaults")) and not key.endswith("_target_")
    }


def catalog_keys() -> set[str]:
    return {key for specs in (POLICY_LOSSES, ESTIMATORS) for spec in specs.values() for key in spec.keys}


KEYS = recipe_keys()
INTEGER_KEYS = {"algorithm.red_drop_seed"}  # its default is an interpolation of an integer seed


def bad_values(key: str, default) -> list:
    if isinstance(default, bool):
        return [NAN, INF, "abc", 2]
    if isinstance(default, int) or key in INTEGER_KEYS:
        return [NAN, INF, -INF, "abc", 1.5, True]
    if isinstance(default, float):
        return [NAN, INF, -INF, "abc", True]
    return [NAN, "abc"]  # a name (estimator, loss): only registered names pass


CASES = [(key, value) for key, default in KEYS.items() for value in bad_values(key, default)]
CASES += [(THRESHOLD, value) for value in (NAN, INF, -INF)]
CASES += [(LEARNING_RATE, value) for value in (NAN, INF, -INF, -1e-6, "abc")]  # the scripts' and the lab's knob


def test_every_catalog_key_and_every_recipe_key_is_covered():
    assert catalog_keys() <= set(KEYS), sorted(catalog_keys() - set(KEYS))
    assert {"actor_rollout_ref.actor.policy_loss.reg_coef", "trainer.v1.delayed_sync.sync_interval",
            "algorithm.red_drop_seed", "actor_rollout_ref.actor.clip_ratio_high"} <= set(KEYS)


@lru_cache(maxsize=None)
def base_config(offpolicy: bool):
    overrides = (*OFFPOLICY_GRPO_OVERRIDES, "actor_rollout_ref.actor.policy_loss.loss_mode=offpolicy_grpo") if offpolicy else ()
    return compose_recipe(*overrides)


def config_error_in(error: BaseException):
    """The ConfigError in an exception's chain (Hydra wraps the one raised while it builds the actor config)."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, ConfigError):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


@pytest.mark.filterwarnings("ignore:Disabled critic")
def test_the_base_configs_pass():
    validate_run_config(base_config(False))
    validate_run_config(base_config(True))


@contextmanager
def set_for_a_while(config, key: str, value):
    """Set one key of the shared config, and put its raw value (an interpolation stays one) back afterwards:
    cheaper than a deep copy of the whole config per case."""
    parent_key, _, leaf = key.rpartition(".")
    parent = OmegaConf.select(config, parent_key)
    raw = parent._get_node(leaf)._value()
    parent[leaf] = value
    try:
        yield config
    finally:
        parent[leaf] = raw


@pytest.mark.filterwarnings("ignore:Disabled critic")
@pytest.mark.parametrize("key,value", CASES, ids=[f"{key}={value!r}" for key, value in CASES])
def test_a_bad_value_is_a_config_error_naming_the_key(key, value):
    with set_for_a_while(base_config(key == THRESHOLD), key, value) as config, pytest.raises(Exception) as raised:
        validate_run_config(config)
    error = config_error_in(raised.value)
    assert error is not None, f"{key}={value!r}: {type(raised.value).__name__}: {raised.value}"
    message = str(error)
    assert key in message, message
    assert "allowed" in message.lower() or "must be" in message, message
    if isinstance(value, float) and not math.isfinite(value):
        assert repr(value) in message or str(value) in message, message
