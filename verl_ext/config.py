"""The actor's policy-loss config with verl-ext's keys, and the checks run when it is built.

verl's actor config is a strict dataclass: unknown keys fail. The recipe config points
``actor_rollout_ref.actor.policy_loss._target_`` at :class:`RECPolicyLossConfig`, a subclass of verl's
``PolicyLossConfig`` with the extra hyperparameters. verl builds it in the driver (``validate_config``,
before Ray or any worker starts) and again in every actor worker, so ``__post_init__`` is where a bad
configuration is rejected early, naming the key and the allowed values.

Some checks need keys that live elsewhere in the config (the inner epsilons are verl's
``actor.clip_ratio_low/high``; pi_old depends on ``algorithm.rollout_correction``). The recipe copies
them into this node by interpolation (the "mirror" fields below); they are read-only context, never
set by hand. When a mirror is missing (a config built without the recipe), its check is skipped.
"""

import math
from dataclasses import dataclass, fields
from typing import Any, Optional

from verl.workers.config import PolicyLossConfig

from verl_ext.catalog import POLICY_LOSSES, estimator_spec, policy_loss_spec
from verl_ext.checks.values import ConfigError, is_finite_number, reject
from verl_ext.losses.m2po import PAPER_THRESHOLD, TOKEN_SETS
from verl_ext.losses.opmd import REGULARIZER_FORMS
from verl_ext.losses.topr import RATIO_LEVELS

OFFPOLICY_GRPO_MIN_IS_THRESHOLD = 100.0


@dataclass
class RECPolicyLossConfig(PolicyLossConfig):
    """verl's ``PolicyLossConfig`` plus the hyperparameters of the REC family.

    Args:
        outer_clip_ratio_low: epsilon'_low, REC-Ring's outer lower margin (>= epsilon_low).
        outer_clip_ratio_high: epsilon'_high, REC-Ring's outer upper margin (>= epsilon_high).
        reg_coef: beta, the regularizer weight of OPMD and AsymRE (>= 0).
        reg_form: OPMD's regularizer, ``sequence`` ((beta/2)(sum_t Delta_t)^2 per response, the paper's) or
            ``token`` ((beta/2) sum_t Delta_t^2, Trinity-RFT's k2 form and verl's ``dro``); see :mod:`verl_ext.losses.opmd`.
        weight_temperature: T of RED-Weight, w_i = exp(A_i / T) (> 0).
        topr_ratio_level: TOPR's truncated ratio, ``sequence`` (pi(y)/mu(y) of the whole response, the paper's) or
            ``token`` (per-token ratio, Trinity-RFT's); see :mod:`verl_ext.losses.topr`.
        m2_threshold: tau_M2 of M2PO, the bound on the mean squared log-ratio of the kept tokens (>= 0; paper: 0.04).
        m2_tokens: the tokens M2PO measures and masks, ``trust_region`` (the paper's) or ``all`` (AReaL's); see
            :mod:`verl_ext.losses.m2po`.
        clip_ratio_low, clip_ratio_high, adv_estimator, bypass_mode, rollout_is, rollout_is_threshold,
        rollout_is_batch_normalize, use_v1: mirrors of ``actor.clip_ratio_low/high``,
        ``algorithm.adv_estimator``, ``algorithm.rollout_correction.*`` and ``trainer.use_v1``, filled by
        the recipe config for the checks; the losses read the real keys.
    """

    outer_clip_ratio_low: float = 0.6
    outer_clip_ratio_high: float = 2.0
    reg_coef: float = 0.1
    reg_form: str = REGULARIZER_FORMS[0]
    weight_temperature: float = 1.0
    topr_ratio_level: str = RATIO_LEVELS[0]
    m2_threshold: float = PAPER_THRESHOLD
    m2_tokens: str = TOKEN_SETS[0]

    clip_ratio_low: Optional[float] = None
    clip_ratio_high: Optional[float] = None
    adv_estimator: Optional[str] = None
    bypass_mode: Optional[bool] = None
    rollout_is: Optional[str] = None
    rollout_is_threshold: Optional[Any] = None
    rollout_is_batch_normalize: Optional[bool] = None
    use_v1: Optional[bool] = None

    def __post_init__(self):
        parent_post_init = getattr(super(), "__post_init__", None)
        if parent_post_init is not None:
            parent_post_init()
        check_policy_loss_config(self)


def _key(name: str) -> str:
    return f"actor_rollout_ref.actor.policy_loss.{name}"


