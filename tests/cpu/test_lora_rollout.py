"""The CPU rollout takes verl's LoRA adapter pushes (verl_ext.cpu_runtime.lora) and generates with the pushed adapter.

Real collaborators: the tiny Qwen2 model, peft's LoRA layers as verl's FSDP actor builds them (``get_peft_model``
with verl's LoraConfig fields), verl's own functions that make the push (``collect_lora_params``,
``replace_lora_wrapper``: what ``FSDPEngine.get_per_tensor_param`` streams without FSDP), the server class the Ray
actor runs, and the lag-0 check of a run's metrics (verl_ext.gpu.smoke_checks).

The broken push is verl issue #7495: an engine that never receives the adapter. verl 0.9.1's checkpoint-engine path
(the engine on its own pool) sends exactly that, the base weights without the adapter. The CPU rollout refuses to
generate then; an engine that generates anyway (vLLM with no adapter loaded uses the base model) makes log-probs
that the lag-0 check rejects.
"""

import asyncio

import pytest
import torch

from tests.cpu.test_rollout_server import SAMPLING, prompt_ids
from verl_ext.cpu_runtime.rollout_server import CPURolloutServer, RolloutWeightsUnavailable
from verl_ext.cpu_runtime.weight_checksum import combine_digests, tensor_digest, weight_checksum

RANK, ALPHA = 4, 8


def actor_with_adapter(tiny_assets, seed=0):
    """The actor's model as verl's FSDP engine builds it (``_build_lora_module``), with a trained (non-zero)
    adapter: lora_B is zero at initialisation, which would make any engine look right."""
    from peft import LoraConfig, TaskType, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_assets / "model"), dtype=torch.float32)
    model = get_peft_model(model, LoraConfig(task_type=TaskType.CAUSAL_LM, r=RANK, lora_alpha=ALPHA,
                                             target_modules="all-linear", bias="none"))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_" in name:
                parameter.copy_(0.3 * torch.randn(parameter.shape, generator=generator))
    return model.eval()


def verl_push_streams(actor):
    """What verl's colocated push sends for a LoRA actor (FSDPEngine.get_per_tensor_param): the base weights with
    LoRA-wrapped layers under base_layer names (base_sync_done=False), and the adapter (base_sync_done=True)."""
    from verl.utils.fsdp_utils import collect_lora_params, replace_lora_wrapper

    peft_config = actor.peft_config["default"]
    base = collect_lora_params(actor, layered_summon=False, base_sync_done=False)
    base = {replace_lora_wrapper(name, peft_config): tensor for name, tensor in base.items()}
    adapter = collect_lora_params(actor, layered_summon=False, base_sync_done=True)
    return peft_config.to_dict(), dict(base), {name: tensor.detach().clone() for name, tensor in adapter.items()}


def make_lora_server(tiny_assets, tmp_path, lora_rank=RANK, free_cache_engine=True):
    from verl.workers.config import HFModelConfig, RolloutConfig
    from verl.workers.rollout.replica import RolloutMode

    config = RolloutConfig(name="cpu", tensor_model_parallel_size=1, dtype="float32", prompt_length=16,
                           response_length=12, free_cache_engine=free_cache_engine,
                           engine_kwargs={"cpu": {"event_log": str(tmp_path / "events.jsonl"), "batch_wait_seconds": 0.0}})
    model_config = HFModelConfig(path=str(tiny_assets / "model"), lora_rank=lora_rank, lora_alpha=ALPHA)
    return CPURolloutServer(config, model_config, rollout_mode=RolloutMode("hybrid"), replica_rank=0)


async def push(server, tensors, version, peft_config=None, adapter=False):
    await server.begin_weight_update(peft_config=peft_config, adapter=adapter)
    items = list(tensors.items())
    await server.load_weight_bucket(items)
    sent = combine_digests({name: tensor_digest(name, tensor) for name, tensor in items})
    return await server.finish_weight_update(global_steps=version, sent_checksum=sent)


def actor_log_probs(actor, prompt, response) -> torch.Tensor:
    """log pi(y_t | x, y_<t) of the response tokens under the actor (temperature 1)."""
    ids = torch.tensor([list(prompt) + list(response)])
    with torch.no_grad():
        logits = actor(input_ids=ids).logits[0, len(prompt) - 1:-1]
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, torch.tensor(response).unsqueeze(-1)).squeeze(-1)


