"""The actor's policy-loss config (the recipe's ``_target_``), and the checks of the loss and estimator settings.

verl's actor config is a strict dataclass: unknown keys fail. The recipe config points
``actor_rollout_ref.actor.policy_loss._target_`` at :class:`RECPolicyLossConfig`: verl's ``PolicyLossConfig`` plus
verl-ext's keys, each declared with its type, default and meaning in
:class:`verl_ext.algorithms.hyperparameters.PolicyLossKeys` (declared there, without verl, because the run scripts'
launcher reads the defaults before it imports verl or torch).

Each setting is checked once, by one of two functions:

- :func:`check_policy_loss_node`, when the config is built (verl builds it in the driver's ``validate_config``,
  before Ray, and again in every actor worker): what this node alone decides. ``loss_mode`` is a registered loss,
  each of verl-ext's keys holds a value it accepts, a key the chosen loss does not read keeps its default, and
  verl's ``dro`` has its ``dro_beta``;
- :func:`check_algorithm_keys`, on the whole ``main_ppo`` config (run by :mod:`verl_ext.driver_checks` in the
  driver of ``main_ppo`` and in the dry run, before Ray): what needs keys from elsewhere. The estimator, verl's
  clipping range (``actor.clip_ratio_low/high``: its values, REC-Ring's outer margins outside it, and no other
  value than the default with a loss that reads no clipping range), verl's own loss keys (``actor.clip_ratio_c``,
  ``policy_loss.dro_beta``, ...) and ``actor.clip_ratio`` with a verl-ext loss that does not read them, where
  pi_old comes from (``algorithm.rollout_correction``, ``trainer.use_v1``), RED-Drop with a regularizer, and one
  response per prompt with an estimator whose baseline is the prompt's group.

"Set to another value than its default" is how an override of a key the loss does not read is recognised: the
recipe (and verl, for the clipping range) writes every default, the presets write the default clipping range for
every loss, and a default changes nothing, so only another value can be a setting that would be ignored.
"""

import math
from dataclasses import dataclass, fields
from typing import Any

from omegaconf import OmegaConf
from verl.workers.config import PolicyLossConfig

from verl_ext.algorithms.hyperparameters import (
    ACTOR,
    CLIPPING_RANGE,
    OWN_KEYS,
    POLICY_LOSS_NODE,
    PolicyLossKeys,
    check_value,
    default_of,
    key_of,
)
from verl_ext.algorithms.registry import ESTIMATORS, POLICY_LOSSES, estimator_spec, policy_loss_spec, readers
from verl_ext.config_values import ConfigError, is_finite_number, reject


@dataclass
class RECPolicyLossConfig(PolicyLossConfig, PolicyLossKeys):
    """``actor_rollout_ref.actor.policy_loss``: verl's fields (``loss_mode``, ``dro_beta``, ...) and verl-ext's
    (:class:`~verl_ext.algorithms.hyperparameters.PolicyLossKeys`). Building it runs :func:`check_policy_loss_node`."""

    def __post_init__(self):
        parent_post_init = getattr(super(), "__post_init__", None)
        if parent_post_init is not None:
            parent_post_init()
        check_policy_loss_node(self)


LOSS_CONFIG_CLASS = f"{RECPolicyLossConfig.__module__}.{RECPolicyLossConfig.__qualname__}"
LOSS_MODE = f"{POLICY_LOSS_NODE}.loss_mode"
ESTIMATOR = "algorithm.adv_estimator"
ROLLOUT_N = "actor_rollout_ref.rollout.n"
CORRECTION = "algorithm.rollout_correction"
BYPASS_MODE = f"{CORRECTION}.bypass_mode"
USE_V1 = "trainer.use_v1"
# verl's fallback for an unset (null) actor.clip_ratio_low/high, in verl's losses and in verl-ext's
VERL_CLIP_RATIO = f"{ACTOR}.clip_ratio"

