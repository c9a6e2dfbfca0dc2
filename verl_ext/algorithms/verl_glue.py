"""verl glue: wraps verl-ext's losses and estimators into verl's call signatures and registers them in verl's registries.

A registered loss receives verl's keyword arguments (``old_log_prob, log_prob, advantages,
response_mask, loss_agg_mode, config, rollout_is_weights``), reads the hyperparameters the loss reads from verl's
actor config by their names (``config.clip_ratio_low``, ``config.policy_loss.reg_coef``), computes the per-token loss with the loss's pure function, and aggregates it with verl's ``agg_loss`` and
``config.global_batch_info`` (data-parallel size and the global token/sequence counts), exactly as
verl's own losses do. A registered estimator turns verl's token-level rewards into one score per
response, computes advantages with the estimator and broadcasts them over the tokens. Names and keys come from
the registry only (:mod:`verl_ext.algorithms.registry`); each name is written once, on its function.
"""

from typing import Any, Optional

import torch

from verl_ext import metric_names
from verl_ext.algorithms import step_metrics
from verl_ext.algorithms.hyperparameters import CLIPPING_RANGE, default_of
from verl_ext.algorithms.registry import ESTIMATORS, POLICY_LOSSES, EstimatorSpec, PolicyLossSpec


def hyperparameter_values(config, names) -> dict[str, Any]:
    """{name: value} of the hyperparameters ``names``, from verl's actor config (an ``ActorConfig`` or a DictConfig):
    ``config.<name>`` for verl's clipping range, falling back to ``config.clip_ratio`` when unset, as verl's own
    losses do; ``config.policy_loss.<name>`` for verl-ext's keys (left out of a DictConfig: the declared default).
    """
    # imported here, not at the top: loss_config imports verl.workers.config, and a first ``import verl``
    # made by it loads this module through the plugin while loss_config is still half-initialised
    from verl_ext.algorithms.loss_config import LOSS_CONFIG_CLASS, RECPolicyLossConfig

    policy_loss = config.policy_loss
    if not isinstance(policy_loss, RECPolicyLossConfig) and policy_loss.get("outer_clip_ratio_low", None) is None:
        raise TypeError(
            f"loss_mode={policy_loss.get('loss_mode')!r} is a verl-ext loss, but actor_rollout_ref.actor.policy_loss is "
            f"{type(policy_loss).__name__}, without verl-ext's keys. Use the recipe config "
            "(--config-path=recipe/rec/config --config-name=rec_trainer) or set "
            f"actor_rollout_ref.actor.policy_loss._target_={LOSS_CONFIG_CLASS}"
        )
    values = {}
    for name in names:
        if name in CLIPPING_RANGE:
            value = config.get(name, None)
            values[name] = config.get("clip_ratio", default_of(name)) if value is None else value
        else:
            values[name] = policy_loss.get(name, default_of(name))
    return values


def as_verl_policy_loss(spec: PolicyLossSpec):
    """Wrap a registered loss in the signature verl's ``ppo_loss`` calls."""
    from verl.trainer.ppo.core_algos import agg_loss

    def policy_loss(
        old_log_prob: torch.Tensor,
        log_prob: torch.Tensor,
        advantages: torch.Tensor,
        response_mask: torch.Tensor,
        loss_agg_mode: str = "token-mean",
        config: Any = None,
        rollout_is_weights: Optional[torch.Tensor] = None,
    ) -> tuple[torch.Tensor, dict[str, float]]:
        if config is None:
            raise ValueError(f"{spec.name}: verl passed no actor config")
        if rollout_is_weights is not None and spec.old_log_prob != "current_and_behaviour":
            raise ValueError(
                f"{spec.name} got rollout_is_weights: it takes pi_old from the behaviour policy "
                "(algorithm.rollout_correction.bypass_mode=true), where verl computes no IS weights"
            )
        values = hyperparameter_values(config, spec.reads)
        terms = spec.compute(log_prob, old_log_prob, advantages, response_mask, rollout_is_weights, values)
        loss = agg_loss(
            loss_mat=terms.loss_matrix,
            loss_mask=response_mask,
            loss_agg_mode=loss_agg_mode,
            **config.global_batch_info,
        )
        return loss, {metric_names.ACTOR_PREFIX + name: float(value) for name, value in terms.metrics.items()}

    policy_loss.__name__ = f"compute_policy_loss_{spec.name}"
    policy_loss.__doc__ = f"{spec.paper_name} ({spec.reference}); registered by verl-ext."
    return policy_loss


def as_verl_estimator(spec: EstimatorSpec):
    """Wrap a registered loss in the signature verl's ``compute_advantage`` calls: verl's token-level rewards
    in, advantages and returns (equal, as for verl's GRPO) broadcast over each response's tokens out."""

    def compute_advantage(token_level_rewards, response_mask, index=None, config=None, **unused):
        if index is None:
            raise ValueError(f"algorithm.adv_estimator={spec.name} needs group ids (verl's 'uid' per prompt), but none were passed")
        with torch.no_grad():
            estimate = spec.compute(token_level_rewards.sum(dim=-1), index, config)
        for name, value in estimate.metrics.items():
            step_metrics.record(name, value)
        token_level = estimate.advantages.unsqueeze(-1) * response_mask
        return token_level, token_level

    compute_advantage.__name__ = f"compute_{spec.name}_advantage"
    compute_advantage.__doc__ = f"{spec.paper_name} ({spec.reference}); registered by verl-ext."
    return compute_advantage


# Built once, so that registering again finds the same function objects (verl refuses a different one).
VERL_POLICY_LOSSES = {name: as_verl_policy_loss(spec) for name, spec in POLICY_LOSSES.items()}
VERL_ESTIMATORS = {name: as_verl_estimator(spec) for name, spec in ESTIMATORS.items()}


def register_algorithms() -> None:
    """Register every verl-ext loss and estimator with verl (idempotent)."""
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, register_adv_est, register_policy_loss

    for name, policy_loss in VERL_POLICY_LOSSES.items():
        register_policy_loss(name)(policy_loss)
    for name, estimator in VERL_ESTIMATORS.items():
        if ADV_ESTIMATOR_REGISTRY.get(name) is not estimator:
            ADV_ESTIMATOR_REGISTRY.pop(name, None)
            register_adv_est(name)(estimator)
