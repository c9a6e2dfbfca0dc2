"""Every name verl-ext registers with verl, what it is in the papers, and which keys it reads.

This table is the single source for the registration (:mod:`verl_ext.registration`), for
``verl-ext list`` and for the algorithm table in the docs. Pick an algorithm by its name:

    algorithm.adv_estimator=<estimator>   actor_rollout_ref.actor.policy_loss.loss_mode=<loss>

Importing this module does not import torch: the run scripts' launcher reads the names and keys from it to
refuse a bad argument in a fraction of a second (tests/adversarial/test_launcher_variables.py checks it). The
losses and estimators are imported when one is first computed (``losses``, ``advantage_functions`` below).
"""

import importlib
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Optional

from verl_ext import metric_names

if TYPE_CHECKING:
    import torch

    from verl_ext.losses import LossTerms


class _ImportedOnUse:
    """A module imported at its first attribute access (``losses.rec_loss``)."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attribute: str):
        return getattr(importlib.import_module(self._name), attribute)


losses = _ImportedOnUse("verl_ext.losses")
advantage_functions = _ImportedOnUse("verl_ext.advantages")


def loss_constant(module: str, name: str):
    """A constant of a loss module (``verl_ext.losses.<module>``), imported when first needed."""
    return getattr(importlib.import_module(f"verl_ext.losses.{module}"), name)


def _default_regularizer_form() -> str:
    return loss_constant("opmd", "REGULARIZER_FORMS")[0]


EPSILONS = ("actor_rollout_ref.actor.clip_ratio_low", "actor_rollout_ref.actor.clip_ratio_high")
OUTER_MARGINS = (
    "actor_rollout_ref.actor.policy_loss.outer_clip_ratio_low",
    "actor_rollout_ref.actor.policy_loss.outer_clip_ratio_high",
)
BETA = ("actor_rollout_ref.actor.policy_loss.reg_coef",)
REG_FORM = ("actor_rollout_ref.actor.policy_loss.reg_form",)
TEMPERATURE = ("actor_rollout_ref.actor.policy_loss.weight_temperature",)
TOPR_RATIO_LEVEL = ("actor_rollout_ref.actor.policy_loss.topr_ratio_level",)
M2_THRESHOLD = ("actor_rollout_ref.actor.policy_loss.m2_threshold",)
M2_TOKENS = ("actor_rollout_ref.actor.policy_loss.m2_tokens",)


@dataclass(frozen=True)
class Hyperparameters:
    """The values a loss reads, resolved from the actor config (see :mod:`verl_ext.registration`)."""

    epsilon_low: float
    epsilon_high: float
    outer_epsilon_low: float
    outer_epsilon_high: float
    beta: float
    temperature: float
    regularizer_form: str = field(default_factory=_default_regularizer_form)  # OPMD's square: "sequence" (the paper's) or "token"
    topr_ratio_level: str = field(default_factory=lambda: loss_constant("topr", "RATIO_LEVELS")[0])  # TOPR's ratio: "sequence" (the paper's) or "token" (Trinity-RFT's)
    m2_threshold: float = field(default_factory=lambda: loss_constant("m2po", "PAPER_THRESHOLD"))  # tau_M2 of M2PO
    m2_tokens: str = field(default_factory=lambda: loss_constant("m2po", "TOKEN_SETS")[0])  # M2PO's token set: "trust_region" (the paper's) or "all" (AReaL's)


# compute(log_prob, old_log_prob, advantages, response_mask, rollout_is_weights, hyperparameters) -> LossTerms
LossCompute = Callable[["torch.Tensor", "torch.Tensor", "torch.Tensor", "torch.Tensor", Optional["torch.Tensor"], Hyperparameters], "LossTerms"]


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
    regularizer: bool = False  # a term that gives every response a gradient, whatever its advantage
    # the actor.loss_agg_mode the paper's formula is (None: verl's default token-mean)
    paper_loss_agg_mode: Optional[str] = None
    # the paper's advantages are GRPO's std-normalised group advantages (verl's "grpo" estimator), not A = r - mean
    grpo_advantages: bool = False


@dataclass(frozen=True)
class Estimate:
    """An estimator's output: one advantage per response, and metrics for the trainer to log."""

    advantages: "torch.Tensor"  # (batch,)
    metrics: dict[str, float] = field(default_factory=dict)


