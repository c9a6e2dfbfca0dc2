"""Which losses and estimators verl-ext provides, which config keys each reads, and what each is in the papers.

Each algorithm module registers itself with a decorator on its function, the registered name written once,
there (``git grep '"rec_ring_nois"'`` finds one line):

    @policy_loss("rec_oneside_nois", "REC-OneSide-NoIS", f"{REC}, eq. 8", reads=CLIPPING_RANGE, clipping="one_side", ...)
    def rec_loss(log_prob, old_log_prob, advantages, response_mask, *, clipping, ..., clip_ratio_low, clip_ratio_high): ...

``reads`` names the hyperparameters the loss reads (declared, with their defaults and meanings, in
:mod:`verl_ext.algorithms.hyperparameters`); each is the function's keyword argument of the same name.

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

from verl_ext.algorithms.hyperparameters import CLIPPING_RANGE, DECLARED, default_of, key_of

if TYPE_CHECKING:
    import torch

    from verl_ext.algorithms.tokens import LossTerms

REC = "arXiv 2509.24203"

# The config keys of verl's clipping range (read by the clipped losses) and of beta (OPMD, AsymRE).
EPSILONS = tuple(key_of(name) for name in CLIPPING_RANGE)
BETA = (key_of("reg_coef"),)


@dataclass(frozen=True)
class PolicyLossSpec:
    """A registered loss: ``function(log_prob, old_log_prob, advantages, response_mask, **variant,
    **hyperparameters)`` returns :class:`~verl_ext.algorithms.tokens.LossTerms`."""

    name: str
    paper_name: str
    reference: str
    function: Callable[..., "LossTerms"]
    # the hyperparameters it reads (names declared in verl_ext.algorithms.hyperparameters), which are also the
    # keyword arguments of ``function`` that receive them
    reads: tuple[str, ...] = ()
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
        return tuple(key_of(name) for name in self.reads)

    def defaults(self) -> dict[str, Any]:
        """{key: default} of the keys this loss reads."""
        return {key_of(name): default_of(name) for name in self.reads}

    def compute(self, log_prob, old_log_prob, advantages, response_mask, rollout_is_weights, values: Mapping[str, Any]):
        """The loss's terms, with ``values`` ({name: value}) for the hyperparameters it reads."""
        arguments = {name: values[name] for name in self.reads}
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


def policy_loss(name: str, paper_name: str, reference: str, *, reads: tuple[str, ...] = (), **options):
    """Register the decorated loss function under ``name``. ``reads``: the hyperparameters it reads (each a
    keyword argument of the function); ``options``: the other :class:`PolicyLossSpec` fields (``old_log_prob``,
    ``regularizer``, ...); any other keyword is a fixed argument of this variant.

    Stacked decorators run bottom-up; the variants of one function are listed in the order they are written."""
    spec_fields = set(PolicyLossSpec.__dataclass_fields__) - {"name", "paper_name", "reference", "function", "reads", "variant"}
    variant = {key: value for key, value in options.items() if key not in spec_fields}
    settings = {key: value for key, value in options.items() if key in spec_fields}

    undeclared = [read for read in reads if read not in DECLARED]
    if undeclared:
        raise ValueError(f"{name!r} reads {undeclared}, which verl_ext.algorithms.hyperparameters does not declare")

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


def readers(name: str) -> list[str]:
    """The registered losses that read the hyperparameter ``name``, sorted."""
    return sorted(loss for loss, spec in POLICY_LOSSES.items() if name in spec.reads)


def default_hyperparameters() -> dict[str, Any]:
    """{name: default} of every hyperparameter a verl-ext loss reads (the ``values`` of :meth:`PolicyLossSpec.compute`)."""
    return {name: default_of(name) for spec in POLICY_LOSSES.values() for name in spec.reads}


def loss_metric_names(name: str) -> set[str]:
    """The metric names the verl-ext loss ``name`` reports (``actor/<metric>``), read off the loss itself: one call
    on a 4 x 3 batch with the default hyperparameters."""
    import torch

    from verl_ext import metric_names

    spec = POLICY_LOSSES[name]
    shape = (4, 3)
    behaviour_ratio = torch.ones(shape) if spec.old_log_prob == "current_and_behaviour" else None
    terms = spec.compute(
        torch.zeros(shape), torch.zeros(shape), torch.tensor([[1.0] * 3, [-1.0] * 3] * 2), torch.ones(shape),
        behaviour_ratio, default_hyperparameters(),
    )
    return {f"{metric_names.ACTOR_PREFIX}{metric}" for metric in terms.metrics}
