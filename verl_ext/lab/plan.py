"""What the lab runs: the base and defaults of its runs, planned by the one planner
(:meth:`verl_ext.runs.grid.Grid.runs`): one :class:`~verl_ext.runs.run.Run` per (algorithm, staleness setting, learning
rate, seed) of a :class:`~verl_ext.runs.grid.Grid` (:func:`lab_runs`, :func:`lab_run`), a run of verl's ``main_ppo``
with the recipe config on the CPU backend (:class:`verl_ext.cpu.backend.CPUBackend`).

Overrides of a lab run (a key set later wins), on top of the CPU profile (:mod:`verl_ext.cpu.profile`: tiny Qwen2
model, counting task, batch of 8 prompts), in the layers of :meth:`verl_ext.runs.run.Run.from_preset`:

- the lab's batch: :data:`PROMPTS_PER_STEP` = 16 prompts x :data:`GROUP_SIZE` = 8 responses (128 per step,
  one optimizer step per batch; steadier curves than the profile's 8 x 4 in short trials, see
  ``docs/lab.md``), with micro-batch sizes that make every forward pass one pass over the
  whole batch, and ``trainer.v1.delayed_sync.measure_mismatch=false`` (the lab does not report that metric;
  it would cost one more actor forward per step);
- the KL to the initial policy, measured, not optimised (below);
- the algorithm preset (:mod:`verl_ext.algorithms.presets`, the run scripts' presets);
- the staleness setting (:mod:`verl_ext.staleness.setting`): ``trainer.v1.trainer_mode=delayed_sync`` with
  ``sync_interval``, ``sync_offset``, ``offline`` (``docs/staleness.md``); ``on_policy`` gives the same
  batches as verl's ``sync`` mode;
- the learning rate and the seed, which sets every random choice of the run: ``data.seed`` (the prompt
  order), ``actor_rollout_ref.rollout.seed`` (the per-request sampling seeds, :mod:`verl_ext.seeding`) and
  ``actor_rollout_ref.actor.data_loader_seed`` (the actor's mini-batch shuffle and, through the recipe's
  default, RED-Drop's ``algorithm.red_drop_seed``). On the CPU backend a run is then a function of its
  seed: the same seed gives the same numbers (docs/cpu-backend.md, "What a seed fixes"). The initial model
  is the same for every seed (:mod:`verl_ext.lab.warm_start`);
- ``extra_overrides``, any Hydra overrides the user adds (they win).

The KL to the initial policy is verl's KL loss against the reference model (the initial weights) with
coefficient 0 (``actor/kl_loss``, low-variance estimator k3, token mean over the batch's responses). It costs one
forward pass of the reference model per step.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable, Sequence

from verl_ext.algorithms.presets import AlgorithmChoice
from verl_ext.experiments.profiles import KL_TO_INITIAL
from verl_ext.runs.grid import Grid, points
from verl_ext.runs.run import Run
from verl_ext.staleness.setting import ON_POLICY, Setting

DEFAULT_LEARNING_RATE = 1e-3
DEFAULT_STEPS = 50
PROMPTS_PER_STEP = 16
GROUP_SIZE = 8


def batch_overrides(prompts: int = PROMPTS_PER_STEP, group_size: int = GROUP_SIZE) -> tuple[str, ...]:
    responses = prompts * group_size
    return (
        f"data.train_batch_size={prompts}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={prompts}",
        f"actor_rollout_ref.rollout.n={group_size}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={responses}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={responses}",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={responses}",
    )


KL_TO_INITIAL_OVERRIDES = tuple(KL_TO_INITIAL)  # the GPU profiles' measurement, the same keys


# The lab does not report the rollout/actor mismatch metric; measuring it costs one more actor forward per step.
NO_MISMATCH_MEASUREMENT = ("trainer.v1.delayed_sync.measure_mismatch=false",)


def lab_base(prompts_per_step: int = PROMPTS_PER_STEP) -> tuple[str, ...]:
    """What every lab run is built on (module docstring): the lab's batch, no mismatch measurement, the KL to the
    initial policy measured."""
    return (*batch_overrides(prompts_per_step), *NO_MISMATCH_MEASUREMENT, *KL_TO_INITIAL_OVERRIDES)


def lab_runs(grid: Grid, what: str = "") -> list[Run]:
    """Every run of ``grid`` (its points x learning rates x seeds; :meth:`verl_ext.runs.grid.Grid.runs`) on the lab's
    base, the lab's defaults where the grid sets none: :data:`DEFAULT_STEPS` steps, :data:`PROMPTS_PER_STEP` prompts
    per step (named ``-P<n>`` only when another), the learning rate :data:`DEFAULT_LEARNING_RATE`, seed 0; every run
    named in the one format with its learning rate, steps and seed. ValueError on a bad count or two runs of one name."""
    prompts = PROMPTS_PER_STEP if grid.prompts_per_step is None else grid.prompts_per_step
    if prompts < 1:
        raise ValueError(f"prompts_per_step must be >= 1, got {prompts}")
    steps = DEFAULT_STEPS if grid.steps is None else grid.steps
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    rates = grid.learning_rates or (DEFAULT_LEARNING_RATE,)
    bad_rates = [rate for rate in rates if not rate > 0]
    if bad_rates:
        raise ValueError(f"learning rate must be > 0, got {bad_rates[0]}")
    planned = replace(grid, steps=steps, learning_rates=rates, seeds=grid.seeds or (0,),
                      prompts_per_step=None if prompts == PROMPTS_PER_STEP else prompts)
    return planned.runs(base=lab_base(prompts), what=what or f"grid {grid.name}")


def lab_run(
    algorithm: AlgorithmChoice,
    setting: Setting = ON_POLICY,
    seed: int = 0,
    steps: int = DEFAULT_STEPS,
    learning_rate: float = DEFAULT_LEARNING_RATE,
    extra_overrides: Iterable[str] = (),
    prompts_per_step: int = PROMPTS_PER_STEP,
) -> Run:
    """One lab run: the one-point grid of ``algorithm`` in ``setting`` (:func:`lab_runs`). Extra overrides are not
    in the name: :mod:`verl_ext.lab.runner` keys reuse on the full override list."""
    grid = Grid("lab", points([algorithm], [setting]), (learning_rate,), (seed,), steps=steps,
                prompts_per_step=prompts_per_step, overrides=tuple(extra_overrides))
    return lab_runs(grid)[0]


def plan_runs(
    algorithms: Sequence[AlgorithmChoice],
    settings: Sequence[Setting],
    seeds: Sequence[int],
    steps: int = DEFAULT_STEPS,
    learning_rate: float = DEFAULT_LEARNING_RATE,
    extra_overrides: Iterable[str] = (),
) -> list[Run]:
    """Every (setting, algorithm, seed), seeds innermost. Two runs with the same name are an error."""
    grid = Grid("custom", points(algorithms, settings), (learning_rate,), tuple(seeds), steps=steps,
                overrides=tuple(extra_overrides))
    return lab_runs(grid, "the lab")
