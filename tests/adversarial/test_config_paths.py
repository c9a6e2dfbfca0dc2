"""Every verl-ext check runs on the real path too, before Ray: ``main_ppo``'s driver function, given a config
the dry run rejects, raises the same error before it reaches ``ray.init`` (replaced here, since a Ray start is
what must not happen). The dry run and the driver call one function, :func:`verl_ext.driver_checks.check_run_config`
(through verl's ``validate_config``, which the plugin wraps on ``import verl``)."""

import copy

import pytest

from tests.recipe_config import MINIMAL_RUN_OVERRIDES, RECIPE_CONFIG_DIR
from verl_ext import preflight
from verl_ext.runs import compose as composition
from verl_ext.config_values import ConfigError

DELAYED = "trainer.v1.trainer_mode=delayed_sync"
# Each was once caught only by the dry run, after Ray started, or not at all.
BAD = {
    "masking outside delayed_sync": (("trainer.v1.delayed_sync.zero_variance_masking=true",),
                                     "trainer.v1.delayed_sync.zero_variance_masking=True is invalid"),
    "zero batch": (("data.train_batch_size=0", "actor_rollout_ref.actor.ppo_mini_batch_size=0"),
                   "data.train_batch_size=0 is invalid: allowed values are an integer >= 1"),
    "offline with an interval": ((DELAYED, "trainer.v1.delayed_sync.offline=true", "trainer.v1.delayed_sync.sync_interval=20"),
                                 "trainer.v1.delayed_sync.sync_interval=20 is invalid"),
    "delayed_sync requirement": ((DELAYED, "actor_rollout_ref.rollout.calculate_log_probs=false"),
                                 "actor_rollout_ref.rollout.calculate_log_probs=False is invalid"),
    "nan loss key": (("actor_rollout_ref.actor.policy_loss.reg_coef=nan",),
                     "actor_rollout_ref.actor.policy_loss.reg_coef=nan is invalid"),
    "nan seed": (("algorithm.adv_estimator=red_drop", "algorithm.red_drop_seed=nan"), "algorithm.red_drop_seed=nan is invalid"),
    # failed at the first batch's reward, after Ray and the rollout engine had started
    "infinite math budget": (("reward.custom_reward_function.path=pkg://verl_ext.rewards",
                              "+reward.custom_reward_function.reward_kwargs.math_timeout_s=inf"),
                             "math_timeout_s=inf: expected seconds"),
    "unknown ToolACE mode": (("reward.custom_reward_function.path=pkg://verl_ext.rewards",
                              "+reward.custom_reward_function.reward_kwargs.toolace_mode=fuzzy"),
                             "toolace_mode"),
    # found only inside Ray before: the TaskRunner resolves the config and looks the trainer mode up, the reward
    # workers load the reward function
    "unknown trainer mode": (("trainer.v1.trainer_mode=delayed",), "trainer.v1.trainer_mode=delayed is invalid"),
    "reward function file missing": (("reward.custom_reward_function.path=/nonexistent/reward.py",),
                                     "path=/nonexistent/reward.py name=compute_score does not load"),
    "interpolation to nowhere": (("+trainer.note=${no_such.key}",), "the config does not resolve"),
    # second round: accepted and ignored (an on-policy run) before
    "staleness key outside delayed_sync": (("trainer.v1.trainer_mode=sync", "trainer.v1.delayed_sync.sync_interval=20"),
                                           "trainer.v1.delayed_sync.sync_interval=20 is invalid"),
    "staleness key without the v1 trainer": (("trainer.use_v1=false", DELAYED, "trainer.v1.delayed_sync.overlap=true"),
                                             "set trainer.v1.trainer_mode=delayed_sync and trainer.use_v1=true"),
    # second round: verl's Tracking refused it only in the TaskRunner, after Ray started
    "unknown logger": (("trainer.logger=[console,wandbb]",), "trainer.logger=['console', 'wandbb'] is invalid"),
}


class RayStarted(Exception):
    pass


@pytest.fixture(scope="module", autouse=True)
def parse_each_yaml_file_once():
    with composition.memoised_config_files():
        yield


def compose(overrides):
    argv = [f"--config-path={RECIPE_CONFIG_DIR}", "--config-name=rec_trainer", *MINIMAL_RUN_OVERRIDES, *overrides]
    return argv, composition.parse_main_ppo_argv(argv).config()


@pytest.fixture
def driver(monkeypatch):
    """verl's ``main_ppo.main`` as the driver runs it, with ``ray.init`` replaced by a tripwire."""
    import ray
    from verl.trainer import main_ppo

    def tripwire(*args, **kwargs):
        raise RayStarted("ray.init reached")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", tripwire)
    return main_ppo.main  # hydra.main passes a given config straight to the function


def config_error_in(error):
    while error is not None and not isinstance(error, ConfigError):
        error = error.__cause__ or error.__context__
    return error


def test_the_driver_calls_verl_ext_checks_through_validate_config():
    from verl.trainer import main_ppo
    from verl.utils import config as verl_config

    from verl_ext.driver_checks import VERL_EXT_HOOK

    assert getattr(main_ppo.validate_config, VERL_EXT_HOOK, False)
    assert main_ppo.validate_config is verl_config.validate_config


def test_a_good_config_reaches_ray_init(driver):
    with pytest.raises(RayStarted):
        driver(compose([DELAYED, "trainer.v1.delayed_sync.sync_interval=4"])[1])


@pytest.mark.parametrize("case", sorted(BAD))
def test_the_driver_raises_the_dry_runs_error_before_ray(driver, case):
    overrides, message = BAD[case]
    _, config = compose(overrides)  # one composition (about 1 s) for both paths
    with pytest.raises(Exception) as dry_run:
        composition.check_as_the_driver(copy.deepcopy(config))  # what the dry run does after composing
    with pytest.raises(Exception) as raised:
        driver(config)
    assert not isinstance(raised.value, RayStarted), f"{case}: Ray started before the check"
    error, dry_run_error = config_error_in(raised.value), config_error_in(dry_run.value)
    assert error is not None and message in str(error)
    assert str(error) == str(dry_run_error)  # the same error, word for word


def test_the_dry_run_reports_the_error_of_a_composed_run():
    overrides, message = BAD["masking outside delayed_sync"]
    result = preflight.preflight("masking", compose(overrides)[0])
    assert not result.ok and message in result.error
