"""The GPU profile, checked on CPU: every override composes with verl's and the recipe's config and passes
verl's validate_config and verl-ext's checks (the dry run's path, verl_ext/preflight.py); the shell form
equals the Python form; VERL_EXT_GPU_SMOKE=1 composes every run of every figure script, swapping only the
model, the data and the listed one-GPU/kit settings. Nothing here runs on a GPU."""

import subprocess
import sys

import pytest

from tests.run_scripts.scripts import FIGURE_GRIDS, REPO, planned_runs, run_script, script_environment
from verl_ext import preflight
from verl_ext.overrides import override_key
from verl_ext.gpu.device import gpu_unavailable_reason
from verl_ext.gpu.backend import GPU_PROJECT, GPUBackend
from verl_ext.runs.compose import compose
from verl_ext.runs.launch import Outputs
from verl_ext.gpu.profile import (
    RUN_OVERRIDE_REASONS,
    SMOKE_OVERRIDE_REASONS,
    gpu_overrides,
    gpu_smoke_overrides,
    override_reason,
    shell_profile,
)


def test_gpu_runs_compose_and_pass_verls_checks(tiny_gpu_assets, tmp_path):
    """The smoke command's run (delayed_sync 3,1) and the GPU tests' runs that differ most from it (offline with
    masking, verl's decoupled mode) with the whole GPU profile, through the dry run's checks:
    a config error must not cost GPU time."""
    from tests.gpu.gpu_runs import run_specs
    from verl_ext.gpu.smoke import smoke_run

    specs = run_specs(tmp_path / "checkpoints")
    runs = [("gpu-smoke", smoke_run(10, 3, 1, "rec_oneside_nois"))] + [
        (name, specs[name]) for name in ("offline_red_drop", "offpolicy_grpo")]
    backend, outputs = GPUBackend(tiny_gpu_assets), Outputs(tmp_path, project=GPU_PROJECT)
    results = preflight.preflight_many([(name, compose(run, backend, outputs)) for name, run in runs])
    assert all(result.ok for result in results), {result.name: result.error for result in results if not result.ok}
    result = results[0]
    argv = compose(runs[0][1], backend, outputs).arguments
    s = result.settings
    assert (s["actor_rollout_ref.rollout.name"], s["trainer.n_gpus_per_node"], s["trainer.nnodes"]) == ("vllm", 1, 1)
    assert s["actor_rollout_ref.model.path"] == str(tiny_gpu_assets / "model")
    assert s["actor_rollout_ref.rollout.gpu_memory_utilization"] < 0.5  # leaves the colocated actor room
    assert s["trainer.v1.trainer_mode"] == "delayed_sync" and s["trainer.v1.delayed_sync.sync_interval"] == 3
    # accepted by the composition above, and last in the arguments: they win
    for override in ("actor_rollout_ref.rollout.dtype=bfloat16", "actor_rollout_ref.rollout.enforce_eager=True",
                     "+ray_kwargs.ray_init.include_dashboard=False",
                     "+actor_rollout_ref.model.override_config.attn_implementation=sdpa"):
        assert override in argv and not [item for item in argv[argv.index(override) + 1:]
                                          if override_key(item.split("=", 1)[0]) == override_key(override.split("=", 1)[0])]


def test_every_override_has_a_reason_and_the_smoke_set_is_inside_the_run_set(tiny_gpu_assets):
    run, smoke = gpu_overrides(tiny_gpu_assets), gpu_smoke_overrides(tiny_gpu_assets)
    keys = [override_key(override) for override in run]
    assert len(keys) == len(set(keys))  # one value per key: the run set does not repeat a smoke key
    assert {override.split("=", 1)[0] for override in run} == set(SMOKE_OVERRIDE_REASONS) | set(RUN_OVERRIDE_REASONS)
    assert set(smoke) <= set(run)
    assert all(override_reason(override) for override in run)
    with pytest.raises(KeyError, match="not an override"):
        override_reason("trainer.total_epochs=3")