def check_policy_loss_config(config: RECPolicyLossConfig) -> None:
    """Raise :class:`ConfigError` on the first invalid value, naming the key and what is allowed."""
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, POLICY_LOSS_REGISTRY

    loss_mode = config.loss_mode
    if loss_mode not in POLICY_LOSS_REGISTRY:
        allowed = sorted(set(POLICY_LOSS_REGISTRY) | set(POLICY_LOSSES))
        raise ConfigError(f"{_key('loss_mode')}={loss_mode!r} is not a registered policy loss. Allowed: {allowed}")
    if config.adv_estimator is not None and str(config.adv_estimator) not in ADV_ESTIMATOR_REGISTRY:
        raise ConfigError(
            f"algorithm.adv_estimator={config.adv_estimator!r} is not a registered advantage estimator. "
            f"Allowed: {sorted(ADV_ESTIMATOR_REGISTRY)}"
        )

    _check_numbers(config)
    if config.reg_coef < 0:
        raise ConfigError(f"{_key('reg_coef')}={config.reg_coef} must be >= 0 (beta of OPMD/AsymRE; paper: 0.1)")
    if not config.weight_temperature > 0:
        raise ConfigError(
            f"{_key('weight_temperature')}={config.weight_temperature} must be > 0 (T of RED-Weight; paper: 1.0)"
        )
    epsilon_low, epsilon_high = config.clip_ratio_low, config.clip_ratio_high
    if epsilon_low is not None and not 0 <= epsilon_low <= 1:
        raise ConfigError(
            f"actor_rollout_ref.actor.clip_ratio_low={epsilon_low} (epsilon_low) must be in [0, 1], "
            "so that the lower bound 1 - epsilon_low is a valid ratio"
        )
    if epsilon_high is not None and not epsilon_high >= 0:
        raise ConfigError(f"actor_rollout_ref.actor.clip_ratio_high={epsilon_high} (epsilon_high) must be >= 0")

    spec = policy_loss_spec(loss_mode)
    if config.reg_form not in REGULARIZER_FORMS:
        reject(_key("reg_form"), config.reg_form, f"one of {list(REGULARIZER_FORMS)}", "It chooses OPMD's regularizer (docs/algorithms.md).")
    if config.topr_ratio_level not in RATIO_LEVELS:
        reject(_key("topr_ratio_level"), config.topr_ratio_level, f"one of {list(RATIO_LEVELS)}",
               "It chooses TOPR's truncated ratio (docs/algorithms.md).")
    if config.m2_tokens not in TOKEN_SETS:
        reject(_key("m2_tokens"), config.m2_tokens, f"one of {list(TOKEN_SETS)}",
               "It chooses the tokens M2PO measures and masks (docs/algorithms.md).")
    if config.m2_threshold < 0:
        reject(_key("m2_threshold"), config.m2_threshold, "a finite number >= 0 (tau_M2 of M2PO; paper: 0.04)")
    _reject_unread_keys(config, spec)
    if spec is None:  # one of verl's own losses: only what verl itself would find wrong after Ray starts
        _check_verl_loss(config)
        return

    if spec.uses_outer_margins:
        if not 0 <= config.outer_clip_ratio_low <= 1:
            raise ConfigError(f"{_key('outer_clip_ratio_low')}={config.outer_clip_ratio_low} must be in [0, 1]")
        if epsilon_low is not None and config.outer_clip_ratio_low < epsilon_low:
            raise ConfigError(
                f"{_key('outer_clip_ratio_low')}={config.outer_clip_ratio_low} lies inside the inner band: "
                f"epsilon'_low must be >= epsilon_low = actor_rollout_ref.actor.clip_ratio_low={epsilon_low}"
            )
        if epsilon_high is not None and config.outer_clip_ratio_high < epsilon_high:
            raise ConfigError(
                f"{_key('outer_clip_ratio_high')}={config.outer_clip_ratio_high} lies inside the inner band: "
                f"epsilon'_high must be >= epsilon_high = actor_rollout_ref.actor.clip_ratio_high={epsilon_high}"
            )

    if spec.old_log_prob == "behaviour" and config.bypass_mode is False:
        raise ConfigError(
            f"loss_mode={loss_mode!r} needs pi_old = the behaviour policy (the rollout's log-probs), but "
            "algorithm.rollout_correction.bypass_mode=false makes verl recompute old_log_prob with the current "
            "actor (every ratio 1, every clip inert). Set algorithm.rollout_correction.bypass_mode=true "
            "(the recipe's default)."
        )
    if spec.old_log_prob == "behaviour" and config.bypass_mode and config.use_v1 is False:
        raise ConfigError(
            "trainer.use_v1=false: verl's legacy trainer replaces loss_mode with 'bypass_mode' whenever "
            f"algorithm.rollout_correction.bypass_mode=true, so {loss_mode!r} would never run. Use trainer.use_v1=true."
        )
    if spec.old_log_prob == "current_and_behaviour":
        _check_offpolicy_grpo_sources(config)

    estimator = estimator_spec(str(config.adv_estimator)) if config.adv_estimator is not None else None
    if estimator is not None and estimator.drops_responses and spec.regularizer:
        raise ConfigError(
            f"algorithm.adv_estimator={estimator.name} with loss_mode={loss_mode!r}: {estimator.paper_name.split(':')[0]} "
            "removes a response by giving it advantage 0, but this loss's regularizer would still push on dropped "
            f"responses. Use a loss without a regularizer: {sorted(n for n, s in POLICY_LOSSES.items() if not s.regularizer)}"
        )


