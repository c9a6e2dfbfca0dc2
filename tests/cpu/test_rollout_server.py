"""The CPU rollout server keeps vLLM's contract (tested in-process: the Ray actor runs this same class).

Real collaborators: verl's RolloutConfig / HFModelConfig / TokenOutput, the tiny Qwen2 model from disk.
"""

import asyncio
import json

import pytest
import torch

from verl_ext.rollout_events import read_rollout_events
from verl_ext.config_values import ConfigError
from verl_ext.cpu_runtime.rollout_server import CPURolloutServer, RolloutWeightsUnavailable, check_engine_options
from verl_ext.cpu_runtime.weight_checksum import combine_digests, tensor_digest, weight_checksum

PROMPT_LENGTH = 16  # the rollout config's prompt_length (make_server)
SAMPLING = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}


def make_server(tiny_assets, tmp_path, free_cache_engine=True, mode="hybrid"):
    from verl.workers.config import HFModelConfig, RolloutConfig
    from verl.workers.rollout.replica import RolloutMode

    config = RolloutConfig(
        name="cpu",
        tensor_model_parallel_size=1,
        dtype="float32",
        prompt_length=PROMPT_LENGTH,
        response_length=12,
        free_cache_engine=free_cache_engine,
        engine_kwargs={"cpu": {"event_log": str(tmp_path / "events.jsonl"), "batch_wait_seconds": 0.0}},
    )
    model_config = HFModelConfig(path=str(tiny_assets / "model"))
    return CPURolloutServer(config, model_config, rollout_mode=RolloutMode(mode), replica_rank=0)