# verl's loss that its legacy trainer substitutes for loss_mode under algorithm.rollout_correction.bypass_mode=true
VERL_BYPASS_LOSS = "bypass_mode"
VERL_DRO_LOSS = "dro"  # verl's DRO: needs policy_loss.dro_beta > 0, which verl checks only when the loss first runs
OFFPOLICY_GRPO_MIN_IS_THRESHOLD = 100.0


def check_policy_loss_node(config: RECPolicyLossConfig) -> None:
    """Raise :class:`ConfigError` on the first invalid value of the policy-loss node, naming the key."""
    from verl.trainer.ppo.core_algos import POLICY_LOSS_REGISTRY

    loss_mode = config.loss_mode
    if loss_mode not in POLICY_LOSS_REGISTRY:
        allowed = sorted(set(POLICY_LOSS_REGISTRY) | set(POLICY_LOSSES))
        raise ConfigError(f"{LOSS_MODE}={loss_mode!r} is not a registered policy loss. Allowed: {allowed}")
    for name in OWN_KEYS:
        check_value(name, getattr(config, name))
    spec = policy_loss_spec(loss_mode)
    for name in OWN_KEYS:
        _reject_if_unread(name, getattr(config, name), loss_mode, spec)
    if loss_mode == VERL_DRO_LOSS and not (is_finite_number(config.dro_beta) and config.dro_beta > 0):
        reject(f"{POLICY_LOSS_NODE}.dro_beta", config.dro_beta, f"a finite number > 0 with loss_mode={VERL_DRO_LOSS!r}",
               "verl's DRO loss raises on anything else in its first actor update, after Ray and the workers start.")


def _reject_if_unread(name: str, value: Any, loss_mode: str, spec, key: str = "") -> None:
    """A hyperparameter the chosen loss does not read, at another value than its default, is refused: otherwise
    ``reg_coef=0.5`` with ``loss_mode=rec_oneside_nois`` would run and change nothing."""
    if (spec is not None and name in spec.reads) or value == default_of(name):
        return
    extra = " and verl's own clipped losses" if name in CLIPPING_RANGE else ""
    reject(key or key_of(name), value, f"its default {default_of(name)!r} with loss_mode={loss_mode!r}, which does not read it",
           f"Only {readers(name)}{extra} read it: remove the override or pick one of those losses.")


def check_algorithm_keys(config) -> None:
    """Raise :class:`ConfigError` on the first setting of the whole ``main_ppo`` config (a DictConfig) that the
    chosen loss and estimator cannot run as written, naming the key (see the module's docstring)."""
    _check_group_size(config)
    loss_mode = _value(config, LOSS_MODE)
    spec = policy_loss_spec(str(loss_mode))
    if _value(config, f"{POLICY_LOSS_NODE}._target_") != LOSS_CONFIG_CLASS:
        if spec is not None:
            reject(f"{POLICY_LOSS_NODE}._target_", _value(config, f"{POLICY_LOSS_NODE}._target_"), LOSS_CONFIG_CLASS,
                   f"loss_mode={loss_mode!r} is verl-ext's: its keys live in verl-ext's policy-loss config. Use the "
                   "recipe config (--config-path=recipe/rec/config --config-name=rec_trainer).")
        return  # verl's own config and loss: verl-ext has nothing to check
    _check_node_keys(config)
    estimator = _value(config, ESTIMATOR)
    _check_estimator(estimator)
    _check_switches(config)
    clipping = _clipping_range(config)
    for name, (key, value) in clipping.items():
        check_value(name, value, key)
    if spec is None:
        _check_verl_loss(config, loss_mode)
        return
    for name, (key, value) in clipping.items():
        _reject_if_unread(name, value, loss_mode, spec, key)
    _reject_verl_keys(config, loss_mode, spec, clipping)
    if "outer_clip_ratio_low" in spec.reads:
        _check_outer_margins(config, clipping)
    _check_old_log_prob(config, loss_mode, spec)
    estimator_of_run = estimator_spec(str(estimator))
    if estimator_of_run is not None and estimator_of_run.drops_responses and spec.regularizer:
        raise ConfigError(
            f"{ESTIMATOR}={estimator} with loss_mode={loss_mode!r}: {estimator_of_run.paper_name.split(':')[0]} "
            "removes a response by giving it advantage 0, but this loss's regularizer would still push on dropped "
            f"responses. Use a loss without a regularizer: {sorted(n for n, s in POLICY_LOSSES.items() if not s.regularizer)}"
        )


