"""What a run resumes from, refused in the driver before Ray when verl could not load it (verl_ext.checks.resume,
verl_ext.staleness.checkpoint_state.check_resumed_state): a world-size-1 checkpoint resumed at world size 2 once
failed after 113 s inside Ray naming only a missing shard; a delayed_sync state with impossible counts was resumed.

The checkpoints here have verl's FSDP layout (``global_step_<g>/actor/fsdp_config.json`` and one
``{model,optim,extra_state}_world_size_<W>_rank_<r>.pt`` per rank, empty: nothing loads them before Ray), the
tracker file ``latest_checkpointed_iteration.txt`` beside them. The same check on a real checkpoint of two ranks:
tests/staleness/test_e2e_cpu.py. The driver is verl's ``main_ppo.main`` with ``ray.init`` as a tripwire."""

import copy
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from tests.adversarial.test_config_paths import RayStarted, config_error_in, driver  # noqa: F401 (the fixture)
from tests.recipe_config import MINIMAL_RUN_OVERRIDES, RECIPE_CONFIG_DIR
from verl_ext.runs import compose as composition
from verl_ext.checks.resume import TRACKER_FILE, check_resume, resumed_folder
from verl_ext.config_values import ConfigError
from verl_ext.staleness.checkpoint_state import STATE_FILE

