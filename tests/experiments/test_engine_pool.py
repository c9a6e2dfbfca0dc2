"""The run scripts' split (``ENGINE_GPUS_PER_NODE``, ``ENGINE_NNODES``): the rollout engine on its own pool.

The dry run composes and checks a figure's run for a GPU cluster (4 trainer + 4 engine GPUs, verl's nccl);
bad splits stop before anything starts, naming the key; the real mode counts the GPUs both pools need; the CPU
smoke keeps the split on logical GPUs with verl-ext's gloo engine. Only what starts a process or needs a GPU is
replaced (``Tools``, as in test_launch.py)."""

import pytest

from tests.experiments.test_launch import Recorder, launch
from tests.run_scripts.scripts import override_value, planned_runs

SPLIT_4_4 = {"N_GPUS_PER_NODE": "4", "ENGINE_GPUS_PER_NODE": "4"}
ONE_RUN = {"ALGORITHMS": "rec_oneside_nois", "SETTINGS": "sync_interval_20"}


def test_the_dry_run_composes_and_checks_the_split_for_a_gpu_cluster(tmp_path, capsys):
    status, recorder = launch(tmp_path, ["figure", "gsm8k-figure2"], VERL_EXT_DRY_RUN="1", **SPLIT_4_4, **ONE_RUN)
    out = capsys.readouterr().out
    assert status == 0, out
    assert recorder.calls == []
    assert "engine        own pool: 1 node(s) x 4 GPUs = 4 GPUs, 4 replica(s) of TP 1, resident" in out
    assert "weights through checkpoint_engine.backend=nccl" in out
    assert "nnodes=1 n_gpus_per_node=4 device=cuda" in out  # the trainer's 4
    assert "preflight: 1 of 1 run configuration(s) passed" in out


def test_the_split_overrides_reach_main_ppo(tmp_path):
    cell, = planned_runs(tmp_path, "figure", "guru-figure12", ENGINE_NNODES="2", ENGINE_GPUS_PER_NODE="8",
                          NNODES="2", ALGORITHMS="rec_gspo_nois@6e-4_8e-4")
    argv = cell.main_ppo_args
    assert override_value(argv, "actor_rollout_ref.hybrid_engine") == "false"
    assert (override_value(argv, "actor_rollout_ref.rollout.nnodes"),
            override_value(argv, "actor_rollout_ref.rollout.n_gpus_per_node")) == ("2", "8")
    assert override_value(argv, "actor_rollout_ref.rollout.free_cache_engine") == "false"
    assert override_value(argv, "actor_rollout_ref.rollout.checkpoint_engine.backend") == "nccl"
    colocated, = planned_runs(tmp_path, "run", "gsm8k", "grpo")
    assert not [item for item in colocated.main_ppo_args if item.startswith(("actor_rollout_ref.hybrid_engine=",
                                                                              "actor_rollout_ref.rollout.nnodes="))]


def test_a_split_whose_engine_pool_cannot_hold_the_profiles_tensor_parallelism_stops(tmp_path, capsys):
    """guru-qwen2.5-7b's engine replicas span 2 GPUs: 3 engine GPUs cannot hold them."""
    status, _ = launch(tmp_path, ["figure", "guru-figure5"], VERL_EXT_DRY_RUN="1", ALGORITHMS="grpo",
                       N_GPUS_PER_NODE="4", ENGINE_GPUS_PER_NODE="3")
    assert status == 1
    assert "= 3 engine GPUs cannot hold whole rollout replicas of 2 GPUs (tensor_model_parallel_size=2" in capsys.readouterr().out


def test_engine_nnodes_alone_is_refused(tmp_path, capsys):
    status, recorder = launch(tmp_path, ["run", "gsm8k", "grpo"], VERL_EXT_DRY_RUN="1", ENGINE_NNODES="2")
    assert status == 2 and recorder.calls == []
    assert "ENGINE_NNODES='2' needs ENGINE_GPUS_PER_NODE" in capsys.readouterr().err


def test_a_real_split_run_counts_the_gpus_of_both_pools(tmp_path, capsys):
    status, recorder = launch(tmp_path, ["run", "gsm8k", "grpo"], Recorder(gpus=6), **SPLIT_4_4)
    assert status == 1 and recorder.calls == []
    assert "This run needs 8 GPU(s) per node (N_GPUS_PER_NODE=4, NNODES=1, ENGINE_GPUS_PER_NODE=4, ENGINE_NNODES=1)" in (
        capsys.readouterr().err)


def test_the_cpu_smoke_keeps_the_split_on_logical_gpus_with_gloo(tmp_path):
    cell, = planned_runs(tmp_path, "run", "gsm8k", "grpo", "sync_offset_1", VERL_EXT_CPU_SMOKE="1", **SPLIT_4_4)
    argv = cell.main_ppo_args
    assert override_value(argv, "actor_rollout_ref.hybrid_engine") == "false"
    assert (override_value(argv, "actor_rollout_ref.rollout.nnodes"),
            override_value(argv, "actor_rollout_ref.rollout.n_gpus_per_node")) == ("1", "1")
    assert override_value(argv, "actor_rollout_ref.rollout.checkpoint_engine.backend") == "gloo"
    assert override_value(argv, "ray_kwargs.ray_init.num_gpus") == "2"
    assert override_value(argv, "trainer.n_gpus_per_node") == "1"


@pytest.mark.parametrize("flag", ["VERL_EXT_GPU_SMOKE"])
def test_the_one_gpu_smoke_refuses_the_split(tmp_path, capsys, flag):
    status, recorder = launch(tmp_path, ["run", "gsm8k", "grpo"], **{flag: "1"}, **SPLIT_4_4)
    assert status == 2 and recorder.calls == []
    assert "ENGINE_GPUS_PER_NODE=4: the GPU smoke runs on one GPU" in capsys.readouterr().err
