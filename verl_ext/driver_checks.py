"""The driver's checks: verl-ext's checks of a whole ``main_ppo`` config, run in the driver before Ray, data or
any worker starts.

One function, :func:`check_run_config`, owns the checks that verl's ``validate_config`` does not run for us:
the batch arithmetic (per trainer rank too, :mod:`verl_ext.checks.batch_arithmetic`), a CPU run's topology
(:mod:`verl_ext.cpu_runtime.topology`), the
``trainer.v1.delayed_sync`` block (in every trainer mode; outside ``delayed_sync`` a key set to another value
than its default is refused, it would be ignored), the keys of the rollout engine's own pool under a trainer mode
that keeps the engine with the actor (refused, naming the modes that read them), the loss and estimator settings
that need keys from several nodes (:func:`verl_ext.algorithms.loss_config.check_algorithm_keys`: the clipping
range with a loss that reads none, one response per prompt with a group baseline, pi_old, ...), ``trainer.logger`` (each name a backend of verl's
``Tracking``, which otherwise fails only inside Ray), ``algorithm.red_drop_seed``, the rollout seed of
verl-ext's seeded agent loop, the actor's learning rate and, when the custom reward function is verl-ext's, its
``reward_kwargs`` and the ``VERL_EXT_MATH_*`` variables (else the first batch would fail on them, after
Ray and the engine have started). The policy-loss node's own keys are checked when verl builds the actor config
(:mod:`verl_ext.algorithms.loss_config`, from inside ``validate_config``).

Two callers, the same errors:

- the real path: verl's ``main_ppo`` driver calls ``verl.utils.config.validate_config`` right after
  composing the config and before ``ray.init``. :func:`install_driver_checks` (run by the ``verl.plugins``
  entry point on ``import verl``, before ``main_ppo`` binds the name) wraps that function so that
  :func:`check_run_config` runs first: a bad value fails before verl divides by it, and before Ray starts;
- the dry run (:mod:`verl_ext.preflight`), which calls :func:`validate_run_config`, the same pair.
"""

from __future__ import annotations

import functools
from typing import Any

from omegaconf import OmegaConf

from verl_ext.checks.batch_arithmetic import check_batch_arithmetic
from verl_ext.checks.resume import check_resume
from verl_ext.checks.lora import check_lora
from verl_ext.checks.tools import check_tools
from verl_ext.config_values import ConfigError, reject, require_int, require_number

RED_DROP_SEED = "algorithm.red_drop_seed"
# verl's key, set by the run scripts' LEARNING_RATES and the lab's --lr: torch refuses a negative or NaN one
# only in the actor workers (after Ray starts) and takes inf
LEARNING_RATE = "actor_rollout_ref.actor.optim.lr"
REWARD_FUNCTION = "reward.custom_reward_function"
TRAINER_MODE_KEY = "trainer.v1.trainer_mode"
LOGGER = "trainer.logger"
ROLLOUT_SEED = "actor_rollout_ref.rollout.seed"
DEFAULT_AGENT_LOOP = "actor_rollout_ref.rollout.agent.default_agent_loop"


def check_run_config(config) -> dict:
    """Raise :class:`verl_ext.config_values.ConfigError` on the first bad verl-ext setting, naming the key.

    Returns the resolved config (a plain dict), which the checks build anyway."""
    from verl_ext.algorithms.loss_config import check_algorithm_keys
    from verl_ext.cpu_runtime.topology import check_cpu_topology
    from verl_ext.staleness.config import check_staleness_keys

    check_batch_arithmetic(config)
    check_engine_pool_keys(config)  # before the topology, which counts an engine pool's GPUs
    check_cpu_topology(config)  # the CPU rollout's one process per replica; Ray nodes, GPUs and CPUs of a CPU run
    check_staleness_keys(config)
    check_algorithm_keys(config)
    check_resume(config)  # the checkpoint it resumes from exists and fits its world size (verl_ext.checks.resume)
    check_lora(config)  # LoRA settings verl would ignore (verl_ext.checks.lora)
    check_tools(config)  # a multi-turn tool configuration that cannot run (verl_ext.checks.tools)
    seed = OmegaConf.select(config, RED_DROP_SEED, default=None)
    if seed is not None:
        require_int(RED_DROP_SEED, seed, 0, "RED-Drop seeds its generator with it (null: the default seed 1).")
    require_number(LEARNING_RATE, _value(config, LEARNING_RATE), "a finite number >= 0", low=0)
    check_logger(config)
    check_sampling_seeds(config)
    check_verl_ext_reward_options(config)
    return check_what_workers_look_up(config)