# verl's loss that its legacy trainer substitutes for loss_mode under algorithm.rollout_correction.bypass_mode=true
VERL_BYPASS_LOSS = "bypass_mode"
VERL_DRO_LOSS = "dro"  # verl's DRO: needs policy_loss.dro_beta > 0, which verl checks only when the loss first runs


def _check_verl_loss(config: RECPolicyLossConfig) -> None:
    """verl's own losses: the settings verl would refuse (or ignore) only inside the actor workers."""
    if config.loss_mode == VERL_DRO_LOSS and not (is_finite_number(config.dro_beta) and config.dro_beta > 0):
        reject(_key("dro_beta"), config.dro_beta, f"a finite number > 0 with loss_mode={VERL_DRO_LOSS!r}",
               "verl's DRO loss raises on anything else in its first actor update, after Ray and the workers start.")
    if config.loss_mode == VERL_BYPASS_LOSS and config.use_v1 is not False:
        raise ConfigError(
            f"{_key('loss_mode')}={VERL_BYPASS_LOSS!r} is verl's internal loss, which its legacy trainer (trainer.use_v1=false) "
            "puts in place of loss_mode when algorithm.rollout_correction.bypass_mode=true, copying "
            "algorithm.rollout_correction into it. Chosen by hand under trainer.use_v1=true, it reads "
            "policy_loss.rollout_correction, which nothing fills, so every algorithm.rollout_correction key (loss_type, "
            "rollout_is, rollout_rs, ...) would be ignored. With bypass_mode=true the v1 trainer already gives every loss "
            "pi_old = the behaviour policy: pick the loss itself (vanilla is its loss_type=ppo_clip; rec_reinforce is "
            "REINFORCE without importance weights)."
        )


# verl-ext's own hyperparameters in this node (not verl's fields, not the mirrors), each read by the losses whose
# catalog entry lists its key.
OWN_KEYS = ("outer_clip_ratio_low", "outer_clip_ratio_high", "reg_coef", "reg_form", "weight_temperature",
            "topr_ratio_level", "m2_threshold", "m2_tokens")


def _reject_unread_keys(config: RECPolicyLossConfig, spec) -> None:
    """A hyperparameter the chosen loss does not read, set to another value than its default, is refused.

    Otherwise ``reg_coef=0.5`` with ``loss_mode=rec_oneside_nois`` would run and change nothing. The defaults
    (the recipe config's values) are accepted with every loss, so a config need not unset what it does not use.
    """
    defaults = {field.name: field.default for field in fields(RECPolicyLossConfig)}
    read = set(spec.keys) if spec is not None else set()
    for name in OWN_KEYS:
        key, value = _key(name), getattr(config, name)
        if key in read or value == defaults[name]:
            continue
        readers = sorted(loss for loss, loss_spec in POLICY_LOSSES.items() if key in loss_spec.keys)
        reject(key, value, f"its default {defaults[name]!r} with loss_mode={config.loss_mode!r}, which does not read it",
               f"Only {readers} read it: remove the override or pick one of those losses.")


# Every number verl-ext reads from this node, with what it accepts. Type and finiteness are checked first for
# all of them, whatever the loss: nan passes no comparison, so a range check alone lets it through. None is
# allowed only for the mirrors (a config built without the recipe).
NUMBER_KEYS = (
    ("outer_clip_ratio_low", _key("outer_clip_ratio_low"), "a finite number in [0, 1] (epsilon'_low of REC-Ring)"),
    ("outer_clip_ratio_high", _key("outer_clip_ratio_high"), "a finite number >= 0 (epsilon'_high of REC-Ring)"),
    ("reg_coef", _key("reg_coef"), "a finite number >= 0 (beta of OPMD/AsymRE; paper: 0.1)"),
    ("weight_temperature", _key("weight_temperature"), "a finite number > 0 (T of RED-Weight; paper: 1.0)"),
    ("m2_threshold", _key("m2_threshold"), "a finite number >= 0 (tau_M2 of M2PO; paper: 0.04)"),
    ("clip_ratio_low", "actor_rollout_ref.actor.clip_ratio_low", "a finite number in [0, 1] (epsilon_low)"),
    ("clip_ratio_high", "actor_rollout_ref.actor.clip_ratio_high", "a finite number >= 0 (epsilon_high)"),
)
MIRRORED_NUMBERS = ("clip_ratio_low", "clip_ratio_high")
# The switches verl-ext's checks read (mirrors): a string or a number there would be read as "true".
MIRRORED_SWITCHES = (
    ("bypass_mode", "algorithm.rollout_correction.bypass_mode"),
    ("rollout_is_batch_normalize", "algorithm.rollout_correction.rollout_is_batch_normalize"),
    ("use_v1", "trainer.use_v1"),
)