# compute(scores, group ids, algorithm config) -> Estimate; scores are one reward per response, (batch,)
EstimatorCompute = Callable[["torch.Tensor", Any, Any], Estimate]


@dataclass(frozen=True)
class EstimatorSpec:
    name: str
    paper_name: str
    reference: str
    compute: EstimatorCompute
    keys: tuple[str, ...] = ()
    drops_responses: bool = False  # gives some responses advantage 0 to remove them from the update


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
    return losses.opmd_loss(log_prob, old_log_prob, advantages, response_mask, beta=hp.beta, form=hp.regularizer_form)


def _asymre(log_prob, old_log_prob, advantages, response_mask, rollout_is_weights, hp):
    return losses.asymre_loss(log_prob, old_log_prob, advantages, response_mask, beta=hp.beta)


def _red_weight(log_prob, old_log_prob, advantages, response_mask, rollout_is_weights, hp):
    return losses.red_weight_loss(log_prob, old_log_prob, advantages, response_mask, temperature=hp.temperature)


def _topr(log_prob, old_log_prob, advantages, response_mask, rollout_is_weights, hp):
    return losses.topr_loss(log_prob, old_log_prob, advantages, response_mask, ratio_level=hp.topr_ratio_level)


def _m2po(log_prob, old_log_prob, advantages, response_mask, rollout_is_weights, hp):
    return losses.m2po_loss(log_prob, old_log_prob, advantages, response_mask, threshold=hp.m2_threshold, tokens=hp.m2_tokens)


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


REC = "arXiv 2509.24203"
# REC-GSPO's formula is a mean over responses of token means (appendix B.7): verl's aggregation of that name
SEQUENCE_MEAN_OF_TOKEN_MEANS = "seq-mean-token-mean"

# The registered names, each written once, here, next to what it names (``git grep '"rec_ring_nois"'``).
POLICY_LOSSES: dict[str, PolicyLossSpec] = {
    spec.name: spec
    for spec in (
        PolicyLossSpec("rec_reinforce", "group-relative REINFORCE", f"{REC}, eq. 1b", _reinforce, old_log_prob="unused"),
        PolicyLossSpec("rec_oneside_is", "REC-OneSide-IS", f"{REC}, eq. 8", partial(_rec, "one_side", True), EPSILONS),
        PolicyLossSpec("rec_oneside_nois", "REC-OneSide-NoIS", f"{REC}, eq. 8", partial(_rec, "one_side", False), EPSILONS),
        PolicyLossSpec("rec_twoside_is", "REC-TwoSide-IS", f"{REC}, eq. 18", partial(_rec, "two_side", True), EPSILONS),
        PolicyLossSpec("rec_twoside_nois", "REC-TwoSide-NoIS", f"{REC}, eq. 18", partial(_rec, "two_side", False), EPSILONS),
        PolicyLossSpec(
            "rec_ring_is", "REC-Ring-IS", f"{REC}, eqs. 19-21", partial(_rec, "ring", True), EPSILONS + OUTER_MARGINS, uses_outer_margins=True
        ),
        PolicyLossSpec(
            "rec_ring_nois", "REC-Ring-NoIS", f"{REC}, eqs. 19-21", partial(_rec, "ring", False), EPSILONS + OUTER_MARGINS, uses_outer_margins=True
        ),
        PolicyLossSpec(
            "rec_gspo_is", "REC-GSPO-IS", f"{REC}, B.7", partial(_rec_gspo, True), EPSILONS, paper_loss_agg_mode=SEQUENCE_MEAN_OF_TOKEN_MEANS
        ),
        PolicyLossSpec(
            "rec_gspo_nois", "REC-GSPO-NoIS", f"{REC}, B.7", partial(_rec_gspo, False), EPSILONS, paper_loss_agg_mode=SEQUENCE_MEAN_OF_TOKEN_MEANS
        ),
        PolicyLossSpec("opmd", "OPMD (Kimi)", f"{REC}, Section 4.2", _opmd, BETA + REG_FORM, regularizer=True),
        PolicyLossSpec("asymre", "AsymRE (Meta)", f"{REC}, Section 4.2", _asymre, BETA, old_log_prob="unused", regularizer=True),
        PolicyLossSpec("red_weight", "RED-Weight", f"{REC}, Section 4.3", _red_weight, TEMPERATURE, old_log_prob="unused"),
        PolicyLossSpec(
            "offpolicy_grpo",
            "off-policy GRPO",
            "arXiv 2505.22257, eq. 6",
            _offpolicy_grpo,
            EPSILONS,
            old_log_prob="current_and_behaviour",
            grpo_advantages=True,
        ),
        PolicyLossSpec("topr", "TOPR (Tapered Off-Policy REINFORCE)", "arXiv 2503.14286, Section 3", _topr, TOPR_RATIO_LEVEL),
        PolicyLossSpec(
            "m2po",
            "M2PO (Second-Moment Trust Policy Optimization)",
            "arXiv 2510.01161, Algorithm 1",
            _m2po,
            M2_THRESHOLD + M2_TOKENS,
            grpo_advantages=True,
        ),
    )
}