def trainer_weights(tiny_assets, seed=None):
    """What the trainer would push: the checkpoint's weights, optionally perturbed (a training step)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_assets / "model"), dtype=torch.float32)
    state = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    if seed is not None:
        generator = torch.Generator().manual_seed(seed)
        state = {name: t + 0.01 * torch.randn(t.shape, generator=generator) for name, t in state.items()}
    return model, state


async def push(server, state, version):
    """A weight push as CPUServerAdapter sends it: begin, buckets, finish with the sender's checksum."""
    await server.begin_weight_update()
    items = list(state.items())
    await server.load_weight_bucket(items[: len(items) // 2])
    await server.load_weight_bucket(items[len(items) // 2 :])
    sent = combine_digests({name: tensor_digest(name, tensor) for name, tensor in items})
    return await server.finish_weight_update(global_steps=version, sent_checksum=sent)


def prompt_ids(tiny_assets, text="count 3"):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_assets / "model"))
    return tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True)[
        "input_ids"
    ]


def test_weight_lifecycle_follows_colocated_vllm(tiny_assets, tmp_path):
    async def scenario():
        server = make_server(tiny_assets, tmp_path)
        prompt = prompt_ids(tiny_assets)
        # dummy weights (load_format=dummy) are not usable
        with pytest.raises(RolloutWeightsUnavailable, match="dummy weights"):
            await server.generate(prompt, dict(SAMPLING), "r0")

        _, state = trainer_weights(tiny_assets)
        first = await push(server, state, version=0)
        assert first["weight_checksum"] == weight_checksum(server.model.named_parameters())
        output = await server.generate(prompt, dict(SAMPLING), "r1")
        assert output.extra_fields == {"global_steps": 0, "weight_checksum": first["weight_checksum"]}

        # sleep in hybrid mode with free_cache_engine discards the weights (vLLM level 2)
        await server.sleep()
        assert server.weight_state()["weights"] == "discarded"
        assert all(p.numel() == 0 for p in server.model.parameters())
        with pytest.raises(RolloutWeightsUnavailable, match="asleep"):
            await server.generate(prompt, dict(SAMPLING), "r2")
        with pytest.raises(RolloutWeightsUnavailable, match="before wake_up"):
            await server.begin_weight_update()

        # waking the weights re-allocates them but does not restore them
        await server.wake_up(tags=["weights"])
        await server.wake_up(tags=["kv_cache"])
        with pytest.raises(RolloutWeightsUnavailable, match="has not filled them"):
            await server.generate(prompt, dict(SAMPLING), "r3")

        _, trained = trainer_weights(tiny_assets, seed=1)
        second = await push(server, trained, version=1)
        assert second["weight_checksum"] != first["weight_checksum"]
        assert second["previous_checksum"] is None  # nothing survived the sleep
        output = await server.generate(prompt, dict(SAMPLING), "r4")
        assert output.extra_fields["global_steps"] == 1

        events = read_rollout_events(tmp_path / "events.jsonl")
        assert [e["event"] for e in events] == [
            "initialized", "generate_rejected", "update_weights", "sleep", "generate_rejected",
            "wake_up", "wake_up", "generate_rejected", "update_weights",
        ]
        pushes = [e for e in events if e["event"] == "update_weights"]
        assert [p["weight_version"] for p in pushes] == [0, 1]
        assert pushes[1]["requests_served"] == 0 and events[3]["requests_served"] == 1
        assert pushes[1]["batches_generated"] == 0 and events[3]["batches_generated"] == 1

    asyncio.run(scenario())


def test_incomplete_or_corrupted_push_is_refused(tiny_assets, tmp_path):
    async def scenario():
        server = make_server(tiny_assets, tmp_path)
        _, state = trainer_weights(tiny_assets)
        items = list(state.items())
        await server.begin_weight_update()
        await server.load_weight_bucket(items[:3])
        sent = combine_digests({n: tensor_digest(n, t) for n, t in items[:3]})
        with pytest.raises(RolloutWeightsUnavailable, match="uninitialised"):
            await server.finish_weight_update(global_steps=0, sent_checksum=sent)

        await server.begin_weight_update()
        await server.load_weight_bucket(items)
        with pytest.raises(RuntimeError, match="corrupted"):
            await server.finish_weight_update(global_steps=0, sent_checksum="0" * 16)

        await server.begin_weight_update()
        with pytest.raises(KeyError, match="not a weight"):
            await server.load_weight_bucket([("model.no_such.weight", torch.zeros(1))])

    asyncio.run(scenario())


def test_log_probs_are_the_models_own(tiny_assets, tmp_path):
    """Reported log-probs equal log_softmax(logits / T) of an independent forward pass over prompt+response."""

    async def scenario():
        server = make_server(tiny_assets, tmp_path)
        model, state = trainer_weights(tiny_assets, seed=3)
        model.load_state_dict(state)
        await push(server, state, version=0)
        prompts = [prompt_ids(tiny_assets, f"count {n}") for n in (1, 3, 5)]
        temperature = 0.7
        sampling = dict(SAMPLING, temperature=temperature)
        outputs = await asyncio.gather(*[server.generate(p, dict(sampling), f"r{i}") for i, p in enumerate(prompts)])
        for prompt, output in zip(prompts, outputs):
            response = output.token_ids
            assert 1 <= len(response) <= 12 and len(output.log_probs) == len(response)
            with torch.no_grad():
                logits = model(torch.tensor([prompt + response])).logits[0, len(prompt) - 1 : -1]
            expected = torch.log_softmax(logits / temperature, -1).gather(-1, torch.tensor(response)[:, None]).squeeze(-1)
            assert torch.allclose(torch.tensor(output.log_probs), expected, atol=1e-5)

    asyncio.run(scenario())


def test_sleep_keeps_weights_without_free_cache_engine_or_in_colocated_mode(tiny_assets, tmp_path):
    async def scenario():
        for kwargs in ({"free_cache_engine": False}, {"mode": "colocated"}):
            server = make_server(tiny_assets, tmp_path, **kwargs)
            _, state = trainer_weights(tiny_assets)
            pushed = await push(server, state, version=0)
            await server.sleep()
            await server.wake_up()
            assert server.weight_state()["weight_checksum"] == pushed["weight_checksum"]
            output = await server.generate(prompt_ids(tiny_assets), dict(SAMPLING), "r")
            assert output.token_ids

    asyncio.run(scenario())


def test_unsupported_sampling_parameters_are_named(tiny_assets, tmp_path):
    async def scenario():
        server = make_server(tiny_assets, tmp_path)
        with pytest.raises(ValueError, match="presence_penalty"):
            await server.generate(prompt_ids(tiny_assets), dict(SAMPLING, presence_penalty=0.5), "r")

    asyncio.run(scenario())


def test_event_log_lines_are_json(tiny_assets, tmp_path):
    make_server(tiny_assets, tmp_path)
    lines = (tmp_path / "events.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["event"] == "initialized"


def test_server_options_are_checked_naming_the_key():
    check_engine_options({"event_log": "/tmp/x.jsonl", "attn_implementation": "eager", "max_batch_size": 4,
                          "batch_wait_seconds": 0})
    key = "actor_rollout_ref.rollout.engine_kwargs.cpu"
    for options, message in (
        ({"max_batch_size": 0}, f"{key}.max_batch_size=0 is invalid: allowed values are an integer >= 1"),
        ({"max_batch_size": 2.5}, f"{key}.max_batch_size=2.5 is invalid"),
        ({"max_batch_size": True}, f"{key}.max_batch_size=True is invalid"),
        ({"batch_wait_seconds": -1}, f"{key}.batch_wait_seconds=-1 is invalid"),
        ({"batch_wait_seconds": float("nan")}, f"{key}.batch_wait_seconds=nan is invalid"),
        ({"attn_implementation": "flash_attention_2"}, f"{key}.attn_implementation='flash_attention_2' is invalid"),
        ({"batch_size": 8}, f"{key}.batch_size=8 is invalid: allowed values are one of the options event_log"),
    ):
        with pytest.raises(ConfigError) as error:
            check_engine_options(options)
        assert message in str(error.value)