def _value(config, key: str) -> Any:
    return OmegaConf.select(config, key, default=None)


def _check_node_keys(config) -> None:
    """A key added to the policy-loss node (``+actor_rollout_ref.actor.policy_loss.<key>=...``) that the config
    has no field for: verl would refuse it while building the config, with a TypeError that does not say where the
    key lives. ``policy_loss.clip_ratio_low`` looks like epsilon_low, which is ``actor.clip_ratio_low``."""
    node = _value(config, POLICY_LOSS_NODE)
    known = [item.name for item in fields(RECPolicyLossConfig)]
    for name in node:
        if name in known:
            continue
        hint = f"set {key_of(name)} instead" if name in CLIPPING_RANGE else "remove it"
        reject(f"{POLICY_LOSS_NODE}.{name}", OmegaConf.select(node, name, throw_on_resolution_failure=False),
               f"none: the node has no key {name!r} (its keys: {', '.join(sorted(known))})", f"No loss reads it: {hint}.")


def _check_estimator(estimator: Any) -> None:
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY

    if str(estimator) not in ADV_ESTIMATOR_REGISTRY:
        raise ConfigError(f"{ESTIMATOR}={estimator!r} is not a registered advantage estimator. "
                          f"Allowed: {sorted(ADV_ESTIMATOR_REGISTRY)}")


# verl 0.9.1's estimators whose baseline is the prompt's group (verl/trainer/ppo/core_algos.py), and what each
# gives a group of one response. verl-ext's (rec, red_drop) give it advantage 0 too: nothing trains.
VERL_GROUP_ESTIMATORS = {
    "grpo": "A = r: verl drops the baseline (group mean 0, std 1)",
    "rloo": "A = r: verl drops the baseline",
    "opo": "A = r: verl drops the baseline",
    "reinforce_plus_plus_baseline": "A = r before the batch whitening: verl drops the baseline",
    "grpo_vectorized": "A = 0: nothing trains",
    "rloo_vectorized": "A = 0: nothing trains",
    "grpo_passk": "a ValueError in the first step, after Ray and the workers start",
}


def _check_group_size(config) -> None:
    """``rollout.n`` = 1 with an estimator whose baseline is the group: each prompt's group is its one response."""
    estimator, responses = _value(config, ESTIMATOR), _value(config, ROLLOUT_N)
    if responses != 1 or not (str(estimator) in ESTIMATORS or str(estimator) in VERL_GROUP_ESTIMATORS):
        return
    outcome = VERL_GROUP_ESTIMATORS.get(str(estimator), "A = r - r = 0 for every response: nothing trains")
    reject(ROLLOUT_N, responses, f"an integer >= 2 with {ESTIMATOR}={estimator}",
           f"{estimator} measures each response against the other responses to its prompt; with one response per "
           f"prompt it gives {outcome}. Use rollout.n >= 2, or an estimator without a group baseline "
           "(e.g. verl's reinforce_plus_plus).")


# The switches verl-ext's checks read: a string or a number there would be read as "true".
SWITCHES = (BYPASS_MODE, f"{CORRECTION}.rollout_is_batch_normalize", USE_V1)
ROLLOUT_IS_THRESHOLD = f"{CORRECTION}.rollout_is_threshold"


def _check_switches(config) -> None:
    for key in SWITCHES:
        value = _value(config, key)
        if value is not None and not isinstance(value, bool):
            reject(key, value, "true or false")
    threshold = _value(config, ROLLOUT_IS_THRESHOLD)
    if isinstance(threshold, (int, float)) and not is_finite_number(threshold):
        reject(ROLLOUT_IS_THRESHOLD, threshold, "a finite number (e.g. 2.0; 1e6 for offpolicy_grpo) or null")


