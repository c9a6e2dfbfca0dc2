"""Which losses and estimators verl-ext provides, which config keys each reads, and what each is in the papers.

Each algorithm module registers itself with a decorator on its function, the registered name written once,
there (``git grep '"rec_ring_nois"'`` finds one line):

    @policy_loss("rec_oneside_nois", "REC-OneSide-NoIS", f"{REC}, eq. 8", reads=EPSILONS_READ, clipping="one_side", ...)
    def rec_loss(log_prob, old_log_prob, advantages, response_mask, *, clipping, ..., epsilon_low, epsilon_high): ...

This module collects them into :data:`POLICY_LOSSES` and :data:`ESTIMATORS`, the one table the rest of verl-ext
reads: the verl glue (:mod:`verl_ext.algorithms.verl_glue`), ``verl-ext list``, the docs' algorithm table, the
lab and the presets (:mod:`verl_ext.algorithms.presets`). Pick an algorithm by its name:

    algorithm.adv_estimator=<estimator>   actor_rollout_ref.actor.policy_loss.loss_mode=<loss>

Importing this module does not import torch (the algorithm modules take torch from
:mod:`verl_ext.algorithms.lazy_torch`): the run scripts' launcher reads the names and keys from it to refuse a
bad argument in a fraction of a second (tests/adversarial/test_launcher_variables.py checks it).
"""

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

if TYPE_CHECKING:
    import torch

    from verl_ext.algorithms.tokens import LossTerms

ACTOR = "actor_rollout_ref.actor"
POLICY_LOSS_NODE = f"{ACTOR}.policy_loss"
REC = "arXiv 2509.24203"


@dataclass(frozen=True)
class Hyperparameter:
    """A config key a loss reads: the keyword argument of the loss function it fills, its default (the recipe
    config's value, and the value used when a config leaves the key out), and what it accepts.

    A key of the policy-loss node becomes a field of the policy-loss config
    (:mod:`verl_ext.algorithms.loss_config`), whose checks refuse a number that is not ``allowed`` (type and
    finiteness) or a string outside ``choices``, naming the key.
    """

    argument: str
    key: str
    default: Any
    allowed: str = ""  # what a value must be, as a refusal says it: "a finite number >= 0 (beta of OPMD/AsymRE)"
    choices: tuple[str, ...] = ()  # the values a string setting accepts
    why: str = ""  # what the setting chooses, added to a refusal

    @property
    def field(self) -> str:
        """The key's last part: the field of verl's actor config or of the policy-loss config that holds it."""
        return self.key.rsplit(".", 1)[1]


# Read by several losses: verl's own clipping range, and beta of the regularized losses.
CLIP_RATIO_LOW = Hyperparameter("epsilon_low", f"{ACTOR}.clip_ratio_low", 0.2, "a finite number in [0, 1] (epsilon_low)")
CLIP_RATIO_HIGH = Hyperparameter("epsilon_high", f"{ACTOR}.clip_ratio_high", 0.2, "a finite number >= 0 (epsilon_high)")
REG_COEF = Hyperparameter("beta", f"{POLICY_LOSS_NODE}.reg_coef", 0.1, "a finite number >= 0 (beta of OPMD/AsymRE; paper: 0.1)")

EPSILONS = (CLIP_RATIO_LOW.key, CLIP_RATIO_HIGH.key)
BETA = (REG_COEF.key,)


@dataclass(frozen=True)
class PolicyLossSpec:
    """A registered loss: ``function(log_prob, old_log_prob, advantages, response_mask, **variant,
    **hyperparameters)`` returns :class:`~verl_ext.algorithms.tokens.LossTerms`."""

    name: str
    paper_name: str
    reference: str
    function: Callable[..., "LossTerms"]
    reads: tuple[Hyperparameter, ...] = ()
    variant: Mapping[str, Any] = field(default_factory=dict)  # fixed keyword arguments that make this variant
    # What old_log_prob must be: "behaviour" (pi_old = the policy that generated the batch),
    # "current_and_behaviour" (pi_k as old_log_prob and pi_k/alpha as rollout_is_weights, passed to the function
    # as ``behaviour_ratio``), or "unused".
    old_log_prob: str = "behaviour"
    uses_outer_margins: bool = False
    regularizer: bool = False  # a term that gives every response a gradient, whatever its advantage
    # the actor.loss_agg_mode the paper's formula is (None: verl's default token-mean)
    paper_loss_agg_mode: Optional[str] = None
    # the paper's advantages are GRPO's std-normalised group advantages (verl's "grpo" estimator), not A = r - mean
    grpo_advantages: bool = False

    @property
    def keys(self) -> tuple[str, ...]:
        """The config keys this loss reads."""
        return tuple(hyperparameter.key for hyperparameter in self.reads)

    def defaults(self) -> dict[str, Any]:
        """{key: default} of the keys this loss reads."""
        return {hyperparameter.key: hyperparameter.default for hyperparameter in self.reads}

    def compute(self, log_prob, old_log_prob, advantages, response_mask, rollout_is_weights, values: Mapping[str, Any]):
        """The loss's terms, with ``values`` ({key: value}) for the keys it reads."""
        arguments = {hyperparameter.argument: values[hyperparameter.key] for hyperparameter in self.reads}
        if self.old_log_prob == "current_and_behaviour":
            arguments["behaviour_ratio"] = rollout_is_weights
        return self.function(log_prob, old_log_prob, advantages, response_mask, **self.variant, **arguments)


