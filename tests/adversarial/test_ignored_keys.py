"""Keys accepted and ignored. Second round: every ``trainer.v1.delayed_sync`` key set to another value than its
default while the trainer mode is not ``delayed_sync`` (or ``trainer.use_v1=false``) used to be accepted and the
run was silently on-policy. The driver check (:func:`verl_ext.driver_checks.validate_run_config`, what ``main_ppo``
runs before Ray, and the dry run) now refuses it, naming the key and saying to set the mode. The keys come from
:class:`verl_ext.staleness.config.DelayedSyncConfig`, so a key added later is covered without editing this file.
The driver's own path (main_ppo before ray.init) for two of them: tests/adversarial/test_config_paths.py.

Third round (below): verl's clipping range with a loss that reads none, ``rollout.n=1`` with an estimator whose
baseline is the prompt's group, and the keys of the rollout engine's own pool under a trainer mode that keeps the
engine with the actor."""

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
    if isinstance(default, tuple):  # phases: a valid list of two
        return [{"start_step": 0, "sync_interval": 1}, {"start_step": 1, "sync_interval": 2}]
    return default / 2  # a fraction: actor_memory_fraction


KEYS = [field.name for field in fields(DelayedSyncConfig)]
MODES = {"sync": ("trainer.v1.trainer_mode=sync",), "colocate_async": ("trainer.v1.trainer_mode=colocate_async",),
         "use_v1=false": ("trainer.use_v1=false",)}


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


# ---------------------------------------------------------------------------------------------------------------
# Third round (issue 31, item 3): the clipping range given to a loss that reads none, one response per prompt with
# a group baseline, and the keys of the rollout engine's own pool under a trainer that keeps the engine with the
# actor. Each was accepted and ignored (or, under verl's legacy trainer, refused only inside Ray).
# ---------------------------------------------------------------------------------------------------------------

from tests.adversarial.test_config_keys import base_config as recipe_base_config  # noqa: E402
from tests.adversarial.test_config_paths import RayStarted, compose, driver  # noqa: E402,F401  (driver: a fixture)

LOSS_MODE = "actor_rollout_ref.actor.policy_loss.loss_mode"
CLIP_LOW, CLIP_HIGH = "actor_rollout_ref.actor.clip_ratio_low", "actor_rollout_ref.actor.clip_ratio_high"
# Written out from the papers (docs/algorithms.md), not read from the catalog: who reads verl's clipping range.
CLIPPED = ["offpolicy_grpo", "rec_gspo_is", "rec_gspo_nois", "rec_oneside_is", "rec_oneside_nois", "rec_ring_is",
           "rec_ring_nois", "rec_twoside_is", "rec_twoside_nois"]
UNCLIPPED = ["asymre", "m2po", "opmd", "rec_reinforce", "red_weight", "topr"]


def refusal(config) -> str:
    with pytest.raises(Exception) as raised:
        validate_run_config(config)
    error = config_error_in(raised.value)
    assert error is not None, f"{type(raised.value).__name__}: {raised.value}"
    return str(error)


def test_the_loss_lists_above_are_every_loss_of_ours():
    from verl_ext.algorithms.registry import POLICY_LOSSES

    assert sorted(CLIPPED + UNCLIPPED) == sorted(POLICY_LOSSES)


@pytest.mark.filterwarnings("ignore:Disabled critic")
@pytest.mark.parametrize("key,value", [(CLIP_LOW, 0.3), (CLIP_HIGH, 0.5)])
@pytest.mark.parametrize("loss_mode", UNCLIPPED)
def test_the_clipping_range_is_refused_with_a_loss_that_reads_none(loss_mode, key, value):
    config = recipe_base_config(False)
    with set_for_a_while(config, LOSS_MODE, loss_mode), set_for_a_while(config, key, value):
        message = refusal(config)
    assert message.startswith(f"{key}={value!r} is invalid"), message
    assert f"loss_mode={loss_mode!r}, which does not read it" in message, message
    assert f"Only {CLIPPED} and verl's own clipped losses read it" in message, message


@pytest.mark.filterwarnings("ignore:Disabled critic")
@pytest.mark.parametrize("loss_mode", CLIPPED)
def test_the_losses_that_read_the_clipping_range_take_another_one(loss_mode):
    config = recipe_base_config(loss_mode == "offpolicy_grpo")
    with set_for_a_while(config, LOSS_MODE, loss_mode), set_for_a_while(config, CLIP_LOW, 0.1), \
            set_for_a_while(config, CLIP_HIGH, 0.3):
        validate_run_config(config)