def _clipping_range(config) -> dict[str, tuple[str, Any]]:
    """{name: (key, value)} of the clipping range the losses read: ``actor.clip_ratio_low/high``, or verl's
    ``actor.clip_ratio`` where one is null (as verl's losses, and verl-ext's glue, fall back on it)."""
    clipping = {}
    for name in CLIPPING_RANGE:
        key, value = key_of(name), _value(config, key_of(name))
        if value is None:
            key, value = VERL_CLIP_RATIO, _value(config, VERL_CLIP_RATIO)
        clipping[name] = (key, value)
    return clipping


# verl's own loss keys and the losses of verl's that read them (verl 0.9.1's core_algos.py, read for facts): with
# a verl-ext loss nothing reads them.
VERL_LOSS_KEYS = {
    f"{ACTOR}.clip_ratio_c": ["dppo_kl", "dppo_tv", "vanilla"],
    f"{POLICY_LOSS_NODE}.clip_cov_ratio": ["clip_cov"],
    f"{POLICY_LOSS_NODE}.clip_cov_lb": ["clip_cov"],
    f"{POLICY_LOSS_NODE}.clip_cov_ub": ["clip_cov"],
    f"{POLICY_LOSS_NODE}.kl_cov_ratio": ["kl_cov"],
    f"{POLICY_LOSS_NODE}.ppo_kl_coef": ["kl_cov"],
    f"{POLICY_LOSS_NODE}.dro_beta": ["dro"],
}


def _verl_default(key: str) -> Any:
    from verl.workers.config import ActorConfig

    config_class = ActorConfig if key.startswith(f"{ACTOR}.") and not key.startswith(f"{POLICY_LOSS_NODE}.") else PolicyLossConfig
    return config_class.__dataclass_fields__[key.rsplit(".", 1)[1]].default


def _reject_verl_keys(config, loss_mode: str, spec, clipping: dict[str, tuple[str, Any]]) -> None:
    """verl's loss keys at another value than verl's default with a verl-ext loss, which reads none of them; and
    verl's ``actor.clip_ratio``, which the clipped losses read only in place of a null ``clip_ratio_low/high``."""
    for key, verl_readers in VERL_LOSS_KEYS.items():
        value, default = _value(config, key), _verl_default(key)
        if value != default:
            reject(key, value, f"verl's default {default!r} with loss_mode={loss_mode!r}, which does not read it",
                   f"Only verl's {verl_readers} read it: remove the override or pick one of those losses.")
    clip_ratio, default = _value(config, VERL_CLIP_RATIO), _verl_default(VERL_CLIP_RATIO)
    in_use = set(CLIPPING_RANGE) <= set(spec.reads) and any(key == VERL_CLIP_RATIO for key, _ in clipping.values())
    if clip_ratio != default and not in_use:
        reject(VERL_CLIP_RATIO, clip_ratio, f"verl's default {default!r} with loss_mode={loss_mode!r}",
               f"verl-ext's clipped losses read it only in place of a null {key_of('clip_ratio_low')} or "
               f"{key_of('clip_ratio_high')}; set those (epsilon_low, epsilon_high) instead.")


def _check_outer_margins(config, clipping: dict[str, tuple[str, Any]]) -> None:
    """REC-Ring's outer margins lie outside the inner band: epsilon'_low >= epsilon_low, epsilon'_high >= epsilon_high."""
    for outer_name, inner_name, symbol in (("outer_clip_ratio_low", "clip_ratio_low", "low"),
                                           ("outer_clip_ratio_high", "clip_ratio_high", "high")):
        outer = _value(config, key_of(outer_name))
        inner_key, inner = clipping[inner_name]
        if is_finite_number(outer) and outer < inner:  # a non-number is refused when verl builds the node
            raise ConfigError(f"{key_of(outer_name)}={outer} lies inside the inner band: epsilon'_{symbol} must be >= "
                              f"epsilon_{symbol} = {inner_key}={inner}")


