"""What the lab runs: one :class:`LabRun` per (algorithm, staleness setting, seed), turned into a CPU run of
verl's ``main_ppo`` (:class:`verl_ext.cpu.launch.CPURun`) with the recipe config.

Overrides of a lab run, in order (a key set later wins), on top of the CPU profile
(:mod:`verl_ext.cpu.profile`: tiny Qwen2 model, counting task, batch of 8 prompts):

- the lab's batch: :data:`PROMPTS_PER_STEP` = 16 prompts x :data:`GROUP_SIZE` = 8 responses (128 per step,
  one optimizer step per batch; steadier curves than the profile's 8 x 4 in short trials, see
  ``docs/lab.md``), with micro-batch sizes that make every forward pass one pass over the
  whole batch, and ``trainer.v1.delayed_sync.measure_mismatch=false`` (the lab does not report that metric;
  it would cost one more actor forward per step);
- the algorithm preset (:mod:`verl_ext.experiments.algorithms`, the run scripts' presets);
- the staleness setting (:mod:`verl_ext.staleness.setting`): ``trainer.v1.trainer_mode=delayed_sync`` with
  ``sync_interval``, ``sync_offset``, ``offline`` (``docs/staleness.md``); ``on_policy`` gives the same
  batches as verl's ``sync`` mode;
- the learning rate and the seed, which sets every random choice of the run: ``data.seed`` (the prompt
  order), ``actor_rollout_ref.rollout.seed`` (the per-request sampling seeds, :mod:`verl_ext.seeding`) and
  ``actor_rollout_ref.actor.data_loader_seed`` (the actor's mini-batch shuffle and, through the recipe's
  default, RED-Drop's ``algorithm.red_drop_seed``). On the CPU backend a run is then a function of its
  seed: the same seed gives the same numbers (docs/cpu-backend.md, "What a seed fixes"). The initial model
  is the same for every seed (:mod:`verl_ext.lab.warm_start`);
- the KL to the initial policy, measured, not optimised: verl's KL loss against the reference model (the
  initial weights) with coefficient 0 (``actor/kl_loss``, low-variance estimator k3, token mean over the
  batch's responses). It costs one forward pass of the reference model per step;
- ``extra_overrides``, any Hydra overrides the user adds (they win).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from verl_ext.experiments.algorithms import AlgorithmChoice
from verl_ext.runs.overrides import override_key
from verl_ext.experiments.profiles import KL_TO_INITIAL
from verl_ext.experiments.run_names import run_name
from verl_ext.staleness.setting import ON_POLICY, Setting

BYPASS_MODE_KEY = "algorithm.rollout_correction.bypass_mode"
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


@dataclass(frozen=True)
class LabRun:
    algorithm: AlgorithmChoice
    setting: Setting = ON_POLICY
    seed: int = 0
    steps: int = DEFAULT_STEPS
    learning_rate: float = DEFAULT_LEARNING_RATE
    extra_overrides: tuple[str, ...] = field(default=())
    prompts_per_step: int = PROMPTS_PER_STEP

    def __post_init__(self):
        if self.prompts_per_step < 1:
            raise ValueError(f"prompts_per_step must be >= 1, got {self.prompts_per_step}")
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning rate must be > 0, got {self.learning_rate}")

    @property
    def name(self) -> str:
        """The run name in the one format (:mod:`verl_ext.experiments.run_names`): algorithm, lr, setting,
        steps, prompts per step when not the lab's default (``-P8``), seed. Extra overrides are not in it:
        :mod:`verl_ext.lab.runner` keys reuse on the full override list."""
        prompts = None if self.prompts_per_step == PROMPTS_PER_STEP else self.prompts_per_step
        return run_name(self.algorithm, self.setting, self.learning_rate, steps=self.steps,
                        prompts_per_step=prompts, seed=self.seed)

    def overrides(self) -> tuple[str, ...]:
        return (
            *batch_overrides(self.prompts_per_step),
            *self.algorithm.overrides(),
            *self.setting.overrides(),
            *NO_MISMATCH_MEASUREMENT,
            f"actor_rollout_ref.actor.optim.lr={self.learning_rate}",
            f"data.seed={self.seed}",
            f"actor_rollout_ref.rollout.seed={self.seed}",
            f"actor_rollout_ref.actor.data_loader_seed={self.seed}",
            *KL_TO_INITIAL_OVERRIDES,
            *self.extra_overrides,
        )

    @property
    def pi_old_is_behaviour(self) -> bool:
        """Whether the run's pi_old is the behaviour policy: the last ``bypass_mode`` of its overrides (the recipe's
        default, true, when none sets it)."""
        values = [item.split("=", 1)[1].strip().lower() for item in self.overrides()
                  if override_key(item) == BYPASS_MODE_KEY]
        return not values or values[-1] == "true"

    def cpu_run(self):
        from verl_ext.cpu.launch import CPURun

        return CPURun(name=self.name, overrides=self.overrides(), steps=self.steps)


def plan_runs(
    algorithms: list[AlgorithmChoice],
    settings: list[Setting],
    seeds: list[int],
    steps: int = DEFAULT_STEPS,
    learning_rate: float = DEFAULT_LEARNING_RATE,
    extra_overrides: tuple[str, ...] = (),
) -> list[LabRun]:
    """Every (setting, algorithm, seed), seeds innermost. Two runs with the same name are an error."""
    runs = [
        LabRun(algorithm, setting, seed, steps, learning_rate, tuple(extra_overrides))
        for setting in settings
        for algorithm in algorithms
        for seed in seeds
    ]
    reject_repeated_names(runs, "the lab")
    return runs


def reject_repeated_names(runs: list[LabRun], what: str) -> None:
    """Two runs with one name would share a metrics file: ValueError naming them."""
    counts = Counter(run.name for run in runs)  # linear: a lab of 20,000 seeds is planned in well under a second
    repeated = sorted(name for name, count in counts.items() if count > 1)
    if repeated:
        raise ValueError(f"{what} would run {', '.join(repeated)} twice")