def _check_numbers(config: RECPolicyLossConfig) -> None:
    for name, key, allowed in NUMBER_KEYS:
        value = getattr(config, name)
        if value is None and name in MIRRORED_NUMBERS:
            continue
        if not is_finite_number(value):
            reject(key, value, allowed)
    for name, key in MIRRORED_SWITCHES:
        value = getattr(config, name)
        if value is not None and not isinstance(value, bool):
            reject(key, value, "true or false")
    threshold = config.rollout_is_threshold
    if isinstance(threshold, (int, float)) and not is_finite_number(threshold):
        reject(
            "algorithm.rollout_correction.rollout_is_threshold",
            threshold,
            "a finite number (e.g. 2.0; 1e6 for offpolicy_grpo) or null",
        )


def _check_offpolicy_grpo_sources(config: RECPolicyLossConfig) -> None:
    """offpolicy_grpo needs pi_k (old_log_prob recomputed by the actor) and r' = pi_k / alpha (token IS weights)."""
    needed = (
        "offpolicy_grpo needs pi_k and the behaviour policy alpha: set algorithm.rollout_correction.bypass_mode=false, "
        "algorithm.rollout_correction.rollout_is=token, "
        f"algorithm.rollout_correction.rollout_is_threshold>={OFFPOLICY_GRPO_MIN_IS_THRESHOLD:g} (e.g. 1e6, so "
        "r' = pi_k/alpha is not truncated) and rollout_is_batch_normalize=false"
    )
    if config.bypass_mode:
        raise ConfigError(f"algorithm.rollout_correction.bypass_mode=true leaves no pi_k. {needed}")
    if config.bypass_mode is None:
        return  # built without the recipe's mirrors: the loss checks its inputs at run time
    if config.rollout_is != "token":
        raise ConfigError(f"algorithm.rollout_correction.rollout_is={config.rollout_is!r}. {needed}")
    threshold = config.rollout_is_threshold
    try:
        upper = float(threshold)
    except (TypeError, ValueError):
        raise ConfigError(f"algorithm.rollout_correction.rollout_is_threshold={threshold!r} (a band). {needed}") from None
    if not math.isfinite(upper) or upper < OFFPOLICY_GRPO_MIN_IS_THRESHOLD:
        raise ConfigError(f"algorithm.rollout_correction.rollout_is_threshold={threshold!r} truncates r'. {needed}")
    if config.rollout_is_batch_normalize:
        raise ConfigError(f"algorithm.rollout_correction.rollout_is_batch_normalize=true rescales r'. {needed}")


# The recipe's mirrors: each field of this node that copies a key from elsewhere, and that key. Setting a
# mirror by hand changes no loss (the losses and verl read the real key), so it is refused, naming the key.
MIRRORS = {
    "clip_ratio_low": "actor_rollout_ref.actor.clip_ratio_low",
    "clip_ratio_high": "actor_rollout_ref.actor.clip_ratio_high",
    "adv_estimator": "algorithm.adv_estimator",
    "bypass_mode": "algorithm.rollout_correction.bypass_mode",
    "rollout_is": "algorithm.rollout_correction.rollout_is",
    "rollout_is_threshold": "algorithm.rollout_correction.rollout_is_threshold",
    "rollout_is_batch_normalize": "algorithm.rollout_correction.rollout_is_batch_normalize",
    "use_v1": "trainer.use_v1",
}
POLICY_LOSS_NODE = "actor_rollout_ref.actor.policy_loss"


def check_mirrors(config) -> None:
    """Refuse a mirror set by hand in the whole ``main_ppo`` config (before interpolations are resolved).

    ``policy_loss.clip_ratio_low=0.3`` looks like epsilon_low but is only the checks' copy of
    ``actor_rollout_ref.actor.clip_ratio_low``: the driver runs this before verl builds the actor config.
    """
    from omegaconf import OmegaConf

    node = OmegaConf.select(config, POLICY_LOSS_NODE, default=None)
    if node is None or OmegaConf.select(node, "_target_", default=None) != f"{__name__}.{RECPolicyLossConfig.__name__}":
        return  # not verl-ext's policy-loss config: no mirrors
    for field, source in MIRRORS.items():
        if field in node and not OmegaConf.is_interpolation(node, field):
            reject(
                f"{POLICY_LOSS_NODE}.{field}",
                node._get_node(field)._value(),
                f"the recipe's copy ${{{source}}}, which is never set by hand",
                f"It is a read-only mirror for verl-ext's checks and no loss reads it: set {source} instead.",
            )
