"""Keys accepted and ignored, second round: every ``trainer.v1.delayed_sync`` key set to another value than its
default while the trainer mode is not ``delayed_sync`` (or ``trainer.use_v1=false``) used to be accepted and the
run was silently on-policy. The driver check (:func:`verl_ext.driver_checks.validate_run_config`, what ``main_ppo``
runs before Ray, and the dry run) now refuses it, naming the key and saying to set the mode. The keys come from
:class:`verl_ext.staleness.config.DelayedSyncConfig`, so a key added later is covered without editing this file.
The driver's own path (main_ppo before ray.init) for two of them: tests/adversarial/test_config_paths.py."""

from dataclasses import fields
from functools import lru_cache

import pytest

from tests.adversarial.test_config_keys import config_error_in, set_for_a_while
from tests.recipe_config import compose_recipe
from verl_ext.driver_checks import validate_run_config
from verl_ext.staleness.config import CONFIG_KEY, DelayedSyncConfig

DEFAULTS = DelayedSyncConfig()


def another_value(name: str):
    default = getattr(DEFAULTS, name)
    if isinstance(default, bool):
        return not default
    if isinstance(default, int):
        return default + 3
    return default / 2  # a fraction: actor_memory_fraction


KEYS = [field.name for field in fields(DelayedSyncConfig)]
MODES = {"sync": ("trainer.v1.trainer_mode=sync",), "use_v1=false": ("trainer.use_v1=false",)}


@lru_cache(maxsize=None)
def base_config(mode: str):
    return compose_recipe(*MODES[mode])


@pytest.mark.filterwarnings("ignore:Disabled critic")
@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("name", KEYS)
def test_a_delayed_sync_key_outside_the_mode_is_refused(mode, name):
    key, value = f"{CONFIG_KEY}.{name}", another_value(name)
    with set_for_a_while(base_config(mode), key, value) as config, pytest.raises(Exception) as raised:
        validate_run_config(config)
    error = config_error_in(raised.value)
    assert error is not None, f"{key}={value!r}: {type(raised.value).__name__}: {raised.value}"
    message = str(error)
    assert message.startswith(f"{key}={value!r} is invalid"), message
    assert "set trainer.v1.trainer_mode=delayed_sync" in message, message
    if mode == "use_v1=false":
        assert "and trainer.use_v1=true" in message, message


@pytest.mark.filterwarnings("ignore:Disabled critic")
def test_the_defaults_written_out_are_accepted_outside_the_mode():
    """The recipe itself writes every default; writing one again changes nothing and is fine."""
    config = base_config("sync")
    for name in KEYS:
        with set_for_a_while(config, f"{CONFIG_KEY}.{name}", getattr(DEFAULTS, name)):
            validate_run_config(config)
