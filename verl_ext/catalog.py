"""Every name verl-ext registers with verl, what it is in the papers, and which keys it reads.

This table is the single source for the registration (:mod:`verl_ext.registration`), for
``verl-ext list`` and for the algorithm table in the docs. Pick an algorithm by its name:

    algorithm.adv_estimator=<estimator>   actor_rollout_ref.actor.policy_loss.loss_mode=<loss>
"""

from dataclasses import dataclass
from functools import partial
from typing import Callable, Optional

import torch

from verl_ext import losses
from verl_ext.losses import LossTerms

EPSILONS = ("actor_rollout_ref.actor.clip_ratio_low", "actor_rollout_ref.actor.clip_ratio_high")
OUTER_MARGINS = (
    "actor_rollout_ref.actor.policy_loss.outer_clip_ratio_low",
    "actor_rollout_ref.actor.policy_loss.outer_clip_ratio_high",
)
BETA = ("actor_rollout_ref.actor.policy_loss.reg_coef",)
TEMPERATURE = ("actor_rollout_ref.actor.policy_loss.weight_temperature",)


@dataclass(frozen=True)
class Hyperparameters:
    """The values a loss reads, resolved from the actor config (see :mod:`verl_ext.registration`)."""

    epsilon_low: float
    epsilon_high: float
    outer_epsilon_low: float
    outer_epsilon_high: float
    beta: float
    temperature: float


# compute(log_prob, old_log_prob, advantages, response_mask, rollout_is_weights, hyperparameters) -> LossTerms
LossCompute = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, Optional[torch.Tensor], Hyperparameters], LossTerms]


@dataclass(frozen=True)
class PolicyLossSpec:
    name: str
    paper_name: str
    reference: str
    compute: LossCompute
    keys: tuple[str, ...] = ()
    # What old_log_prob must be: "behaviour" (pi_old = the policy that generated the batch),
    # "current_and_behaviour" (pi_k as old_log_prob and pi_k/alpha as rollout_is_weights), or "unused".
    old_log_prob: str = "behaviour"
    uses_outer_margins: bool = False
    regulariser: bool = False  # a term that gives every response a gradient, whatever its advantage


@dataclass(frozen=True)
class EstimatorSpec:
    name: str
    paper_name: str
    reference: str
    keys: tuple[str, ...] = ()


def _reinforce(log_prob, old_log_prob, advantages, response_mask, rollout_is_weights, hp):
    return losses.reinforce_loss(log_prob, old_log_prob, advantages, response_mask)


def _rec(clipping, importance_sampling, log_prob, old_log_prob, advantages, response_mask, rollout_is_weights, hp):
    return losses.rec_loss(
        log_prob,
        old_log_prob,
        advantages,
        response_mask,
        clipping=clipping,
        importance_sampling=importance_sampling,
        epsilon_low=hp.epsilon_low,
        epsilon_high=hp.epsilon_high,
        outer_epsilon_low=hp.outer_epsilon_low,
        outer_epsilon_high=hp.outer_epsilon_high,
    )


def _rec_gspo(importance_sampling, log_prob, old_log_prob, advantages, response_mask, rollout_is_weights, hp):
    return losses.rec_gspo_loss(
        log_prob,
        old_log_prob,
        advantages,
        response_mask,
        importance_sampling=importance_sampling,
        epsilon_low=hp.epsilon_low,
        epsilon_high=hp.epsilon_high,
    )


def _opmd(log_prob, old_log_prob, advantages, response_mask, rollout_is_weights, hp):
    return losses.opmd_loss(log_prob, old_log_prob, advantages, response_mask, beta=hp.beta)


def _asymre(log_prob, old_log_prob, advantages, response_mask, rollout_is_weights, hp):
    return losses.asymre_loss(log_prob, old_log_prob, advantages, response_mask, beta=hp.beta)


def _red_weight(log_prob, old_log_prob, advantages, response_mask, rollout_is_weights, hp):
    return losses.red_weight_loss(log_prob, old_log_prob, advantages, response_mask, temperature=hp.temperature)


def _offpolicy_grpo(log_prob, old_log_prob, advantages, response_mask, rollout_is_weights, hp):
    if rollout_is_weights is None:
        raise ValueError(
            "offpolicy_grpo received no rollout_is_weights (r' = pi_k / alpha): set "
            "algorithm.rollout_correction.bypass_mode=false and algorithm.rollout_correction.rollout_is=token"
        )
    return losses.offpolicy_grpo_loss(
        log_prob,
        old_log_prob,
        advantages,
        response_mask,
        rollout_is_weights,
        epsilon_low=hp.epsilon_low,
        epsilon_high=hp.epsilon_high,
    )


def _rec_entries():
    variants = (
        ("oneside", "one_side", "OneSide", "eq. 8"),
        ("twoside", "two_side", "TwoSide", "eq. 18"),
        ("ring", "ring", "Ring", "eqs. 19-21"),
    )
    for short, clipping, paper, reference in variants:
        for suffix, importance_sampling in (("is", True), ("nois", False)):
            yield PolicyLossSpec(
                name=f"rec_{short}_{suffix}",
                paper_name=f"REC-{paper}-{'IS' if importance_sampling else 'NoIS'}",
                reference=f"arXiv 2509.24203, {reference}",
                compute=partial(_rec, clipping, importance_sampling),
                keys=EPSILONS + (OUTER_MARGINS if clipping == "ring" else ()),
                uses_outer_margins=clipping == "ring",
            )


POLICY_LOSSES: dict[str, PolicyLossSpec] = {
    spec.name: spec
    for spec in (
        PolicyLossSpec("rec_reinforce", "group-relative REINFORCE", "arXiv 2509.24203, eq. 1b", _reinforce, old_log_prob="unused"),
        *_rec_entries(),
        PolicyLossSpec("rec_gspo_is", "REC-GSPO-IS", "arXiv 2509.24203, B.7", partial(_rec_gspo, True), EPSILONS),
        PolicyLossSpec("rec_gspo_nois", "REC-GSPO-NoIS", "arXiv 2509.24203, B.7", partial(_rec_gspo, False), EPSILONS),
        PolicyLossSpec("opmd", "OPMD (Kimi)", "arXiv 2509.24203, Section 4.2", _opmd, BETA, regulariser=True),
        PolicyLossSpec(
            "asymre", "AsymRE (Meta)", "arXiv 2509.24203, Section 4.2", _asymre, BETA, old_log_prob="unused", regulariser=True
        ),
        PolicyLossSpec(
            "red_weight", "RED-Weight", "arXiv 2509.24203, Section 4.3", _red_weight, TEMPERATURE, old_log_prob="unused"
        ),
        PolicyLossSpec(
            "offpolicy_grpo",
            "off-policy GRPO",
            "arXiv 2505.22257, eq. 6",
            _offpolicy_grpo,
            EPSILONS,
            old_log_prob="current_and_behaviour",
        ),
    )
}

ESTIMATORS: dict[str, EstimatorSpec] = {
    spec.name: spec
    for spec in (
        EstimatorSpec("rec", "group-relative REINFORCE: A_i = r_i - mean_j r_j", "arXiv 2509.24203, eq. 1"),
        EstimatorSpec(
            "red_drop",
            "RED-Drop: balanced dropping of excess negatives, re-centred on the kept set",
            "arXiv 2509.24203, eq. 10",
            ("algorithm.red_drop_seed",),
        ),
    )
}


def policy_loss_spec(name: str) -> Optional[PolicyLossSpec]:
    """The spec of a verl-ext loss, or None for a name verl-ext does not provide."""
    return POLICY_LOSSES.get(name)
