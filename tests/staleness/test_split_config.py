"""The rollout engine on its own pool (``actor_rollout_ref.hybrid_engine=false``) under ``delayed_sync``: what the
driver accepts and what it refuses before Ray starts, each refusal naming the key and its allowed values.

The checks run in :func:`verl_ext.staleness.config.delayed_sync_config_from`, which the driver's checks
(:func:`verl_ext.driver_checks.validate_run_config`, before ``ray.init``), the dry run and the trainer's constructor
call."""

import pytest

from tests.recipe_config import compose_recipe
from verl_ext import checkpoint_backends
from verl_ext.driver_checks import validate_run_config
from verl_ext.staleness.config import (
    DelayedSyncConfig,
    delayed_sync_config_from,
    engine_gpus,
    engine_on_own_pool,
    engine_pool_overrides,
)

MODE = "trainer.v1.trainer_mode=delayed_sync"
# the CPU backend's split: 1 trainer GPU (MINIMAL_RUN_OVERRIDES) + 1 engine GPU, weights over gloo
SPLIT = (MODE, *engine_pool_overrides(1, 1, "gloo"), "actor_rollout_ref.rollout.tensor_model_parallel_size=1")
# a GPU cluster's split: 4 trainer GPUs + 4 engine GPUs (2 replicas of TP 2), weights over verl's nccl
GPU_SPLIT = (MODE, "trainer.n_gpus_per_node=4", *engine_pool_overrides(1, 4, "nccl"),
             "actor_rollout_ref.rollout.tensor_model_parallel_size=2")


def nccl_imports_here() -> bool:
    return checkpoint_backends.backend_status("nccl").status == checkpoint_backends.REGISTERED


def test_the_cpu_split_passes_the_drivers_checks_and_verls():
    config = compose_recipe(*SPLIT, "trainer.v1.delayed_sync.sync_interval=3", "trainer.v1.delayed_sync.sync_offset=1")
    validate_run_config(config)  # verl-ext's checks, then verl's validate_config: what main_ppo runs before ray.init
    assert delayed_sync_config_from(config) == DelayedSyncConfig(sync_interval=3, sync_offset=1)
    assert engine_on_own_pool(config) and engine_gpus(config) == 1


def test_the_gpu_split_is_checked_here_and_its_missing_transport_is_a_note_in_the_dry_run():
    config = compose_recipe(*GPU_SPLIT)
    with checkpoint_backends.tolerate_unimportable_backends() as tolerated:
        validate_run_config(config)
    assert engine_gpus(config) == 4
    if nccl_imports_here():
        assert tolerated.notes == []
        return
    assert len(tolerated.notes) == 1 and "backend=nccl" in tolerated.notes[0] and "cupy" in tolerated.notes[0]
    # the driver of a real run starts the run from this machine: there the backend must import
    with pytest.raises(ValueError, match=r"checkpoint_engine.backend=nccl: verl's engine does not import on this machine"):
        validate_run_config(config)


def test_the_gpu_splits_pool_checks_still_apply_in_the_dry_run():
    config = compose_recipe(*GPU_SPLIT, "actor_rollout_ref.rollout.tensor_model_parallel_size=8")
    with checkpoint_backends.tolerate_unimportable_backends(), pytest.raises(ValueError, match="cannot hold whole rollout replicas of 8"):
        validate_run_config(config)


