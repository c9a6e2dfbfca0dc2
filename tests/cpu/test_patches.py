"""Each CPU patch is still needed by this verl/torch, and does its job.

The "still needed" tests look at verl's own code and torch's own behaviour with the patch removed: when
an upgrade makes a patch unnecessary (or changes what it patches), they fail with a message saying so.
"""

import importlib
import inspect
import socket
import sys
import textwrap

import pytest
import torch
import torch.distributed as dist

import verl  # noqa: F401

from verl_ext.cpu_runtime import patches


@pytest.fixture
def unpatched():
    """verl's and torch's original objects for the test; the patches as they were afterwards."""
    active = patches.active_patches()
    patches.remove_cpu_patches()
    yield
    if active:
        patches.apply_cpu_patches()


@pytest.fixture
def patched():
    active = patches.active_patches()
    patches.apply_cpu_patches()
    yield
    if not active:
        patches.remove_cpu_patches()


@pytest.fixture
def cpu_platform():
    """verl's platform singleton set to the CPU platform for the test, restored afterwards."""
    from verl.plugin.platform import platform_manager

    from verl_ext.cpu_runtime.platform import cpu_platform_class

    saved = platform_manager._current_platform
    platform_manager._current_platform = cpu_platform_class()()
    yield
    platform_manager._current_platform = saved


@pytest.fixture
def rendezvous(monkeypatch):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    yield
    if dist.is_initialized():
        dist.destroy_process_group()


# ---------------------------------------------------------------- 1. duplicate gloo backend


def test_verl_still_asks_torch_for_a_duplicated_cpu_backend(unpatched, cpu_platform, rendezvous, monkeypatch):
    from verl.utils.distributed import initialize_global_process_group_ray

    requested = {}
    monkeypatch.setattr(dist, "init_process_group", lambda backend=None, **kwargs: requested.setdefault("backend", backend))
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    initialize_global_process_group_ray()
    assert requested["backend"] == "cpu:gloo,cpu:gloo", (
        f"verl now asks for {requested['backend']!r} on the CPU platform: the duplicate_gloo_backend patch may be unnecessary"
    )


def test_torch_still_rejects_the_duplicated_backend(unpatched, rendezvous):
    try:
        dist.init_process_group(backend="cpu:gloo,cpu:gloo", rank=0, world_size=1)
    except ValueError as error:
        assert "Duplicate" in str(error)
    else:
        pytest.fail("torch accepts 'cpu:gloo,cpu:gloo' now: remove the duplicate_gloo_backend patch")


def test_patched_process_group_runs_gloo(patched, cpu_platform, rendezvous):
    from verl.utils.distributed import initialize_global_process_group_ray

    initialize_global_process_group_ray()
    assert dist.get_backend() == "cpu:gloo"
    tensor = torch.ones(2)
    dist.all_reduce(tensor)
    assert tensor.tolist() == [1.0, 1.0]


def test_deduplicate_backend_keeps_distinct_entries():
    assert patches.deduplicate_backend("cpu:gloo,cpu:gloo") == "cpu:gloo"
    assert patches.deduplicate_backend("cpu:gloo,cuda:nccl") == "cpu:gloo,cuda:nccl"
    assert patches.deduplicate_backend("gloo") == "gloo"
    assert patches.deduplicate_backend(None) is None


# ---------------------------------------------------------------- 2. unpinned CPU offload


def test_verl_still_pins_the_reference_engines_offload():
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngine

    source = inspect.getsource(FSDPEngine._build_fsdp_module)
    assert "CPUOffloadPolicy(pin_memory=True)" in source, (
        "verl no longer hard-codes pin_memory=True for the forward-only engine: revisit the unpinned_cpu_offload patch"
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="pinning works on a host with an NVIDIA driver")
def test_pinning_fails_without_an_nvidia_driver(unpatched):
    with pytest.raises(RuntimeError):
        torch.zeros(2).pin_memory()


def test_patched_fsdp2_offload_runs_on_cpu(patched, rendezvous):
    from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard

    dist.init_process_group(backend="gloo", rank=0, world_size=1)
    policy = CPUOffloadPolicy(pin_memory=True)
    assert policy.pin_memory is False
    model = torch.nn.Linear(4, 2)
    fully_shard(model, offload_policy=policy)
    with torch.no_grad():
        assert model(torch.ones(1, 4)).shape == (1, 2)


# ---------------------------------------------------------------- 3. replay-buffer poll interval


def test_verl_still_builds_the_replay_buffer_with_the_default_poll_interval():
    from verl.trainer.ppo.v1 import replay_buffer
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    assert "poll_interval" not in inspect.getsource(PPOTrainer._build_replay_buffer), (
        "verl's trainer now passes poll_interval: configure it instead of the replay_buffer_poll_interval patch"
    )
    original = inspect.unwrap(replay_buffer.ReplayBuffer.__init__)
    assert inspect.signature(original).parameters["poll_interval"].default == 2.0