def _rec_estimate(scores, index, config) -> Estimate:
    return Estimate(advantage_functions.rec_advantages(scores, index))


# verl's v1 trainer pads a batch to whole mini-batches with zero-loss rows whose group id starts with this
# (verl/trainer/ppo/padding_utils.py); they are not responses, so they stay out of the dropped fraction.
VERL_PADDING_UID_PREFIX = "pad"

_red_drop_generators: dict[int, "torch.Generator"] = {}


def red_drop_generator(seed: int) -> "torch.Generator":
    """One generator per seed per process, seeded once: the run draws the same drops every time."""
    import torch

    if seed not in _red_drop_generators:
        _red_drop_generators[seed] = torch.Generator().manual_seed(seed)
    return _red_drop_generators[seed]


def red_drop_seed(config) -> int:
    seed = config.get("red_drop_seed", None) if config is not None else None
    return 1 if seed is None else int(seed)


def _red_drop_estimate(scores, index, config) -> Estimate:
    import torch

    result = advantage_functions.red_drop_advantages(scores, index, red_drop_generator(red_drop_seed(config)))
    real = torch.tensor([not str(uid).startswith(VERL_PADDING_UID_PREFIX) for uid in index], dtype=torch.bool)
    dropped = (~result.kept)[real].to(torch.float32)
    return Estimate(result.advantages, {metric_names.RED_DROP_DROPPED_FRACTION: dropped.mean().item() if dropped.numel() else 0.0})


ESTIMATORS: dict[str, EstimatorSpec] = {
    spec.name: spec
    for spec in (
        EstimatorSpec("rec", "group-relative REINFORCE: A_i = r_i - mean_j r_j", f"{REC}, eq. 1", _rec_estimate),
        EstimatorSpec(
            "red_drop",
            "RED-Drop: balanced dropping of excess negatives, re-centred on the kept set",
            f"{REC}, eq. 10",
            _red_drop_estimate,
            ("algorithm.red_drop_seed",),
            drops_responses=True,
        ),
    )
}


def policy_loss_spec(name: str) -> Optional[PolicyLossSpec]:
    """The spec of a verl-ext loss, or None for a name verl-ext does not provide."""
    return POLICY_LOSSES.get(name)


def estimator_spec(name: str) -> Optional[EstimatorSpec]:
    """The spec of a verl-ext estimator, or None for a name verl-ext does not provide (verl's own)."""
    return ESTIMATORS.get(name)
