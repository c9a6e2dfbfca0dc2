"""The hyperparameters of verl-ext's losses: every config key a loss reads, declared once, with its type, its
default, its one-line meaning and the values it accepts (checked by :func:`check_value`, the one range check).

A key keeps one name from the command line to the tensor: the field ``reg_coef`` is the config key
``actor_rollout_ref.actor.policy_loss.reg_coef`` and the keyword argument ``reg_coef`` of every loss function
that reads it (``opmd_loss(..., reg_coef=...)``); the formula's symbol (beta) is in the loss module's docstring
and in ``symbol`` below. The keys live in two config nodes:

- :class:`ActorKeys`, ``actor_rollout_ref.actor.<name>``: verl's clipping range, which verl-ext's clipped losses
  read where verl's own losses do (``config.clip_ratio_low``). verl declares these keys and their default
  (``verl.workers.config.ActorConfig``; a test holds the two equal); this says what they mean to verl-ext.
- :class:`PolicyLossKeys`, ``actor_rollout_ref.actor.policy_loss.<name>``: verl-ext's own keys. The recipe's
  policy-loss config (:class:`verl_ext.algorithms.loss_config.RECPolicyLossConfig`, verl's ``PolicyLossConfig``
  plus these fields) is what verl builds from them.

These defaults are the one place in the code: the presets state them, the verl glue falls back on them. The recipe config (``verl_ext/recipe/rec_trainer.yaml``) writes each key again, because Hydra
overrides only keys it finds there (without ``+``); ``tests/algorithms/test_registry.py`` holds the two equal.
Which losses read which key: their registrations (``@policy_loss(..., reads=(...))``, :mod:`.registry`).

No torch or verl import: the run scripts' launcher reads the defaults to refuse a bad argument at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Optional, Union

from verl_ext.config_values import is_finite_number, reject

ACTOR = "actor_rollout_ref.actor"
POLICY_LOSS_NODE = f"{ACTOR}.policy_loss"


@dataclass(frozen=True)
class Numbers:
    """The finite numbers in [low, high] (``(low, high]`` with ``low_open``); None: no bound on that side."""

    low: Optional[float] = None
    high: Optional[float] = None
    low_open: bool = False

    def admits(self, value: Any) -> bool:
        if not is_finite_number(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or value <= self.high

    @property
    def bounds(self) -> str:
        """``in [0, 1]``, ``>= 0``, ``> 0``."""
        if self.low is not None and self.high is not None:
            return f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}]"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        return f"<= {self.high:g}" if self.high is not None else "any"

    def __str__(self) -> str:
        return f"a finite number {self.bounds}"


@dataclass(frozen=True)
class Choices:
    """One of a few strings."""

    values: tuple[str, ...]

    def admits(self, value: Any) -> bool:
        return isinstance(value, str) and value in self.values

    def __str__(self) -> str:
        return f"one of {list(self.values)}"


Allowed = Union[Numbers, Choices]


def hyperparameter(default: Any, allowed: Allowed, meaning: str, symbol: str = "") -> Any:
    """A declared key: its default, the values it accepts, its meaning (added to a refusal) and the paper's symbol
    for it."""
    return field(default=default, metadata={"allowed": allowed, "meaning": meaning, "symbol": symbol})


# The string settings' values; the first is the default (the paper's).
REG_FORMS = ("sequence", "token")
TOPR_RATIO_LEVELS = ("sequence", "token")
M2_TOKEN_SETS = ("trust_region", "all")


@dataclass
class ActorKeys:
    """``actor_rollout_ref.actor.<name>``: verl's keys that verl-ext's losses read."""

    clip_ratio_low: float = hyperparameter(
        0.2, Numbers(0, 1), "epsilon_low: the clipped losses keep a ratio rho >= 1 - epsilon_low (paper: 0.2; enlarged: 0.6)",
        "epsilon_low")
    clip_ratio_high: float = hyperparameter(
        0.2, Numbers(0), "epsilon_high: the clipped losses keep a ratio rho <= 1 + epsilon_high (paper: 0.2; enlarged: 2.0)",
        "epsilon_high")


@dataclass
class PolicyLossKeys:
    """``actor_rollout_ref.actor.policy_loss.<name>``: verl-ext's own keys (fields of the recipe's policy-loss config)."""

    outer_clip_ratio_low: float = hyperparameter(
        0.6, Numbers(0, 1), "epsilon'_low of REC-Ring: A > 0 keeps its gradient again where rho <= 1 - epsilon'_low "
        "(>= clip_ratio_low)", "epsilon'_low")
    outer_clip_ratio_high: float = hyperparameter(
        2.0, Numbers(0), "epsilon'_high of REC-Ring: A < 0 keeps its gradient again where rho >= 1 + epsilon'_high "
        "(>= clip_ratio_high)", "epsilon'_high")
    reg_coef: float = hyperparameter(0.1, Numbers(0), "beta of OPMD and AsymRE (paper: 0.1)", "beta")
    reg_form: str = hyperparameter(
        REG_FORMS[0], Choices(REG_FORMS), "OPMD's regularizer: 'sequence', (beta/2) S_i^2 of the whole response's "
        "log-ratio (the paper's), or 'token', (beta/2) sum_t Delta_it^2 (Trinity-RFT's and verl's dro)")
    weight_temperature: float = hyperparameter(
        1.0, Numbers(0, low_open=True), "T of RED-Weight, w_i = exp(A_i / T) (paper: 1.0)", "T")
    topr_ratio_level: str = hyperparameter(
        TOPR_RATIO_LEVELS[0], Choices(TOPR_RATIO_LEVELS), "TOPR's truncated ratio on negative examples: 'sequence', "
        "pi(y)/mu(y) of the whole response (the paper's), or 'token', per token (Trinity-RFT's)")
    m2_threshold: float = hyperparameter(
        0.04, Numbers(0), "tau_M2 of M2PO: the largest squared log-ratios are masked until the mean of the rest is "
        "<= tau_M2 (paper: 0.04)", "tau_M2")
    m2_tokens: str = hyperparameter(
        M2_TOKEN_SETS[0], Choices(M2_TOKEN_SETS), "the tokens M2PO measures and masks: 'trust_region', those whose "
        "ratio moved with their advantage (the paper's), or 'all' (AReaL's)")


_NODES = ((ActorKeys, ACTOR), (PolicyLossKeys, POLICY_LOSS_NODE))
# name -> (its config key, its dataclass field), every declared key, in declaration order
DECLARED = {item.name: (f"{node}.{item.name}", item) for keys, node in _NODES for item in fields(keys)}
CLIPPING_RANGE = tuple(item.name for item in fields(ActorKeys))  # ("clip_ratio_low", "clip_ratio_high")
OWN_KEYS = tuple(item.name for item in fields(PolicyLossKeys))


def _declared(name: str):
    if name not in DECLARED:
        raise KeyError(f"{name!r} is not a declared hyperparameter; declared: {list(DECLARED)}")
    return DECLARED[name]


def key_of(name: str) -> str:
    """``reg_coef`` -> ``actor_rollout_ref.actor.policy_loss.reg_coef``."""
    return _declared(name)[0]


def default_of(name: str) -> Any:
    return _declared(name)[1].default


def allowed_of(name: str) -> Allowed:
    return _declared(name)[1].metadata["allowed"]


def meaning_of(name: str) -> str:
    return _declared(name)[1].metadata["meaning"]


def symbol_of(name: str) -> str:
    return _declared(name)[1].metadata["symbol"]


def check_value(name: str, value: Any, key: str = "") -> None:
    """Raise :class:`~verl_ext.config_values.ConfigError` naming the key (``key``, where the value was read from
    another one) when ``value`` is not one the hyperparameter ``name`` accepts (type and finiteness first: nan
    passes no comparison)."""
    if not allowed_of(name).admits(value):
        reject(key or key_of(name), value, str(allowed_of(name)), f"It is {meaning_of(name)}.")