# The trainers that keep the rollout engine with the actor, so that the keys of an engine on its own pool
# (hybrid_engine=false, rollout.nnodes / n_gpus_per_node, rollout.checkpoint_engine.backend) mean nothing there
# (verl 0.9.1, read for facts): its v1 sync and colocate_async modes (verl/trainer/ppo/v1/trainer_base.py) serve the
# rollout from the actor's workers, size nothing by rollout.nnodes / n_gpus_per_node and set the backend to
# 'naive'; its legacy trainer (trainer.use_v1=false, verl/trainer/ppo/ray_trainer.py) asserts hybrid_engine=true
# inside Ray and looks the backend up in its registry there. The modes that read them: verl's separate_async
# (trainer_separate_async.py) and verl-ext's delayed_sync (checked in verl_ext/staleness/config.py).
COLOCATED_MODES = ("sync", "colocate_async")
ENGINE_POOL_READERS = "trainer.v1.trainer_mode=separate_async (verl's) or delayed_sync (verl-ext's), with trainer.use_v1=true"


def check_engine_pool_keys(config) -> None:
    """A key of the rollout engine's own pool, set under a trainer that keeps the engine with the actor (where it
    would be ignored), is refused, naming the modes that read it."""
    from verl_ext import checkpoint_backends
    from verl_ext.staleness.config import ENGINE_GPUS_PER_NODE, ENGINE_NODES, HYBRID_ENGINE

    legacy = _value(config, "trainer.use_v1") is False
    mode = _value(config, TRAINER_MODE_KEY)
    if not legacy and mode not in COLOCATED_MODES:
        return  # a mode that reads them (and checks them), or one verl-ext does not know
    where = "trainer.use_v1=false (verl's legacy trainer)" if legacy else f"{TRAINER_MODE_KEY}={mode}"
    why = f"Only {ENGINE_POOL_READERS} put the rollout engine on a pool of its own; {where} keeps it with the actor"
    hybrid = _value(config, HYBRID_ENGINE)
    if hybrid is not None and hybrid is not True:
        reject(HYBRID_ENGINE, hybrid, f"true with {where}",
               why + (" and asserts hybrid_engine=true, inside Ray." if legacy else " and would ignore this value."))
    for key, value, default in ((ENGINE_NODES, _value(config, ENGINE_NODES), 0),
                                (ENGINE_GPUS_PER_NODE, _value(config, ENGINE_GPUS_PER_NODE), _value(config, "trainer.n_gpus_per_node"))):
        if value is not None and value != default:
            reject(key, value, f"its default {default!r} with {where}", why + " and would ignore this value.")
    backend = _value(config, checkpoint_backends.BACKEND_KEY)
    if not legacy:
        if backend is not None and backend != checkpoint_backends.COLOCATED_BACKEND:
            reject(checkpoint_backends.BACKEND_KEY, backend, f"{checkpoint_backends.COLOCATED_BACKEND!r} with {where}",
                   f"{why}, where verl sets the backend to {checkpoint_backends.COLOCATED_BACKEND!r} whatever this says.")
        return
    # verl's legacy trainer reads the backend: a name its registry lacks fails there, after Ray starts
    checkpoint_backends.import_custom_backend_module(_value(config, checkpoint_backends.CUSTOM_MODULE_KEY))
    status = checkpoint_backends.backend_status(str(backend))
    if status.status == checkpoint_backends.UNKNOWN:
        reject(checkpoint_backends.BACKEND_KEY, backend,
               f"a registered checkpoint engine ({', '.join(status.registered)}) with {where}",
               "verl's legacy trainer looks it up in its registry inside Ray, after the workers start.")


def check_what_workers_look_up(config) -> dict:
    """What verl would otherwise find wrong only inside Ray, after the workers start: an interpolation that does
    not resolve (the TaskRunner resolves the whole config), a trainer mode not in verl's registry (the TaskRunner
    looks it up), a custom reward function that does not load (the reward workers load it)."""
    from verl.trainer.ppo.reward import get_custom_reward_fn

    try:
        resolved = OmegaConf.to_container(config, resolve=True)
    except Exception as error:  # omegaconf's InterpolationResolutionError and friends name the key
        raise ConfigError(f"the config does not resolve: {error}") from error
    mode = _value(config, TRAINER_MODE_KEY)
    if _value(config, "trainer.use_v1") is not False:
        from verl.trainer.ppo.v1.trainer_base import get_trainer_cls

        try:
            get_trainer_cls(mode)
        except Exception as error:  # verl's registry names the modes it has
            raise ConfigError(f"{TRAINER_MODE_KEY}={mode} is invalid: {error}") from error
    try:
        get_custom_reward_fn(config)
    except Exception as error:  # a missing file or module, or no function of that name in it
        function = _value(config, REWARD_FUNCTION) or {}
        raise ConfigError(
            f"{REWARD_FUNCTION}: path={function.get('path')} name={function.get('name')} does not load: "
            f"{type(error).__name__}: {error}"
        ) from error
    return resolved