GENERATED = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def fsdp_checkpoint(root, step=3, world_size=1, config=True, ranks=None, parts=("model", "optim", "extra_state"),
                    track=True):
    """``root/global_step_<step>`` in verl's FSDP layout (empty shards), and the tracker naming it."""
    actor = root / f"global_step_{step}" / "actor"
    actor.mkdir(parents=True)
    if config:
        (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": world_size}))
    for rank in range(world_size) if ranks is None else ranks:
        for part in parts:
            (actor / f"{part}_world_size_{world_size}_rank_{rank}.pt").write_bytes(b"")
    if track:
        (root / TRACKER_FILE).write_text(str(step))
    return actor.parent


def config_for(root, nnodes=1, per_node=1, mode="auto", path=None, strategy="fsdp2", load=("model", "optimizer", "extra")):
    """The keys the check reads, as a composed config holds them."""
    return OmegaConf.create({
        "trainer": {"resume_mode": mode, "resume_from_path": path, "default_local_dir": str(root),
                    "nnodes": nnodes, "n_gpus_per_node": per_node},
        "actor_rollout_ref": {"actor": {"strategy": strategy, "checkpoint": {"load_contents": list(load)}}},
        "critic": {"enable": False},
        "algorithm": {"adv_estimator": "grpo"},
    })


# ---------------------------------------------------------------------------------------------- world size


@GENERATED
@given(saved=st.integers(1, 8), nnodes=st.integers(1, 4), per_node=st.integers(1, 4))
def test_a_checkpoint_resumes_only_at_the_world_size_it_was_saved_with(tmp_path_factory, saved, nnodes, per_node):
    root = tmp_path_factory.mktemp("checkpoints")
    folder = fsdp_checkpoint(root, world_size=saved)
    config = config_for(root, nnodes, per_node)
    if saved == nnodes * per_node:
        check_resume(config)
        return
    with pytest.raises(ConfigError) as raised:
        check_resume(config)
    message = str(raised.value)
    assert str(folder) in message and f"saved at world size {saved}" in message
    assert f"asks for world size {nnodes * per_node} (trainer.nnodes x trainer.n_gpus_per_node = {nnodes} x {per_node})" in message


@pytest.mark.parametrize("mode", ["auto", "resume_path"])
def test_the_world_size_comes_from_the_shards_without_fsdp_config(tmp_path, mode):
    folder = fsdp_checkpoint(tmp_path, world_size=1, config=False)
    with pytest.raises(ConfigError, match="saved at world size 1 .*asks for world size 2"):
        check_resume(config_for(tmp_path, per_node=2, mode=mode, path=str(folder)))


@pytest.mark.parametrize("case", ["a rank's model shard", "a rank's optimizer shard", "the actor folder"])
def test_a_checkpoint_missing_what_the_run_loads_is_refused(tmp_path, case):
    if case == "the actor folder":
        (tmp_path / "global_step_3").mkdir()
        (tmp_path / TRACKER_FILE).write_text("3")
        expected = "no actor/ folder"
    else:
        folder = fsdp_checkpoint(tmp_path, world_size=2)
        victim = "model" if "model" in case else "optim"
        (folder / "actor" / f"{victim}_world_size_2_rank_1.pt").unlink()
        expected = f"{victim}_world_size_2_rank_1.pt is missing"
    with pytest.raises(ConfigError, match=expected):
        check_resume(config_for(tmp_path, per_node=2))


def test_only_what_the_run_loads_must_be_there(tmp_path):
    """load_contents without the optimizer: its shards may be absent (verl does not read them)."""
    fsdp_checkpoint(tmp_path, world_size=2, parts=("model", "extra_state"))
    check_resume(config_for(tmp_path, per_node=2, load=("model", "extra")))
    with pytest.raises(ConfigError, match="optim_world_size_2_rank_0.pt is missing"):
        check_resume(config_for(tmp_path, per_node=2))


@pytest.mark.parametrize("content", [b"", b"{", b"[2]", b'{"world_size": "2"}', b'{"world_size": 0}',
                                     b'{"world_size": true}', b'{"world_size": 2.0}', b"\xff\xfe", b"{}"])
def test_a_damaged_fsdp_config_is_named(tmp_path, content):
    folder = fsdp_checkpoint(tmp_path, world_size=2)
    (folder / "actor" / "fsdp_config.json").write_bytes(content)
    with pytest.raises(ConfigError) as raised:
        check_resume(config_for(tmp_path, per_node=2))
    assert str(folder / "actor" / "fsdp_config.json") in str(raised.value)


def test_a_fifo_for_fsdp_config_is_refused_without_blocking(tmp_path):
    folder = fsdp_checkpoint(tmp_path, world_size=2, config=False)
    os.mkfifo(folder / "actor" / "fsdp_config.json")
    with pytest.raises(ConfigError, match="FIFO"):
        check_resume(config_for(tmp_path, per_node=2))


def test_other_strategies_and_fresh_starts_are_not_refused(tmp_path):
    fsdp_checkpoint(tmp_path, world_size=1)
    check_resume(config_for(tmp_path, per_node=2, strategy="megatron"))  # another layout: not read here
    check_resume(config_for(tmp_path, per_node=2, mode="disable"))
    check_resume(config_for(tmp_path / "nothing_here", per_node=2))  # no tracker: a fresh start
    (tmp_path / TRACKER_FILE).write_text("7")  # names no folder: verl starts afresh too
    assert resumed_folder(config_for(tmp_path)) is None
    check_resume(config_for(tmp_path, per_node=2))


# ---------------------------------------------------------------------------------------------- the resume keys


@pytest.mark.parametrize("content", ["", "three", "3.0", "0x3", "\x00", "9" * 5000, "3 4"])
def test_a_tracker_that_is_not_a_step_number_is_named(tmp_path, content):
    fsdp_checkpoint(tmp_path, world_size=1)
    (tmp_path / TRACKER_FILE).write_text(content)
    with pytest.raises(ConfigError) as raised:
        check_resume(config_for(tmp_path))
    assert str(tmp_path / TRACKER_FILE) in str(raised.value) and "not a step number" in str(raised.value)


@pytest.mark.parametrize("kind", ["fifo", "folder", "binary", "huge"])
def test_a_tracker_that_is_not_a_small_text_file_is_named(tmp_path, kind):
    tracker = tmp_path / TRACKER_FILE
    if kind == "fifo":
        os.mkfifo(tracker)  # verl's open() would block for ever
    elif kind == "folder":
        tracker.mkdir()
    elif kind == "binary":
        tracker.write_bytes(b"\xff\xfe\x00\x01")
    else:
        tracker.write_bytes(b"1" * (1 << 20))
    with pytest.raises(ConfigError) as raised:
        check_resume(config_for(tmp_path))
    assert str(tracker) in str(raised.value)


@pytest.mark.parametrize("mode", ["Auto", "resume", "", None, 1, "disabled"])
def test_a_resume_mode_verl_does_not_have_is_refused(tmp_path, mode):
    with pytest.raises(ConfigError, match="trainer.resume_mode=.* is invalid: allowed values are disable, auto, resume_path"):
        check_resume(config_for(tmp_path, mode=mode))


@pytest.mark.parametrize("path,why", [
    (None, "ending in global_step_"), ("", "ending in global_step_"), ("checkpoints/step_3", "ending in global_step_"),
    ("{root}/global_step_3/", "no trailing /"), ("{root}/global_step_x", "ending in global_step_"),
    ("{root}/global_step_9", "is not a folder"),
])
def test_a_resume_path_verl_cannot_read_or_load_is_refused(tmp_path, path, why):
    fsdp_checkpoint(tmp_path, world_size=1, track=False)
    path = path.format(root=tmp_path) if path else path
    with pytest.raises(ConfigError, match=f"trainer.resume_from_path=.*{why}"):
        check_resume(config_for(tmp_path, mode="resume_path", path=path))


def test_a_relative_resume_path_is_read_from_the_working_folder_as_verl_does(tmp_path, monkeypatch):
    fsdp_checkpoint(tmp_path, world_size=1, track=False)
    monkeypatch.chdir(tmp_path)
    assert resumed_folder(config_for(tmp_path, mode="resume_path", path="global_step_3")) == tmp_path / "global_step_3"
    with pytest.raises(ConfigError, match="saved at world size 1"):
        check_resume(config_for(tmp_path, per_node=2, mode="resume_path", path="global_step_3"))


# ---------------------------------------------------------------------------------------------- the driver, before Ray


def composed(*overrides):
    with composition.memoised_config_files():
        argv = [f"--config-path={RECIPE_CONFIG_DIR}", "--config-name=rec_trainer", *MINIMAL_RUN_OVERRIDES, *overrides]
        return composition.parse_main_ppo_argv(argv).config()


def driver_and_dry_run_refuse(driver, config, *expected):
    with pytest.raises(Exception) as dry_run:
        composition.check_as_the_driver(copy.deepcopy(config))
    with pytest.raises(Exception) as raised:
        driver(config)
    assert not isinstance(raised.value, RayStarted), "Ray started before the check"
    error = config_error_in(raised.value)
    assert error is not None and str(error) == str(config_error_in(dry_run.value))
    for text in expected:
        assert text in str(error), str(error)


def test_the_driver_refuses_a_checkpoint_of_another_world_size_before_ray(driver, tmp_path):
    folder = fsdp_checkpoint(tmp_path / "checkpoints", world_size=1)
    config = composed(f"trainer.default_local_dir={tmp_path / 'checkpoints'}", "trainer.n_gpus_per_node=2",
                      "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1")
    driver_and_dry_run_refuse(driver, config, str(folder), "saved at world size 1", "asks for world size 2")


def test_the_driver_refuses_impossible_delayed_sync_counts_before_ray(driver, tmp_path):
    """The issue's case: 1,000 syncs at step 5."""
    folder = fsdp_checkpoint(tmp_path / "checkpoints", step=5, world_size=1)
    state = {"sync_interval": 4, "sync_offset": 0, "offline": False, "weight_syncs": 1000, "weight_pushes": 1001,
             "schedule_since": 0}
    (folder / STATE_FILE).write_text(json.dumps(state))
    config = composed(f"trainer.default_local_dir={tmp_path / 'checkpoints'}", "trainer.v1.trainer_mode=delayed_sync",
                      "trainer.v1.delayed_sync.sync_interval=4")
    driver_and_dry_run_refuse(driver, config, str(folder / STATE_FILE), "field 'weight_pushes'", "at global step 5")
    (folder / STATE_FILE).write_text(json.dumps({**state, "weight_syncs": 1, "weight_pushes": 2}))
    with pytest.raises(RayStarted):  # a possible state: the run goes on to Ray
        driver(config)