def make_replay_buffer(**kwargs):
    from omegaconf import OmegaConf
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

    return ReplayBuffer(
        trainer_mode="sync",
        trainer_config=OmegaConf.create({}),
        max_off_policy_threshold=None,
        max_off_policy_strategy="drop",
        sampler_kwargs=OmegaConf.create({}),
        train_batch_size=8,
        gen_batch_size=8,
        **kwargs,
    )


def test_patched_replay_buffer_polls_fast_unless_told_otherwise(patched):
    assert make_replay_buffer().poll_interval == patches.CPU_REPLAY_POLL_INTERVAL
    assert make_replay_buffer(poll_interval=1.5).poll_interval == 1.5


def test_unpatched_replay_buffer_polls_every_two_seconds(unpatched):
    assert make_replay_buffer().poll_interval == 2.0


def test_when_imported_runs_after_a_later_import(tmp_path, monkeypatch):
    (tmp_path / "late_module_for_patch_test.py").write_text(textwrap.dedent("VALUE = 1\n"))
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    remove = patches.when_imported("late_module_for_patch_test", lambda module: seen.append(module.VALUE))
    try:
        assert seen == []
        importlib.import_module("late_module_for_patch_test")
        assert seen == [1]
    finally:
        remove()
        sys.modules.pop("late_module_for_patch_test", None)


# ---------------------------------------------------------------- 5. agent loops built without Hydra's merge


def test_verl_still_builds_every_agent_loop_with_hydra_and_uses_hydra_for_nothing_else():
    import re

    from verl.experimental.agent_loop import agent_loop

    source = inspect.getsource(agent_loop)
    uses = set(re.findall(r"\bhydra\.[\w.]+\(", source)) - {"hydra.cc"}
    assert uses == {"hydra.utils.instantiate("}, (
        f"verl's agent-loop module now uses {sorted(uses)}: the agent_loop_construction patch stands for "
        "hydra.utils.instantiate only"
    )
    assert "hydra.utils.instantiate(\n                config=agent_loop_config," in inspect.getsource(
        agent_loop.AgentLoopWorker._run_agent_loop
    ), "verl no longer builds each response's agent loop from its registry entry: re-check agent_loop_construction"


def agent_loop_arguments(config, tokenizer):
    """The keyword arguments verl's agent-loop worker builds every agent loop with."""
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap

    return dict(trainer_config=DictConfigWrap(config=config), server_manager=object(), tokenizer=tokenizer,
                processor=None, hf_model_type="qwen2", dataset_cls=None, data_config=DictConfigWrap(config.data),
                tools=ToolListWrap([]))


@pytest.fixture(scope="module")
def cpu_config_and_tokenizer(tiny_assets):
    from transformers import AutoTokenizer

    from tests.recipe_config import compose_recipe
    from verl_ext.cpu.profile import cpu_overrides

    return compose_recipe(*cpu_overrides(tiny_assets)), AutoTokenizer.from_pretrained(str(tiny_assets / "model"))


@pytest.mark.parametrize("name", ["seeded_single_turn_agent", "seeded_tool_agent", "single_turn_agent"])
def test_an_agent_loop_built_directly_equals_hydras(name, cpu_config_and_tokenizer, monkeypatch):
    import hydra
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry

    config, tokenizer = cpu_config_and_tokenizer
    entry = _agent_loop_registry[name]
    arguments = agent_loop_arguments(config, tokenizer)
    by_hydra = hydra.utils.instantiate(config=entry, **arguments)
    construction = patches.DirectAgentLoopConstruction(hydra)
    monkeypatch.setattr(hydra.utils, "instantiate", lambda *a, **k: pytest.fail("Hydra was asked"))
    direct = construction.utils.instantiate(config=entry, **arguments)
    assert type(direct) is type(by_hydra)
    assert vars(direct).keys() == vars(by_hydra).keys()
    for attribute, value in vars(by_hydra).items():
        mine = vars(direct)[attribute]
        if any(value is argument for argument in arguments.values()) or value is None or isinstance(value, (str, int, float)):
            assert mine is value or mine == value, attribute
        else:
            assert type(mine) is type(value), attribute


def test_an_entry_with_fields_of_its_own_is_built_by_hydra(cpu_config_and_tokenizer):
    import hydra

    config, tokenizer = cpu_config_and_tokenizer
    entry = {"_target_": "verl_ext.seeded_agent_loop.SeededToolAgentLoop", "max_tokens_per_turn": 8}
    built = patches.DirectAgentLoopConstruction(hydra).utils.instantiate(config=entry, **agent_loop_arguments(config, tokenizer))
    assert built.max_tokens_per_turn == 8


def test_the_patched_agent_loop_module_builds_without_hydra(patched):
    from verl.experimental.agent_loop import agent_loop

    assert isinstance(agent_loop.hydra, patches.DirectAgentLoopConstruction)


def test_the_unpatched_agent_loop_module_has_hydra(unpatched):
    import hydra
    from verl.experimental.agent_loop import agent_loop

    assert agent_loop.hydra is hydra