@pytest.mark.filterwarnings("ignore:Disabled critic")
@pytest.mark.parametrize("loss_mode", UNCLIPPED + ["vanilla"])
def test_the_default_range_written_out_passes_with_every_loss(loss_mode):
    """The presets write the default range for every loss (and verl's own losses read it as verl does)."""
    config = recipe_base_config(False)
    with set_for_a_while(config, LOSS_MODE, loss_mode), set_for_a_while(config, CLIP_LOW, 0.2), \
            set_for_a_while(config, CLIP_HIGH, 0.2):
        validate_run_config(config)
    with set_for_a_while(config, LOSS_MODE, loss_mode), set_for_a_while(config, CLIP_LOW, 0.3):
        if loss_mode == "vanilla":
            validate_run_config(config)  # verl's own loss reads it
        else:
            refusal(config)


# verl's own loss keys with a verl-ext loss, which reads none of them. Written out from verl 0.9.1's core_algos.py:
# who reads each, and a value other than verl's default.
VERL_KEYS = {
    "actor_rollout_ref.actor.clip_ratio_c": (10.0, ["dppo_kl", "dppo_tv", "vanilla"]),
    "actor_rollout_ref.actor.policy_loss.clip_cov_ratio": (0.001, ["clip_cov"]),
    "actor_rollout_ref.actor.policy_loss.clip_cov_ub": (4.0, ["clip_cov"]),
    "actor_rollout_ref.actor.policy_loss.kl_cov_ratio": (0.001, ["kl_cov"]),
    "actor_rollout_ref.actor.policy_loss.ppo_kl_coef": (0.5, ["kl_cov"]),
    "actor_rollout_ref.actor.policy_loss.dro_beta": (0.2, ["dro"]),
}


@pytest.mark.filterwarnings("ignore:Disabled critic")
@pytest.mark.parametrize("key", sorted(VERL_KEYS))
def test_a_key_of_verls_losses_is_refused_with_a_loss_of_ours_and_taken_by_its_reader(key):
    value, verl_readers = VERL_KEYS[key]
    config = recipe_base_config(False)
    with set_for_a_while(config, key, value):
        message = refusal(config)
        assert message.startswith(f"{key}={value!r} is invalid"), message
        assert f"Only verl's {verl_readers} read it" in message, message
        with set_for_a_while(config, LOSS_MODE, verl_readers[-1]):
            validate_run_config(config)


@pytest.mark.filterwarnings("ignore:Disabled critic")
def test_verls_clip_ratio_is_refused_unless_it_stands_in_for_a_null_range():
    config = recipe_base_config(False)
    with set_for_a_while(config, "actor_rollout_ref.actor.clip_ratio", 0.3):
        message = refusal(config)
        assert message.startswith("actor_rollout_ref.actor.clip_ratio=0.3 is invalid"), message
        assert f"in place of a null {CLIP_LOW}" in message, message
        with set_for_a_while(config, CLIP_LOW, None), set_for_a_while(config, CLIP_HIGH, None):
            validate_run_config(config)  # read: the range is (0.3, 0.3)


ROLLOUT_N = "actor_rollout_ref.rollout.n"
# one response per prompt: verl-ext's estimators give every response A = 0, verl's grpo drops its baseline (A = r),
# verl's vectorized grpo gives 0, its grpo_passk raises in the first step (after Ray starts)
GROUP_ESTIMATORS = ["rec", "red_drop", "grpo", "grpo_vectorized", "rloo", "grpo_passk"]


@pytest.mark.filterwarnings("ignore:Disabled critic")
@pytest.mark.parametrize("estimator", GROUP_ESTIMATORS)
def test_one_response_per_prompt_is_refused_with_a_group_baseline(estimator):
    config = recipe_base_config(False)
    with set_for_a_while(config, "algorithm.adv_estimator", estimator), set_for_a_while(config, ROLLOUT_N, 1):
        message = refusal(config)
    assert message.startswith(f"{ROLLOUT_N}=1 is invalid: allowed values are an integer >= 2 with "
                              f"algorithm.adv_estimator={estimator}"), message


@pytest.mark.filterwarnings("ignore:Disabled critic")
def test_one_response_per_prompt_passes_without_a_group_baseline():
    config = recipe_base_config(False)
    with set_for_a_while(config, "algorithm.adv_estimator", "reinforce_plus_plus"), set_for_a_while(config, ROLLOUT_N, 1):
        validate_run_config(config)