def _check_old_log_prob(config, loss_mode: str, spec) -> None:
    """pi_old must be what the loss's formula needs (:attr:`PolicyLossSpec.old_log_prob`)."""
    bypass, use_v1 = _value(config, BYPASS_MODE), _value(config, USE_V1)
    if spec.old_log_prob == "behaviour" and bypass is False:
        raise ConfigError(
            f"loss_mode={loss_mode!r} needs pi_old = the behaviour policy (the rollout's log-probs), but "
            f"{BYPASS_MODE}=false makes verl recompute old_log_prob with the current actor (every ratio 1, every clip "
            f"inert). Set {BYPASS_MODE}=true (the recipe's default)."
        )
    if spec.old_log_prob == "behaviour" and bypass and use_v1 is False:
        raise ConfigError(
            f"{USE_V1}=false: verl's legacy trainer replaces loss_mode with 'bypass_mode' whenever "
            f"{BYPASS_MODE}=true, so {loss_mode!r} would never run. Use {USE_V1}=true."
        )
    if spec.old_log_prob == "current_and_behaviour":
        _check_offpolicy_grpo_sources(config)


def _check_verl_loss(config, loss_mode: Any) -> None:
    """verl's own losses: the setting verl would ignore without a word."""
    if loss_mode == VERL_BYPASS_LOSS and _value(config, USE_V1) is not False:
        raise ConfigError(
            f"{LOSS_MODE}={VERL_BYPASS_LOSS!r} is verl's internal loss, which its legacy trainer ({USE_V1}=false) "
            f"puts in place of loss_mode when {BYPASS_MODE}=true, copying {CORRECTION} into it. Chosen by hand under "
            f"{USE_V1}=true, it reads policy_loss.rollout_correction, which nothing fills, so every {CORRECTION} key "
            "(loss_type, rollout_is, rollout_rs, ...) would be ignored. With bypass_mode=true the v1 trainer already gives "
            "every loss pi_old = the behaviour policy: pick the loss itself (vanilla is its loss_type=ppo_clip; "
            "rec_reinforce is REINFORCE without importance weights)."
        )


def _check_offpolicy_grpo_sources(config) -> None:
    """offpolicy_grpo needs pi_k (old_log_prob recomputed by the actor) and r' = pi_k / alpha (token IS weights)."""
    needed = (
        f"offpolicy_grpo needs pi_k and the behaviour policy alpha: set {BYPASS_MODE}=false, {CORRECTION}.rollout_is=token, "
        f"{ROLLOUT_IS_THRESHOLD}>={OFFPOLICY_GRPO_MIN_IS_THRESHOLD:g} (e.g. 1e6, so r' = pi_k/alpha is not truncated) "
        "and rollout_is_batch_normalize=false"
    )
    if _value(config, BYPASS_MODE):
        raise ConfigError(f"{BYPASS_MODE}=true leaves no pi_k. {needed}")
    rollout_is = _value(config, f"{CORRECTION}.rollout_is")
    if rollout_is != "token":
        raise ConfigError(f"{CORRECTION}.rollout_is={rollout_is!r}. {needed}")
    threshold = _value(config, ROLLOUT_IS_THRESHOLD)
    try:
        upper = float(threshold)
    except (TypeError, ValueError):
        raise ConfigError(f"{ROLLOUT_IS_THRESHOLD}={threshold!r} (a band). {needed}") from None
    if not math.isfinite(upper) or upper < OFFPOLICY_GRPO_MIN_IS_THRESHOLD:
        raise ConfigError(f"{ROLLOUT_IS_THRESHOLD}={threshold!r} truncates r'. {needed}")
    if _value(config, f"{CORRECTION}.rollout_is_batch_normalize"):
        raise ConfigError(f"{CORRECTION}.rollout_is_batch_normalize=true rescales r'. {needed}")