def test_shell_profile_defines_the_same_overrides(tiny_gpu_assets):
    script = (shell_profile(tiny_gpu_assets) + 'printf "%s\\n" "${VERL_EXT_GPU_OVERRIDES[@]}"; echo ---; '
              'printf "%s\\n" "${VERL_EXT_GPU_SMOKE_OVERRIDES[@]}"; echo "OFFLINE=$HF_HUB_OFFLINE"')
    output = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout.splitlines()
    separator = output.index("---")
    assert output[:separator] == gpu_overrides(tiny_gpu_assets)
    assert output[separator + 1 : -1] == gpu_smoke_overrides(tiny_gpu_assets)
    assert output[-1] == "OFFLINE=1"
    sourced = subprocess.run(
        ["bash", "-c", f"export PYTHON={sys.executable} VERL_EXT_TINY_GPU_ASSETS={tiny_gpu_assets}; "
                       f"source {REPO}/run_scripts/gpu/profile.sh && echo ${{#VERL_EXT_GPU_SMOKE_OVERRIDES[@]}}"],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    assert int(sourced[-1]) == len(gpu_smoke_overrides(tiny_gpu_assets))


# Runs composed in full through the dry run: the profiles whose resources differ most (the grids' other cells
# differ in algorithm and setting, which tests/run_scripts/test_dry_run.py composes for every run; all 74 GPU
# smoke runs composed when this was written, docs/gpu.md; every run's overrides are checked below).
COMPOSED = {
    "gsm8k/offpolicy_grpo.sh": "offpolicy_grpo-zvm-sync_interval_10",  # gsm8k profile: validation, decoupled mode, masking
    "guru/figure12_rec_gspo.sh": "rec_gspo_nois@0.0006_0.0008-sync_interval_8",  # 30B profile: TP 4, offloading
    "math/figure11_red_weight.sh": "grpo-on_policy",  # MATH-500 validation file
}
SMOKE_CAPS = {"trainer.total_training_steps": "2", "trainer.save_freq": "-1", "trainer.resume_mode": "disable"}
# bookkeeping paths that move to outputs/gpu-smoke/
MOVED = {"trainer.default_local_dir", "ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH", "--config-path"}


@pytest.fixture(scope="module")
def queued(tmp_path_factory):
    """{script: ({title: planned run} of its plain run, {title: planned run} under VERL_EXT_GPU_SMOKE=1)}, planned by the
    launcher the scripts exec (no Python composition yet); the plain run only for the scripts of COMPOSED."""
    tmp_path = tmp_path_factory.mktemp("gpu_smoke_plans")

    def runs(script, **env):
        return {cell.title: cell for cell in planned_runs(tmp_path, "figure", FIGURE_GRIDS[script][0], **env)}

    return {
        script: (runs(script) if script in COMPOSED else None, runs(script, VERL_EXT_GPU_SMOKE="1"))
        for script in FIGURE_GRIDS
    }


def _values(argv):
    return {override_key(item): item.split("=", 1)[1] for item in argv if "=" in item}


def test_gpu_smoke_of_every_run_swaps_only_model_data_and_the_listed_settings(queued):
    """Every run of every figure script gets the GPU smoke's overrides (the profile's values), the smoke caps
    (2 steps, no checkpoint, no resume) and paths under gpu-smoke/; against the plain dry run (scripts of
    COMPOSED), every other key keeps the script's value."""
    smoke = _values(gpu_smoke_overrides(REPO / "assets" / "tiny-gpu"))
    total = 0
    for script, (plain, gpu_smoke) in queued.items():
        project, grid = FIGURE_GRIDS[script]
        assert sorted(gpu_smoke) == sorted(f"{project}/{label}-{setting} (gpu smoke)" for label, setting in grid), script
        for name, cell in gpu_smoke.items():
            after = _values(cell.main_ppo_args)
            assert {key: after[key] for key in smoke} == smoke, name
            assert {key: after[key] for key in SMOKE_CAPS} == SMOKE_CAPS, name
            assert "/gpu-smoke/" in after["trainer.default_local_dir"], name
            total += 1
            if plain is not None:
                before = _values(plain[name.removesuffix(" (gpu smoke)")].main_ppo_args)
                changed = {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}
                assert changed <= set(smoke) | set(SMOKE_CAPS) | MOVED, (name, sorted(changed - set(smoke) - set(SMOKE_CAPS) - MOVED))
    assert total == sum(len(grid) for _, grid in FIGURE_GRIDS.values())


def test_gpu_smoke_composes_and_keeps_the_scripts_gpu_settings(queued):
    """One run per profile through the dry run's checks (Hydra, validate_config, verl-ext's checks)."""
    runs = [(f"{name} (gpu smoke)", queued[script][1][f"{project}/{name} (gpu smoke)"].composed)
            for script, name in COMPOSED.items() for project in [FIGURE_GRIDS[script][0]]]
    results = preflight.preflight_many(runs)
    failed = {result.name: result.error for result in results if not result.ok}
    assert not failed, failed
    for (script, name), result in zip(COMPOSED.items(), results):
        plain = _values(queued[script][0][f"{FIGURE_GRIDS[script][0]}/{name}"].main_ppo_args)
        s = result.settings
        assert s["actor_rollout_ref.model.path"] == str(REPO / "assets" / "tiny-gpu" / "model")
        assert (s["trainer.n_gpus_per_node"], s["actor_rollout_ref.rollout.tensor_model_parallel_size"]) == (1, 1)
        assert s["trainer.total_training_steps"] == 2
        # the script's own GPU settings reach verl's config unchanged
        assert s["actor_rollout_ref.actor.use_dynamic_bsz"] is True
        assert s["actor_rollout_ref.rollout.gpu_memory_utilization"] == float(plain["actor_rollout_ref.rollout.gpu_memory_utilization"])
        assert s["actor_rollout_ref.actor.fsdp_config.param_offload"] == (plain["actor_rollout_ref.actor.fsdp_config.param_offload"] == "true")
        assert s["data.train_batch_size"] == int(plain["data.train_batch_size"])
        assert s["data.max_response_length"] == int(plain["data.max_response_length"])
        assert s["trainer.logger"] == ["console", "file"]
        assert s["trainer.test_freq"] == int(plain["trainer.test_freq"])


def test_cpu_and_gpu_smoke_together_are_refused(tmp_path):
    result = run_script("run.sh", "gsm8k", "grpo", env=script_environment(tmp_path, VERL_EXT_CPU_SMOKE="1", VERL_EXT_GPU_SMOKE="1"))
    assert result.returncode == 2 and "exclude each other" in result.stderr


@pytest.mark.skipif(gpu_unavailable_reason() is None, reason="this machine has a CUDA GPU and vLLM")
def test_gpu_smoke_without_a_gpu_stops_before_anything_starts(tmp_path):
    """On this CPU machine the script's GPU smoke stops at its GPU check, naming what it found."""
    result = run_script("run.sh", "gsm8k", "grpo", env=script_environment(tmp_path, VERL_EXT_GPU_SMOKE="1"), timeout=120)
    assert result.returncode == 1, result.stderr
    assert "needs 1 GPU(s) per node" in result.stderr and "Nothing was started" in result.stderr
    assert not (tmp_path / "outputs" / "gpu-smoke" / "checkpoints").exists()
