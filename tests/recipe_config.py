"""The recipe config composed with verl's Hydra config, and the actor config verl builds from it."""

from functools import lru_cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECIPE_CONFIG_DIR = REPO / "recipe" / "rec" / "config"


# The smallest overrides that let verl's validate_config accept a composed config (no GPU, no model).
MINIMAL_RUN_OVERRIDES = (
    "actor_rollout_ref.model.path=unused",
    "trainer.n_gpus_per_node=1",
    "data.train_batch_size=4",
    "actor_rollout_ref.rollout.n=2",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2",
)

OFFPOLICY_GRPO_OVERRIDES = (
    "algorithm.adv_estimator=grpo",
    "algorithm.rollout_correction.bypass_mode=false",
    "algorithm.rollout_correction.rollout_is=token",
    "algorithm.rollout_correction.rollout_is_threshold=1e6",
)


def compose_recipe(*overrides: str):
    """The recipe config composed by Hydra with verl's ppo_trainer, as `main_ppo --config-name=rec_trainer` does."""
    import verl  # noqa: F401  (loads the verl.plugins entry point, as in every verl process)
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(RECIPE_CONFIG_DIR), version_base=None):
        return compose(config_name="rec_trainer", overrides=list(MINIMAL_RUN_OVERRIDES) + list(overrides))


@lru_cache(maxsize=None)
def _composed(*overrides: str):
    return compose_recipe(*overrides)


def actor_config(*overrides: str):
    """A fresh actor config dataclass, built from the composed config by the path verl's driver and workers
    use (verl's ppo_loss writes into ``global_batch_info``, so each call builds a new one)."""
    from verl.utils.config import omega_conf_to_dataclass

    return omega_conf_to_dataclass(_composed(*overrides).actor_rollout_ref.actor)


def loss_config(loss_mode: str, *overrides: str):
    """The actor config for one loss, with what that loss needs (off-policy GRPO: pi_k and IS weights)."""
    extra = OFFPOLICY_GRPO_OVERRIDES if loss_mode == "offpolicy_grpo" else ()
    return actor_config(f"actor_rollout_ref.actor.policy_loss.loss_mode={loss_mode}", *extra, *overrides)


def call_registered_loss(loss_mode, log_prob, old_log_prob, advantages, response_mask, agg_mode="token-mean", config=None, behaviour_ratio=None):
    """Call a loss the way verl's ppo_loss does: through verl's registry, all by keyword.

    ``behaviour_ratio`` (r' = pi_k / alpha) reaches only off-policy GRPO, as verl's rollout_is_weights.
    """
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    return get_policy_loss_fn(loss_mode)(
        old_log_prob=old_log_prob,
        log_prob=log_prob,
        advantages=advantages,
        response_mask=response_mask,
        loss_agg_mode=agg_mode,
        config=config if config is not None else loss_config(loss_mode),
        rollout_is_weights=behaviour_ratio if loss_mode == "offpolicy_grpo" else None,
    )
