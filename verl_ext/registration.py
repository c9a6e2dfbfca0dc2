"""verl glue: registers verl-ext's losses and estimators in verl's own registries.

A registered loss receives verl's keyword arguments (``old_log_prob, log_prob, advantages,
response_mask, loss_agg_mode, config, rollout_is_weights``), computes the per-token loss with the
pure function of :mod:`verl_ext.losses`, and aggregates it with verl's ``agg_loss`` and
``config.global_batch_info`` (data-parallel size and the global token/sequence counts), exactly as
verl's own losses do. A registered estimator turns verl's token-level rewards into advantages with
the functions of :mod:`verl_ext.advantages`.
"""

from typing import Any, Optional

import torch

from verl_ext import advantages as advantage_functions
from verl_ext import step_metrics
from verl_ext.catalog import ESTIMATORS, POLICY_LOSSES, Hyperparameters, PolicyLossSpec
from verl_ext.config import RECPolicyLossConfig

METRIC_PREFIX = "actor/"


def hyperparameters(config) -> Hyperparameters:
    """Read the loss hyperparameters from verl's actor config (an ``ActorConfig`` or a DictConfig)."""
    policy_loss = config.policy_loss
    if not isinstance(policy_loss, RECPolicyLossConfig) and policy_loss.get("outer_clip_ratio_low", None) is None:
        raise TypeError(
            f"loss_mode={policy_loss.get('loss_mode')!r} is a verl-ext loss, but actor_rollout_ref.actor.policy_loss is "
            f"{type(policy_loss).__name__}, without verl-ext's keys. Use the recipe config "
            "(--config-path=recipe/rec/config --config-name=rec_trainer) or set "
            "actor_rollout_ref.actor.policy_loss._target_=verl_ext.config.RECPolicyLossConfig"
        )
    clip_ratio = config.get("clip_ratio", 0.2)
    epsilon_low = config.clip_ratio_low if config.clip_ratio_low is not None else clip_ratio
    epsilon_high = config.clip_ratio_high if config.clip_ratio_high is not None else clip_ratio
    return Hyperparameters(
        epsilon_low=float(epsilon_low),
        epsilon_high=float(epsilon_high),
        outer_epsilon_low=float(policy_loss.outer_clip_ratio_low),
        outer_epsilon_high=float(policy_loss.outer_clip_ratio_high),
        beta=float(policy_loss.reg_coef),
        temperature=float(policy_loss.weight_temperature),
    )


def as_verl_policy_loss(spec: PolicyLossSpec):
    """Wrap a catalog entry in the signature verl's ``ppo_loss`` calls."""
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
        terms = spec.compute(log_prob, old_log_prob, advantages, response_mask, rollout_is_weights, hyperparameters(config))
        loss = agg_loss(
            loss_mat=terms.loss_matrix,
            loss_mask=response_mask,
            loss_agg_mode=loss_agg_mode,
            **config.global_batch_info,
        )
        return loss, {METRIC_PREFIX + name: float(value) for name, value in terms.metrics.items()}

    policy_loss.__name__ = f"compute_policy_loss_{spec.name}"
    policy_loss.__doc__ = f"{spec.paper_name} ({spec.reference}); registered by verl-ext."
    return policy_loss


def _scores(token_level_rewards: torch.Tensor) -> torch.Tensor:
    return token_level_rewards.sum(dim=-1)


def _broadcast(per_response: torch.Tensor, response_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    token_level = per_response.unsqueeze(-1) * response_mask
    return token_level, token_level


def _require_index(name: str, index) -> None:
    if index is None:
        raise ValueError(f"algorithm.adv_estimator={name} needs group ids (verl's 'uid' per prompt), but none were passed")


def compute_rec_advantage(token_level_rewards, response_mask, index=None, config=None, **unused):
    """Estimator ``rec``: A_i = r_i - mean of its group (no std normalisation)."""
    _require_index("rec", index)
    with torch.no_grad():
        return _broadcast(advantage_functions.rec_advantages(_scores(token_level_rewards), index), response_mask)


_red_drop_generators: dict[int, torch.Generator] = {}

# verl's v1 trainer pads a batch to whole mini-batches with zero-loss rows whose group id starts with this
# (verl/trainer/ppo/padding_utils.py); they are not responses, so they stay out of the dropped fraction.
VERL_PADDING_UID_PREFIX = "pad"


def red_drop_generator(seed: int) -> torch.Generator:
    """One generator per seed per process, seeded once: the run draws the same drops every time."""
    if seed not in _red_drop_generators:
        _red_drop_generators[seed] = torch.Generator().manual_seed(seed)
    return _red_drop_generators[seed]


def red_drop_seed(config) -> int:
    seed = config.get("red_drop_seed", None) if config is not None else None
    return 1 if seed is None else int(seed)


def compute_red_drop_advantage(token_level_rewards, response_mask, index=None, config=None, **unused):
    """Estimator ``red_drop`` (eq. 10); records ``red_drop/dropped_fraction`` for the trainer to log."""
    _require_index("red_drop", index)
    with torch.no_grad():
        result = advantage_functions.red_drop_advantages(
            _scores(token_level_rewards), index, red_drop_generator(red_drop_seed(config))
        )
    real = torch.tensor([not str(uid).startswith(VERL_PADDING_UID_PREFIX) for uid in index], dtype=torch.bool)
    dropped = (~result.kept)[real].to(torch.float32)
    step_metrics.record("red_drop/dropped_fraction", dropped.mean().item() if dropped.numel() else 0.0)
    return _broadcast(result.advantages, response_mask)


ESTIMATOR_FUNCTIONS = {"rec": compute_rec_advantage, "red_drop": compute_red_drop_advantage}


def register_algorithms() -> None:
    """Register every catalog entry with verl (idempotent)."""
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, register_adv_est, register_policy_loss

    for name, spec in POLICY_LOSSES.items():
        register_policy_loss(name)(as_verl_policy_loss(spec))
    for name in ESTIMATORS:
        if ADV_ESTIMATOR_REGISTRY.get(name) is not ESTIMATOR_FUNCTIONS[name]:
            ADV_ESTIMATOR_REGISTRY.pop(name, None)
            register_adv_est(name)(ESTIMATOR_FUNCTIONS[name])