def lag0_gap(server, actor, prompt, requests=4) -> float:
    """The mean rollout - actor log-prob gap over a few seeded generations, as staleness/behaviour_minus_current_log_prob
    measures it at lag 0."""
    from verl_ext.staleness.mismatch import mean_behaviour_minus_current_log_prob

    async def generate():
        return [await server.generate(prompt, {**SAMPLING, "seed": seed}, f"r{seed}") for seed in range(requests)]

    outputs = asyncio.run(generate())
    rollout = [torch.tensor(output.log_probs) for output in outputs]
    current = [actor_log_probs(actor, prompt, output.token_ids) for output in outputs]
    width = max(len(values) for values in rollout)
    pad = lambda rows: torch.stack([torch.nn.functional.pad(row, (0, width - len(row))) for row in rows])  # noqa: E731
    mask = torch.stack([torch.nn.functional.pad(torch.ones(len(row)), (0, width - len(row))) for row in rollout])
    return mean_behaviour_minus_current_log_prob(pad(rollout), pad(current), mask)


def lag0_check(gap: float):
    """The smoke checks' "rollout vs actor log-probs at lag 0" on a one-step (1, 0) run that logged ``gap``."""
    from verl_ext import metric_names
    from verl_ext.gpu.smoke_checks import FLOAT32_LAG0_TOLERANCE, summarize_smoke
    from verl_ext.staleness.schedule import StalenessSchedule

    record = {"step": 1, metric_names.GLOBAL_STEP: 1, metric_names.LAG: 0.0, metric_names.BEHAVIOUR_VERSION: 0.0,
              metric_names.SYNCED: 1.0, metric_names.WEIGHT_SYNCS: 1.0, metric_names.WEIGHT_PUSHES: 2.0,
              metric_names.BEHAVIOUR_MINUS_CURRENT_LOG_PROB: gap, metric_names.SCORE_MEAN: 0.5,
              metric_names.GRAD_NORM: 1.0, metric_names.STEP_SECONDS: 1.0}
    summary = summarize_smoke([record], StalenessSchedule(1, 0), 1, lag0_tolerance=FLOAT32_LAG0_TOLERANCE)
    return next(check for check in summary.checks if check.name == "rollout vs actor log-probs at lag 0")


def test_the_engine_generates_with_the_pushed_adapter(tiny_assets, tmp_path):
    """verl's push sequence (base once, then the adapter at every version) into the rollout: it then generates with
    the actor's own forward pass (log-probs equal to float32 rounding), a new adapter changes what it generates, and
    the events say which adapter it holds."""
    actor = actor_with_adapter(tiny_assets, seed=0)
    peft_config, base, adapter = verl_push_streams(actor)
    server = make_lora_server(tiny_assets, tmp_path)
    prompt = prompt_ids(tiny_assets)

    async def start_up():
        with pytest.raises(RolloutWeightsUnavailable, match="dummy weights"):
            await server.generate(prompt, dict(SAMPLING), "before")
        base_record = await push(server, base, 0, peft_config)
        with pytest.raises(RolloutWeightsUnavailable, match="no adapter was pushed yet"):
            await server.generate(prompt, dict(SAMPLING), "base only")  # the adapter is still to come
        return base_record, await push(server, adapter, 0, peft_config, adapter=True)

    base_record, adapter_record = asyncio.run(start_up())
    assert base_record["event"] == "update_base_weights" and base_record["weight_version"] is None
    assert adapter_record["event"] == "update_weights" and adapter_record["weight_version"] == 0
    assert adapter_record["num_tensors"] == len(adapter) == 2 * 7 * 2  # A and B of 7 linear layers x 2 layers
    from verl_ext.cpu_runtime.lora import adapter_checksum

    held = {name: tensor for name, tensor in server.model.named_parameters() if "lora_" in name}
    assert adapter_record["adapter_checksum"] == weight_checksum(held)
    # the actor's own names (peft's, as in verl's checkpoint) give the same checksum for the same adapter
    assert adapter_checksum(dict(actor.named_parameters())) == adapter_record["adapter_checksum"]
    gap = lag0_gap(server, actor, prompt)
    assert abs(gap) < 1e-5, gap
    assert lag0_check(gap).ok

    # a training step later: the next adapter push alone (base_sync_done=True) moves the engine with it
    trained = actor_with_adapter(tiny_assets, seed=1)
    _, _, next_adapter = verl_push_streams(trained)
    record = asyncio.run(push(server, next_adapter, 3, peft_config, adapter=True))
    assert record["adapter_version"] == 3 and record["adapter_checksum"] != adapter_record["adapter_checksum"]
    assert abs(lag0_gap(server, trained, prompt)) < 1e-5
    assert abs(lag0_gap(server, actor, prompt)) > 1e-2  # the old adapter's log-probs are not these


