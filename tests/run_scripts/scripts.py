"""The run scripts from tests: their paths, a clean environment, and their runs planned in this process."""

import os
import sys
from pathlib import Path

from verl_ext import overrides

REPO = Path(__file__).resolve().parents[2]
RUN_SCRIPTS = REPO / "run_scripts"

# Every figure script, with its project (metrics folder) and its grid: (run label, setting) per run. Written out
# by hand (not read from verl_ext/experiments/catalogue.py) so that a changed grid or run name fails here.
FIGURE2_SETTINGS = ("sync_interval_20", "sync_offset_10", "offline")
REC_ONESIDE = ("rec_reinforce", "grpo", "rec_oneside_is", "rec_oneside_nois", "rec_oneside_is@0.6_2", "rec_oneside_nois@0.6_2")
FIGURE_GRIDS = {
    "gsm8k/figure2_rec_oneside.sh": ("gsm8k-figure2", [(a, s) for a in REC_ONESIDE for s in FIGURE2_SETTINGS]),
    "gsm8k/figure4_red.sh": (
        "gsm8k-figure4",
        [(a, s) for a in ("red_drop", "red_weight", "rec_oneside_nois@0.6_2") for s in ("on_policy", "sync_interval_20")],
    ),
    "gsm8k/figure8_rec_variants.sh": (
        "gsm8k-figure8",
        [(a, s) for a in ("rec_reinforce", "grpo", "rec_twoside_is", "rec_twoside_nois", "rec_ring_nois") for s in FIGURE2_SETTINGS],
    ),
    "gsm8k/figure9_learning_rates.sh": (
        "gsm8k-figure9",
        [(f"{a}-lr{lr}", "sync_interval_20") for a in ("grpo", "rec_oneside_nois@0.6_2") for lr in ("2e-06", "5e-06", "1e-05")],
    ),
    "gsm8k/figure10_opmd_asymre.sh": ("gsm8k-figure10", [(a, s) for a in ("opmd", "asymre") for s in FIGURE2_SETTINGS]),
    "gsm8k/high_staleness.sh": (
        "gsm8k-high-staleness",
        [(a, s) for a in ("rec_oneside_nois", "topr", "m2po", "grpo") for s in ("sync_interval_64", "offline")],
    ),
    # zero-variance masking on by default (-zvm)
    "gsm8k/offpolicy_grpo.sh": ("gsm8k-offpolicy-grpo", [("offpolicy_grpo-zvm", "on_policy"), ("offpolicy_grpo-zvm", "sync_interval_10")]),
    "toolace/figure3_rec.sh": (
        "toolace-figure3",
        [
            (a, s)
            for a in ("rec_reinforce", "grpo", "rec_oneside_is", "rec_oneside_nois", "rec_oneside_nois@0.6_2", "rec_twoside_nois", "rec_ring_nois")
            for s in ("sync_interval_20", "sync_offset_10")
        ],
    ),
    "guru/figure5_red_weight.sh": ("guru-figure5", [("red_weight", "on_policy"), ("grpo", "on_policy")]),
    "guru/figure12_rec_gspo.sh": (
        "guru-figure12",
        [("rec_gspo_is@0.0006_0.0008", "sync_interval_8"), ("rec_gspo_nois@0.0006_0.0008", "sync_interval_8")],
    ),
    "math/figure11_red_weight.sh": (
        "math-figure11",
        [(a, "on_policy") for a in ("red_weight", "rec_oneside_nois@0.6_2", "grpo")],
    ),
}

USER_VARIABLES = ("MODEL_PATH", "PROJECT_NAME", "EXPERIMENT_NAME", "ALGORITHMS", "SETTINGS", "LEARNING_RATES", "LOGGER",
                  "TOTAL_STEPS", "KL_TO_INITIAL", "ZERO_VARIANCE_MASKING", "N_GPUS_PER_NODE", "NNODES", "RAW_DATA_PATH",
                  "CONTINUE_ON_ERROR")


def script_environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment a test runs a script in: this Python, outputs and data under tmp_path, no user settings."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("VERL_EXT_", "VERL_FILE_LOGGER"))}
    for key in USER_VARIABLES:
        env.pop(key, None)
    env.update(PYTHON=sys.executable, OUTPUT_DIR=str(tmp_path / "outputs"), DATA_DIR=str(tmp_path / "data"))
    env.update(extra)
    return env


def run_script(script: str, *args: str, env: dict[str, str], timeout: float = 120):
    import subprocess

    return subprocess.run(
        ["bash", str(RUN_SCRIPTS / script), *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout
    )


class PlannedRun:
    """A run the run scripts' launcher would start (a :class:`verl_ext.runs.run.Run`, whose fields it shows), with
    what the tests read of it: its title, the run composed on the mode's backend (what the dry run checks and the
    launcher starts) and the arguments that gives ``main_ppo``, where it writes, and its profile."""

    def __init__(self, run, environment):
        from verl_ext.experiments.profiles import profile_named
        from verl_ext.runs.compose import compose

        self.run = run
        self.title = environment.title(run)
        self.composed = compose(run, environment.backend(), environment.run_outputs())
        self.main_ppo_args = self.composed.arguments
        self.metrics_file, self.checkpoints = self.composed.paths.metrics, self.composed.paths.checkpoints
        self.profile = profile_named(run.profile)

    def __getattr__(self, name):
        return getattr(self.run, name)


def planned_runs(tmp_path: Path, *argv: str, **extra_env: str) -> list[PlannedRun]:
    """The runs ``python -m verl_ext.experiments ARGV`` would run in that environment (nothing composed or started)."""
    from verl_ext.experiments.__main__ import plan

    runs, environment, _ = plan(list(argv), script_environment(tmp_path, **extra_env))
    return [PlannedRun(run, environment) for run in runs]


def figure_project(script: str) -> str:
    return FIGURE_GRIDS[script][0]


def override_value(argv, key: str) -> str:
    """The value the last override of ``key`` sets (with or without a leading +); the test fails without one."""
    value = overrides.override_value(argv, key)
    assert value is not None, f"no override of {key}"
    return value
