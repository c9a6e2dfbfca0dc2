"""The real ``main_ppo`` runs of the GPU tests: few runs, each carrying many checks, started only when a
selected test needs them (``pytest -m gpu -k schedule`` starts only the schedule's runs).

Each run is a child process (the one launcher, :func:`verl_ext.runs.launch.launch`, on the GPU backend): vLLM's engine start dominates
a run's start-up on the GPU (minutes), Ray's own start is seconds, and a process boundary returns the
engine's GPU memory for sure. Runs, in the order a full ``pytest -m gpu`` needs them:

=================  =========================================================================================
delayed_3_1        delayed_sync (3, 1), 7 steps, clipped REC (rec_oneside_nois): schedule, pushes, lag-0
                   log-probs, checkpoints every 2 steps (step 4 is mid-interval), validation every 3 steps
resumed_3_1        resumes delayed_3_1 from global_step_4: same lags, versions, syncs
offline_red_drop   offline + zero-variance masking (odd prompts score a constant), RED-Drop, 3 steps
on_policy_opmd     delayed_sync (1, 0) + OPMD, 3 steps: lag 0 at every step
sync_rec_gspo      verl's own ``sync`` mode + REC-GSPO-NoIS with seq-mean-token-mean, 2 steps
red_weight         delayed_sync (1, 0) + RED-Weight, 2 steps
offpolicy_grpo     delayed_sync (3, 1) + off-policy GRPO in verl's decoupled mode (pi_old recomputed,
                   rollout log-probs as IS weights), 3 steps: verl logs rollout-vs-actor probabilities
=================  =========================================================================================

A GPU session's commands are limited in time (the project's device tool: 10 minutes a command), so the runs
can be spread over several pytest commands on the same node: with ``VERL_EXT_GPU_TEST_DIR=DIR`` every
finished run is kept in DIR (``<name>/result.json`` records its overrides) and a later command reuses it
instead of running it again, as long as its overrides are unchanged.

Rehearsal without a GPU: ``VERL_EXT_GPU_TESTS_BACKEND=cpu pytest tests/gpu -m gpu`` runs the same runs on
the CPU backend (float32, transformers rollout, the CPU tiny model) and does not skip the ``gpu`` tests:
it checks the tests' own logic before GPU time is spent, and says nothing about vLLM or CUDA.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.staleness import odd_count_reward
from verl_ext.runs.launch import RunResult
from verl_ext.runs.run import Run

RUN_TIMEOUT_SECONDS = 15 * 60
BACKEND_VARIABLE = "VERL_EXT_GPU_TESTS_BACKEND"  # "cpu": rehearse on the CPU backend (see the module docstring)
DELAYED = "trainer.v1.trainer_mode=delayed_sync"
SCHEDULE_3_1 = (DELAYED, "trainer.v1.delayed_sync.sync_interval=3", "trainer.v1.delayed_sync.sync_offset=1")
ON_POLICY = (DELAYED, "trainer.v1.delayed_sync.sync_interval=1", "trainer.v1.delayed_sync.sync_offset=0")
SCHEDULE_STEPS, RESUME_AT, SAVE_FREQ, TEST_FREQ = 7, 4, 2, 3


# run -> the loss it trains with (one run per loss family), whose own metrics it must log
FAMILIES = {
    "delayed_3_1": "rec_oneside_nois",
    "offline_red_drop": "rec_reinforce",
    "on_policy_opmd": "opmd",
    "sync_rec_gspo": "rec_gspo_nois",
    "red_weight": "red_weight",
    "offpolicy_grpo": "offpolicy_grpo",
}


def algorithm(estimator: str, loss: str) -> tuple[str, ...]:
    return (f"algorithm.adv_estimator={estimator}", f"actor_rollout_ref.actor.policy_loss.loss_mode={loss}")


def run_specs(checkpoints: Path) -> dict[str, Run]:
    """Every run by name; ``checkpoints`` is where delayed_3_1 saves (resumed_3_1 reads it)."""
    return {
        "delayed_3_1": Run(
            "delayed_3_1", steps=SCHEDULE_STEPS, checkpoint_dir=checkpoints,
            overrides=(*algorithm("rec", "rec_oneside_nois"), *SCHEDULE_3_1,
                       f"trainer.save_freq={SAVE_FREQ}", f"trainer.test_freq={TEST_FREQ}"),
        ),
        "resumed_3_1": Run(
            "resumed_3_1", steps=SCHEDULE_STEPS, checkpoint_dir=checkpoints,
            overrides=(*algorithm("rec", "rec_oneside_nois"), *SCHEDULE_3_1, "trainer.resume_mode=resume_path",
                       f"trainer.resume_from_path={checkpoints / f'global_step_{RESUME_AT}'}"),
        ),
        "offline_red_drop": Run(
            "offline_red_drop", steps=3,
            overrides=(*algorithm("red_drop", "rec_reinforce"), DELAYED, "trainer.v1.delayed_sync.offline=true",
                       "trainer.v1.delayed_sync.zero_variance_masking=true",
                       f"reward.custom_reward_function.path={Path(odd_count_reward.__file__).resolve()}",
                       "reward.custom_reward_function.name=compute_score"),
        ),
        "on_policy_opmd": Run("on_policy_opmd", steps=3, overrides=(*algorithm("rec", "opmd"), *ON_POLICY)),
        "sync_rec_gspo": Run(
            "sync_rec_gspo", steps=2,
            overrides=(*algorithm("rec", "rec_gspo_nois"), "trainer.v1.trainer_mode=sync",
                       "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean",
                       "actor_rollout_ref.actor.clip_ratio_low=6e-4", "actor_rollout_ref.actor.clip_ratio_high=8e-4"),
        ),
        "red_weight": Run("red_weight", steps=2, overrides=(*algorithm("rec", "red_weight"), *ON_POLICY)),
        "offpolicy_grpo": Run(
            "offpolicy_grpo", steps=3,
            overrides=(*algorithm("grpo", "offpolicy_grpo"), *SCHEDULE_3_1, "algorithm.norm_adv_by_std_in_grpo=true",
                       "algorithm.rollout_correction.bypass_mode=false", "algorithm.rollout_correction.rollout_is=token",
                       "algorithm.rollout_correction.rollout_is_threshold=1e6"),
        ),
    }


class GPURuns:
    """Runs each spec once, on first use, and keeps the result (a failed run raises with its log's path);
    a finished run recorded in ``base_dir`` by an earlier command, with the same overrides, is reused."""

    def __init__(self, base_dir: Path, assets_dir: Path, backend: str = "gpu"):
        if backend not in ("gpu", "cpu"):
            raise ValueError(f"{BACKEND_VARIABLE}={backend!r}: allowed gpu (default) or cpu")
        from verl_ext.cpu.backend import CPUBackend
        from verl_ext.gpu.backend import GPU_PROJECT, GPUBackend
        from verl_ext.runs.launch import Outputs

        self.base_dir, self.assets_dir, self.backend = Path(base_dir), Path(assets_dir), backend
        self.specs = run_specs(self.base_dir / "delayed_3_1_checkpoints")
        if backend == "gpu":
            self.where, self.outputs = GPUBackend(self.assets_dir), Outputs(self.base_dir, project=GPU_PROJECT)
        else:
            self.where, self.outputs = CPUBackend(self.assets_dir), Outputs(self.base_dir)
        self._results: dict[str, RunResult] = {}

    def _record_path(self, name: str) -> Path:
        return self.outputs.paths(self.specs[name]).run_dir / "result.json"

    def _overrides(self, name: str) -> list[str]:
        from verl_ext.runs.compose import compose

        return list(compose(self.specs[name], self.where, self.outputs).overrides)

    def _recorded(self, name: str) -> RunResult | None:
        path = self._record_path(name)
        if not path.is_file():
            return None
        record = json.loads(path.read_text())
        if record["overrides"] != self._overrides(name):
            return None
        paths = self.outputs.paths(self.specs[name])
        print(f"\n[gpu run] {name}: reusing the run recorded in {path}")
        return RunResult(run=self.specs[name], paths=paths, wall_seconds=record["wall_seconds"], log_path=paths.log)

    def __getitem__(self, name: str) -> RunResult:
        if name not in self._results:
            from verl_ext.runs.launch import launch

            if name == "resumed_3_1":
                self["delayed_3_1"]  # noqa: B018 -- the checkpoint it resumes from
            if self.backend == "cpu":
                result = launch(self.specs[name], self.where, self.outputs, timeout=RUN_TIMEOUT_SECONDS)
                print(f"\n[cpu rehearsal] {name}: {result.wall_seconds:.0f} s wall, log {result.log_path}")
                self._results[name] = result.raise_for_error()
                return self._results[name]
            result = self._recorded(name)
            if result is None:  # an earlier run's record moves aside with its files (verl_ext.runs.outputs)
                result = launch(self.specs[name], self.where, self.outputs, timeout=RUN_TIMEOUT_SECONDS,
                                keep_with_run=(self._record_path(name),))
                print(f"\n[gpu run] {name}: {result.wall_seconds:.0f} s wall, exit {result.measurements.returncode}, "
                      f"log {result.log_path}")
                result.raise_for_error()
                self._record_path(name).write_text(json.dumps(
                    {"overrides": self._overrides(name), "wall_seconds": result.wall_seconds,
                     "startup_seconds": result.measurements.startup_seconds(
                         next((r["timing_s/step"] for r in result.steps if "timing_s/step" in r), None)),
                     "peak_gpu_mib": result.peak_gpu_mib}, indent=1) + "\n")
            self._results[name] = result
        return self._results[name]