HYBRID_ENGINE, BACKEND = "actor_rollout_ref.hybrid_engine", "actor_rollout_ref.rollout.checkpoint_engine.backend"
ENGINE_NODES, ENGINE_GPUS = "actor_rollout_ref.rollout.nnodes", "actor_rollout_ref.rollout.n_gpus_per_node"
SPLIT_KEYS = [(HYBRID_ENGINE, False), (ENGINE_NODES, 1), (ENGINE_GPUS, 3), (BACKEND, "nccl"), (BACKEND, "bogus")]
COLOCATED = ["colocate_async", "sync"]  # verl's v1 modes that keep the engine with the actor


@pytest.mark.filterwarnings("ignore:Disabled critic")
@pytest.mark.parametrize("mode", COLOCATED)
@pytest.mark.parametrize("key,value", SPLIT_KEYS, ids=[f"{key.rsplit('.', 1)[1]}={value}" for key, value in SPLIT_KEYS])
def test_a_key_of_the_engines_own_pool_is_refused_where_the_engine_stays_with_the_actor(mode, key, value):
    with set_for_a_while(base_config(mode), key, value) as config:
        message = refusal(config)
    assert message.startswith(f"{key}={value!r} is invalid"), message
    assert f"with trainer.v1.trainer_mode={mode}" in message, message
    assert "trainer.v1.trainer_mode=separate_async (verl's) or delayed_sync (verl-ext's)" in message, message


@pytest.mark.filterwarnings("ignore:Disabled critic")
@pytest.mark.parametrize("key,value", [(HYBRID_ENGINE, False), (ENGINE_NODES, 2), (BACKEND, "bogus")])
def test_verls_legacy_trainer_refuses_them_before_ray(key, value):
    """verl's legacy trainer asserts hybrid_engine=true and looks the backend up only inside Ray."""
    config = compose_recipe("trainer.use_v1=false", "algorithm.rollout_correction.bypass_mode=false", f"{LOSS_MODE}=vanilla")
    validate_run_config(config)
    with set_for_a_while(config, key, value):
        message = refusal(config)
    assert message.startswith(f"{key}={value!r} is invalid"), message
    assert "trainer.use_v1=false (verl's legacy trainer)" in message, message


@pytest.mark.parametrize("mode", ["delayed_sync", "separate_async"])
def test_the_modes_that_read_them_are_left_to_their_own_checks(mode):
    from omegaconf import OmegaConf

    from verl_ext.driver_checks import check_engine_pool_keys
    from verl_ext.staleness.config import engine_pool_overrides

    config = OmegaConf.from_dotlist([f"trainer.v1.trainer_mode={mode}", "trainer.n_gpus_per_node=1",
                                     *engine_pool_overrides(1, 2, "nccl")])
    check_engine_pool_keys(config)  # no refusal: these modes put the engine on its own pool


# The driver of plain ``python -m verl.trainer.main_ppo`` refuses each class before ray.init, word for word as the
# dry run does.
DRIVER_CASES = {
    "clipping range with topr": ((f"{LOSS_MODE}=topr", f"{CLIP_LOW}=0.3"), f"{CLIP_LOW}=0.3 is invalid"),
    "one response per prompt": (("actor_rollout_ref.rollout.n=1",), f"{ROLLOUT_N}=1 is invalid"),
    "split under sync": (("trainer.v1.trainer_mode=sync", f"{HYBRID_ENGINE}=false"), f"{HYBRID_ENGINE}=False is invalid"),
}


@pytest.mark.parametrize("case", sorted(DRIVER_CASES))
def test_the_driver_refuses_them_before_ray(driver, case):  # noqa: F811  (the fixture imported above)
    import copy

    from verl_ext.runs import compose as composition

    overrides, message = DRIVER_CASES[case]
    _, config = compose(overrides)
    with pytest.raises(Exception) as dry_run:
        composition.check_as_the_driver(copy.deepcopy(config))
    with pytest.raises(Exception) as raised:
        driver(config)
    assert not isinstance(raised.value, RayStarted), f"{case}: Ray started before the check"
    error, dry_run_error = config_error_in(raised.value), config_error_in(dry_run.value)
    assert error is not None and message in str(error), raised.value
    assert str(error) == str(dry_run_error)