@pytest.mark.parametrize(
    "overrides,message",
    [
        # a split that leaves no GPU for the engine
        (("actor_rollout_ref.rollout.nnodes=0",), r"actor_rollout_ref.rollout.nnodes=0 is invalid: allowed values are an integer >= 1"),
        (("actor_rollout_ref.rollout.n_gpus_per_node=0",), r"rollout.n_gpus_per_node=0 is invalid: allowed values are an integer >= 1"),
        # ... or none for the trainer (the driver's batch checks)
        (("trainer.n_gpus_per_node=0",), r"trainer.n_gpus_per_node=0 is invalid: allowed values are an integer >= 1"),
        # an engine pool that cannot hold the replicas' tensor parallelism
        (("actor_rollout_ref.rollout.tensor_model_parallel_size=2",), r"1 engine GPUs cannot hold whole rollout replicas of 2 GPUs"),
        (
            ("actor_rollout_ref.rollout.n_gpus_per_node=6", "actor_rollout_ref.rollout.tensor_model_parallel_size=4"),
            r"6 engine GPUs cannot hold whole rollout replicas of 4 GPUs \(tensor_model_parallel_size=4",
        ),
        (
            ("actor_rollout_ref.rollout.nnodes=3", "actor_rollout_ref.rollout.n_gpus_per_node=2",
             "actor_rollout_ref.rollout.tensor_model_parallel_size=3"),
            r"rollout.n_gpus_per_node=2 = 6 engine GPUs cannot hold whole rollout replicas of 3 GPUs",
        ),
        # a standalone engine that would free its cache
        (("actor_rollout_ref.rollout.free_cache_engine=true",), r"free_cache_engine=True is invalid: allowed values are false with actor_rollout_ref.hybrid_engine=false"),
        # checkpoint engines: the colocated one, a misspelt one, a plugin that does not import
        (("actor_rollout_ref.rollout.checkpoint_engine.backend=naive",), r"checkpoint_engine.backend='naive' is invalid: allowed values are a registered backend other than 'naive' .*: .*gloo"),
        (("actor_rollout_ref.rollout.checkpoint_engine.backend=glo",), r"checkpoint_engine.backend='glo' is invalid: .*gloo.* No checkpoint engine of that name is registered"),
        (
            ("actor_rollout_ref.rollout.checkpoint_engine.custom_backend_module=no_such_module_of_verl_ext",),
            r"checkpoint_engine.custom_backend_module='no_such_module_of_verl_ext' does not import: ModuleNotFoundError",
        ),
        # a reward model woken on the training GPUs
        (("reward.reward_model.enable=true",), r"reward.reward_model.enable_resource_pool=False is invalid: allowed values are true with actor_rollout_ref.hybrid_engine=false"),
        # overlap with nothing generated ahead: still nothing to hide
        (("trainer.v1.delayed_sync.overlap=true",), r"trainer.v1.delayed_sync.sync_offset=0 is invalid: allowed values are an integer >= 1 with trainer.v1.delayed_sync.overlap=true"),
    ],
)
def test_bad_splits_are_refused_before_ray_with_the_key(overrides, message):
    config = compose_recipe(*SPLIT, *overrides)
    with pytest.raises(ValueError, match=message):
        validate_run_config(config)


@pytest.mark.parametrize(
    "overrides,message",
    [
        (("actor_rollout_ref.rollout.nnodes=2",), r"actor_rollout_ref.rollout.nnodes=2 is invalid: allowed values are 0 with actor_rollout_ref.hybrid_engine=true"),
        (("actor_rollout_ref.rollout.checkpoint_engine.backend=gloo",), r"checkpoint_engine.backend='gloo' is invalid: allowed values are 'naive' with actor_rollout_ref.hybrid_engine=true"),
    ],
)
def test_the_splits_keys_are_refused_when_the_engine_is_colocated(overrides, message):
    """verl's colocated set-up would ignore them: refused, not silently dropped."""
    with pytest.raises(ValueError, match=message):
        delayed_sync_config_from(compose_recipe(MODE, *overrides))


def test_overlap_on_the_split_shares_no_gpu_memory():
    """The colocated memory check (engine share + actor share <= 0.95 of a GPU) has no meaning on the split."""
    overlap = ("trainer.v1.delayed_sync.overlap=true", "trainer.v1.delayed_sync.sync_offset=1",
               "actor_rollout_ref.rollout.gpu_memory_utilization=0.9")
    assert delayed_sync_config_from(compose_recipe(*SPLIT, *overlap)).overlap
    with pytest.raises(ValueError, match="cannot both hold on a GPU"):
        delayed_sync_config_from(compose_recipe(MODE, "actor_rollout_ref.rollout.free_cache_engine=false", *overlap))