def check_sampling_seeds(config) -> None:
    """With verl-ext's seeded agent loop (:mod:`verl_ext.seeding`): the rollout seed it derives every request's
    seed from is an integer >= 0, and the trainer is verl's v1 (its agent-loop worker passes the session of
    each response; the legacy trainer does not, and the first request would fail inside Ray)."""
    from verl_ext.seeding import SEEDED_AGENT_LOOP

    if _value(config, DEFAULT_AGENT_LOOP) != SEEDED_AGENT_LOOP:
        return
    why = f"{DEFAULT_AGENT_LOOP}={SEEDED_AGENT_LOOP} derives every request's seed from it."
    require_int(ROLLOUT_SEED, _value(config, ROLLOUT_SEED), 0, why)
    if _value(config, "trainer.use_v1") is False:
        reject(
            DEFAULT_AGENT_LOOP,
            SEEDED_AGENT_LOOP,
            "an agent loop of verl's own (single_turn_agent) with trainer.use_v1=false",
            "The seeded agent loop needs verl's v1 trainer, whose agent-loop worker passes each response's "
            "session_id.",
        )


def _value(config, key: str) -> Any:
    return OmegaConf.select(config, key, default=None)


def check_logger(config) -> None:
    """``trainer.logger``: a backend name or a list of them, each one verl's ``Tracking`` has (its constructor
    asserts it, in the TaskRunner, after Ray and the workers started)."""
    from verl.utils.tracking import Tracking

    allowed = [*Tracking.supported_backend, "tracking"]  # "tracking": verl's deprecated name of wandb
    value = _value(config, LOGGER)
    if OmegaConf.is_list(value):
        value = OmegaConf.to_container(value, resolve=True)
    names = [value] if isinstance(value, str) else value if isinstance(value, list) else None
    if names is None or not all(isinstance(name, str) and name in allowed for name in names):
        reject(LOGGER, value, f"a list of verl's logger backends ({', '.join(allowed)})",
               "verl's Tracking refuses any other name, but only once Ray and the workers are up.")


def uses_verl_ext_rewards(path: Any) -> bool:
    """Whether ``reward.custom_reward_function.path`` names verl-ext's reward module (``pkg://verl_ext.rewards``
    or a file path inside ``verl_ext/rewards``)."""
    text = str(path or "").replace("\\", "/")
    return text.startswith("pkg://verl_ext.rewards") or "verl_ext/rewards" in text


def check_verl_ext_reward_options(config) -> None:
    """verl-ext's reward options (``reward_kwargs``) and ``VERL_EXT_MATH_*`` variables, checked in the driver."""
    function = _value(config, REWARD_FUNCTION) or {}
    if not uses_verl_ext_rewards(function.get("path")):
        return
    from verl_ext.rewards import check_reward_options

    options = function.get("reward_kwargs") or {}
    try:
        check_reward_options(OmegaConf.to_container(options, resolve=True) if OmegaConf.is_config(options) else dict(options))
    except ValueError as error:  # names the option or variable and its allowed values
        raise ConfigError(f"{REWARD_FUNCTION}.reward_kwargs / environment: {error}") from error


def validate_run_config(config) -> dict:
    """What the driver checks before Ray: :func:`check_run_config`, then verl's own ``validate_config`` (which
    builds the actor config and so runs verl-ext's policy-loss checks). Returns the resolved config."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils import config as verl_config

    validate = verl_config.validate_config
    if getattr(validate, VERL_EXT_HOOK, False):  # verl's own function, behind the wrapper
        validate = validate.__wrapped__
    resolved = check_run_config(config)
    validate(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    return resolved


VERL_EXT_HOOK = "_verl_ext_run_checks"


def install_driver_checks() -> None:
    """Make ``verl.utils.config.validate_config`` run :func:`check_run_config` first (idempotent).

    ``main_ppo`` imports the function by name when it is first imported, which is after ``import verl`` has
    loaded the plugins; so the driver of ``python -m verl.trainer.main_ppo`` calls the wrapper.
    """
    from verl.utils import config as verl_config

    original = verl_config.validate_config
    if getattr(original, VERL_EXT_HOOK, False):
        return

    @functools.wraps(original)
    def validate_config(config, *args, **kwargs):
        check_run_config(config)
        return original(config, *args, **kwargs)

    setattr(validate_config, VERL_EXT_HOOK, True)
    verl_config.validate_config = validate_config
