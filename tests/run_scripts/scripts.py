"""Running the run scripts from tests: their paths, their environment, and their queued dry-run records."""

import os
import subprocess
import sys
from pathlib import Path

from verl_ext.preflight import read_queue

REPO = Path(__file__).resolve().parents[2]
RUN_SCRIPTS = REPO / "run_scripts"

# Every figure script, with its project (metrics folder) and its grid: (algorithm label, setting) per run.
FIGURE2_SETTINGS = ("sync_interval_20", "sync_offset_10", "offline")
REC_ONESIDE = ("reinforce", "grpo", "rec_oneside_is", "rec_oneside_nois", "rec_oneside_is-eps0.6_2.0", "rec_oneside_nois-eps0.6_2.0")
FIGURE_GRIDS = {
    "gsm8k/figure2_rec_oneside.sh": ("gsm8k-figure2", [(a, s) for a in REC_ONESIDE for s in FIGURE2_SETTINGS]),
    "gsm8k/figure4_red.sh": (
        "gsm8k-figure4",
        [(a, s) for a in ("red_drop", "red_weight", "rec_oneside_nois-eps0.6_2.0") for s in ("on_policy", "sync_interval_20")],
    ),
    "gsm8k/figure8_rec_variants.sh": (
        "gsm8k-figure8",
        [(a, s) for a in ("reinforce", "grpo", "rec_twoside_is", "rec_twoside_nois", "rec_ring_nois") for s in FIGURE2_SETTINGS],
    ),
    "gsm8k/figure9_learning_rates.sh": (
        "gsm8k-figure9",
        [(f"{a}-lr{lr}", "sync_interval_20") for a in ("grpo", "rec_oneside_nois-eps0.6_2.0") for lr in ("2e-6", "5e-6", "1e-5")],
    ),
    "gsm8k/figure10_opmd_asymre.sh": ("gsm8k-figure10", [(a, s) for a in ("opmd", "asymre") for s in FIGURE2_SETTINGS]),
    # zero-variance masking on by default (-zvm)
    "gsm8k/offpolicy_grpo.sh": ("gsm8k-offpolicy-grpo", [("offpolicy_grpo-zvm", "on_policy"), ("offpolicy_grpo-zvm", "sync_interval_10")]),
    "toolace/figure3_rec.sh": (
        "toolace-figure3",
        [
            (a, s)
            for a in ("reinforce", "grpo", "rec_oneside_is", "rec_oneside_nois", "rec_oneside_nois-eps0.6_2.0", "rec_twoside_nois", "rec_ring_nois")
            for s in ("sync_interval_20", "sync_offset_10")
        ],
    ),
    "guru/figure5_red_weight.sh": ("guru-figure5", [("red_weight", "on_policy"), ("grpo", "on_policy")]),
    "guru/figure12_rec_gspo.sh": (
        "guru-figure12",
        [("rec_gspo_is-eps6e-4_8e-4", "sync_interval_8"), ("rec_gspo_nois-eps6e-4_8e-4", "sync_interval_8")],
    ),
    "math/figure11_red_weight.sh": (
        "math-figure11",
        [(a, "on_policy") for a in ("red_weight", "rec_oneside_nois-eps0.6_2.0", "grpo")],
    ),
}


def script_environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment a test runs a script in: this Python, outputs and data under tmp_path, no user settings."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("VERL_EXT_", "VERL_FILE_LOGGER"))}
    for key in ("MODEL_PATH", "PROJECT_NAME", "EXPERIMENT_NAME", "ALGORITHMS", "SETTINGS", "LEARNING_RATES", "LOGGER",
                "TOTAL_STEPS", "KL_TO_INITIAL", "ZERO_VARIANCE_MASKING", "N_GPUS_PER_NODE", "NNODES", "RAW_DATA_PATH"):
        env.pop(key, None)
    env.update(PYTHON=sys.executable, OUTPUT_DIR=str(tmp_path / "outputs"), DATA_DIR=str(tmp_path / "data"))
    env.update(extra)
    return env


def run_script(script: str, *args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(RUN_SCRIPTS / script), *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout
    )


def queued_runs(script: str, tmp_path: Path, *args: str, **extra_env: str) -> list[tuple[str, list[str]]]:
    """The (name, main_ppo argv) of every run the script would start, from its dry-run queue (no Python start)."""
    queue = tmp_path / f"queue-{script.replace('/', '-')}-{len(list(tmp_path.glob('queue-*')))}.jsonl"
    env = script_environment(tmp_path, VERL_EXT_DRY_RUN="1", VERL_EXT_PREFLIGHT_QUEUE=str(queue), **extra_env)
    result = run_script(script, *args, env=env)
    assert result.returncode == 0, f"{script} {args}: exit {result.returncode}\n{result.stderr}"
    return read_queue(queue)


def override_value(argv: list[str], key: str) -> str:
    """The value the last override of ``key`` sets (with or without a leading +)."""
    values = [item.split("=", 1)[1] for item in argv if item.lstrip("+").split("=", 1)[0] == key]
    assert values, f"no override of {key}"
    return values[-1]