@dataclass(frozen=True)
class Estimate:
    """An estimator's output: one advantage per response, and metrics for the trainer to log."""

    advantages: "torch.Tensor"  # (batch,)
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class EstimatorSpec:
    """A registered estimator: ``compute(scores, group ids, algorithm config) -> Estimate``, with one reward per
    response, (batch,)."""

    name: str
    paper_name: str
    reference: str
    compute: Callable[["torch.Tensor", Any, Any], Estimate]
    keys: tuple[str, ...] = ()
    drops_responses: bool = False  # gives some responses advantage 0 to remove them from the update


_losses: dict[str, PolicyLossSpec] = {}
_estimators: dict[str, EstimatorSpec] = {}


def _add(table: dict, name: str, spec) -> None:
    if name in table:
        raise ValueError(f"{name!r} is registered twice")
    table[name] = spec


def policy_loss(name: str, paper_name: str, reference: str, *, reads: tuple[Hyperparameter, ...] = (), **options):
    """Register the decorated loss function under ``name``. ``options``: the other :class:`PolicyLossSpec`
    fields (``old_log_prob``, ``regularizer``, ...); any other keyword is a fixed argument of this variant.

    Stacked decorators run bottom-up; the variants of one function are listed in the order they are written."""
    spec_fields = set(PolicyLossSpec.__dataclass_fields__) - {"name", "paper_name", "reference", "function", "reads", "variant"}
    variant = {key: value for key, value in options.items() if key not in spec_fields}
    settings = {key: value for key, value in options.items() if key in spec_fields}

    def register(function):
        spec = PolicyLossSpec(name, paper_name, reference, function, tuple(reads), variant, **settings)
        later = [other for other in _losses.values() if other.function is function]  # written below this one
        for other in later:
            del _losses[other.name]
        _add(_losses, name, spec)
        for other in later:
            _losses[other.name] = other
        return function

    return register


def estimator(name: str, paper_name: str, reference: str, *, keys: tuple[str, ...] = (), drops_responses: bool = False):
    """Register the decorated ``compute(scores, index, config) -> Estimate`` under ``name``."""

    def register(compute):
        _add(_estimators, name, EstimatorSpec(name, paper_name, reference, compute, tuple(keys), drops_responses))
        return compute

    return register


# Filled by the algorithm modules' decorators when the package is imported (verl_ext/algorithms/__init__.py
# imports every one, in the order ``verl-ext list`` and the presets show them).
POLICY_LOSSES: dict[str, PolicyLossSpec] = _losses
ESTIMATORS: dict[str, EstimatorSpec] = _estimators


def policy_loss_spec(name: str) -> Optional[PolicyLossSpec]:
    """The spec of a verl-ext loss, or None for a name verl-ext does not provide."""
    return POLICY_LOSSES.get(name)


def estimator_spec(name: str) -> Optional[EstimatorSpec]:
    """The spec of a verl-ext estimator, or None for a name verl-ext does not provide (verl's own)."""
    return ESTIMATORS.get(name)


def hyperparameters() -> dict[str, Hyperparameter]:
    """Every key a verl-ext loss reads, with its declaration."""
    return {hyperparameter.key: hyperparameter for spec in POLICY_LOSSES.values() for hyperparameter in spec.reads}


def default_hyperparameters() -> dict[str, Any]:
    """{key: default} of every key a verl-ext loss reads."""
    return {key: hyperparameter.default for key, hyperparameter in hyperparameters().items()}