def test_sleep_keeps_the_base_and_requires_the_next_adapter(tiny_assets, tmp_path):
    """Adapter mode sleeps at level 1 (verl's vLLM server too): the base weights stay, and after the wake only an
    adapter push makes the engine generate again (a stale adapter is refused, where vLLM would use it)."""
    actor = actor_with_adapter(tiny_assets)
    peft_config, base, adapter = verl_push_streams(actor)
    server = make_lora_server(tiny_assets, tmp_path)
    prompt = prompt_ids(tiny_assets)

    async def scenario():
        await push(server, base, 0, peft_config)
        await push(server, adapter, 0, peft_config, adapter=True)
        before = server.weight_state()["weight_checksum"]
        await server.sleep()
        await server.wake_up(tags=["weights"])
        await server.wake_up(tags=["kv_cache"])
        assert server.weight_state()["weight_checksum"] == before  # nothing discarded
        with pytest.raises(RolloutWeightsUnavailable, match="since the engine slept"):
            await server.generate(prompt, dict(SAMPLING), "stale")
        await push(server, adapter, 2, peft_config, adapter=True)
        return await server.generate(prompt, dict(SAMPLING), "fresh")

    output = asyncio.run(scenario())
    assert output.extra_fields["global_steps"] == 2
    sleeps = [event for event in server.events_so_far() if event["event"] == "sleep"]
    assert [event["level"] for event in sleeps] == [1]


def test_a_push_without_the_adapter_is_refused_at_generation(tiny_assets, tmp_path):
    """verl 0.9.1's checkpoint-engine push of a LoRA actor (the engine on its own pool) sends the base weights only
    (FSDPEngine.get_per_tensor_param with its defaults) and no peft_config: the adapter never reaches the engine
    (verl issue #7495). The CPU rollout takes the weights but refuses to generate, naming why."""
    from verl.utils.fsdp_utils import collect_lora_params, replace_lora_wrapper

    actor = actor_with_adapter(tiny_assets)
    peft_config = actor.peft_config["default"]
    base_only = {replace_lora_wrapper(name, peft_config): tensor
                 for name, tensor in collect_lora_params(actor, layered_summon=False, base_sync_done=False).items()}
    server = make_lora_server(tiny_assets, tmp_path)
    asyncio.run(push(server, base_only, 0))
    with pytest.raises(RolloutWeightsUnavailable, match="#7495"):
        asyncio.run(server.generate(prompt_ids(tiny_assets), dict(SAMPLING), "r"))
    rejected = [event for event in server.events_so_far() if event["event"] == "generate_rejected"]
    assert rejected and "lora_rank" in rejected[0]["reason"]


def test_an_engine_that_generates_without_the_adapter_fails_the_lag0_check(tiny_assets, tmp_path):
    """The broken push where the engine does not refuse (vLLM generates with the base model when no adapter is
    loaded): the same base-only push into an engine not set up for adapters generates, and the run's lag-0 check
    fails on its log-probs. The complete push passes the same check."""
    from verl.utils.fsdp_utils import collect_lora_params, replace_lora_wrapper

    actor = actor_with_adapter(tiny_assets)
    peft_config = actor.peft_config["default"]
    base_only = {replace_lora_wrapper(name, peft_config).replace(".base_layer", ""): tensor
                 for name, tensor in collect_lora_params(actor, layered_summon=False, base_sync_done=False).items()}
    lenient = make_lora_server(tiny_assets, tmp_path / "lenient", lora_rank=0)
    asyncio.run(push(lenient, base_only, 0))
    gap = lag0_gap(lenient, actor, prompt_ids(tiny_assets))
    check = lag0_check(gap)
    assert not check.ok and abs(gap) > 1e-2, check.detail


def test_adapter_pushes_are_checked(tiny_assets, tmp_path):
    """An adapter push into an engine not set up for adapters, a push missing adapter tensors, and a later adapter of
    another structure are refused, each naming what is wrong."""
    actor = actor_with_adapter(tiny_assets)
    peft_config, base, adapter = verl_push_streams(actor)
    with pytest.raises(ValueError, match="lora_rank is 0"):
        asyncio.run(push(make_lora_server(tiny_assets, tmp_path / "a", lora_rank=0), adapter, 0, peft_config, adapter=True))

    server = make_lora_server(tiny_assets, tmp_path / "b")
    asyncio.run(push(server, base, 0, peft_config))
    partial = dict(list(adapter.items())[:-2])
    with pytest.raises(RolloutWeightsUnavailable, match="left 2 adapter tensors unfilled"):
        asyncio.run(push(server, partial, 0, peft_config, adapter=True))
    other = dict(peft_config, r=RANK * 2)
    with pytest.raises(ValueError, match="differs from the first one's: .*'r'"):
        asyncio.run(push(server, adapter, 0, other, adapter=True))
    with pytest.raises(KeyError, match="not a LoRA tensor"):
        asyncio.run(push(server, {"model.norm.weight": torch.ones(64)}, 0, peft_config, adapter=True))
