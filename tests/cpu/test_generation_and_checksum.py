"""Generation rules (vLLM's token budget, batching, greedy) and the weight checksum's properties."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from verl_ext.cpu_runtime.generation import (
    SamplingRequest,
    generate_batch_with_log_probs,
    prompt_width,
    sampling_request_from_params,
)
from verl_ext.cpu_runtime.weight_checksum import weight_checksum

BUDGET = dict(configured_prompt_length=16, configured_response_length=12, max_model_len=128)
SHAPE = dict(rows=4, width=17)  # a batch of 4 rows, prompts (11 tokens here) padded to 17


def test_token_budget_follows_verls_vllm_server():
    assert sampling_request_from_params({}, prompt_length_tokens=11, **BUDGET).max_new_tokens == 12
    # a long prompt eats into the response budget: prompt_length + response_length - len(prompt)
    assert sampling_request_from_params({}, prompt_length_tokens=20, **BUDGET).max_new_tokens == 8
    assert sampling_request_from_params({"max_tokens": 3}, prompt_length_tokens=11, **BUDGET).max_new_tokens == 3
    # never past the model's context, never below one token
    near_end = dict(BUDGET, max_model_len=13)
    assert sampling_request_from_params({"max_tokens": 50}, prompt_length_tokens=11, **near_end).max_new_tokens == 2
    assert sampling_request_from_params({"max_tokens": 0}, prompt_length_tokens=11, **BUDGET).max_new_tokens == 1
    with pytest.raises(ValueError, match="no room"):
        sampling_request_from_params({}, prompt_length_tokens=128, **BUDGET)


def test_vllm_style_parameters_are_read():
    request = sampling_request_from_params(
        {"temperature": 0.5, "top_p": 0.9, "top_k": -1, "logprobs": False, "n": 1, "seed": 7},
        prompt_length_tokens=11,
        **BUDGET,
    )
    assert (request.temperature, request.top_p, request.top_k, request.return_log_probs) == (0.5, 0.9, -1, False)
    with pytest.raises(ValueError, match="stop"):
        sampling_request_from_params({"stop": ["\n"]}, prompt_length_tokens=11, **BUDGET)


@pytest.fixture(scope="module")
def tiny_model(tiny_assets):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_assets / "model"))
    model = AutoModelForCausalLM.from_pretrained(str(tiny_assets / "model"), dtype=torch.float32).eval()
    prompts = [
        tokenizer.apply_chat_template([{"role": "user", "content": f"count {n}"}], add_generation_prompt=True, tokenize=True)[
            "input_ids"
        ]
        for n in (1, 4)
    ]
    return model, tokenizer, prompts


def test_batch_cuts_each_response_at_its_budget_and_eos(tiny_model):
    model, tokenizer, prompts = tiny_model
    eos = [tokenizer.eos_token_id, tokenizer.pad_token_id]
    results = generate_batch_with_log_probs(
        model, prompts, [SamplingRequest(max_new_tokens=3, seed=0), SamplingRequest(max_new_tokens=12, seed=1)],
        eos_token_ids=eos, pad_token_id=tokenizer.pad_token_id, **SHAPE,
    )
    assert len(results) == 2  # the inert rows that fill the batch are not results
    assert len(results[0].token_ids) <= 3
    for result in results:
        assert len(result.log_probs) == len(result.token_ids)
        stops = [i for i, token in enumerate(result.token_ids) if token in eos]
        assert stops in ([], [len(result.token_ids) - 1])
        assert result.finish_reason == ("stop" if stops else "length")


def test_greedy_takes_the_argmax_and_reports_untempered_log_probs(tiny_model):
    model, tokenizer, prompts = tiny_model
    request = SamplingRequest(max_new_tokens=4, temperature=0.0)
    (result,) = generate_batch_with_log_probs(
        model, prompts[:1], [request], eos_token_ids=[tokenizer.eos_token_id], pad_token_id=tokenizer.pad_token_id,
        **SHAPE,
    )
    with torch.no_grad():
        logits = model(torch.tensor([prompts[0] + result.token_ids])).logits[0, len(prompts[0]) - 1 : -1]
    assert result.token_ids == logits.argmax(-1).tolist()
    expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(result.token_ids)[:, None]).squeeze(-1)
    assert torch.allclose(torch.tensor(result.log_probs), expected, atol=1e-5)


def test_a_batch_must_share_its_sampling_parameters(tiny_model):
    model, tokenizer, prompts = tiny_model
    with pytest.raises(ValueError, match="share"):
        generate_batch_with_log_probs(
            model, prompts, [SamplingRequest(4, temperature=1.0, seed=0), SamplingRequest(4, temperature=0.5, seed=1)],
            eos_token_ids=[tokenizer.eos_token_id], pad_token_id=tokenizer.pad_token_id, **SHAPE,
        )


def test_a_batch_has_a_fixed_shape(tiny_model):
    """The width of a prompt depends on its own length only (always one pad column at least); a batch
    takes no more prompts than its rows, and no prompt wider than its width."""
    assert [prompt_width(n, 16) for n in (0, 1, 11, 15, 16, 17, 32, 33)] == [17, 17, 17, 17, 17, 33, 33, 49]
    with pytest.raises(ValueError, match="prompt length"):
        prompt_width(3, 0)
    model, tokenizer, prompts = tiny_model
    common = dict(eos_token_ids=[tokenizer.eos_token_id], pad_token_id=tokenizer.pad_token_id)
    requests = [SamplingRequest(4, seed=0), SamplingRequest(4, seed=1)]
    with pytest.raises(ValueError, match="2 prompts do not fit a batch of 1 rows"):
        generate_batch_with_log_probs(model, prompts, requests, rows=1, width=17, **common)
    with pytest.raises(ValueError, match="prompt of 11 tokens does not fit the batch width of 10"):
        generate_batch_with_log_probs(model, prompts, requests, rows=2, width=10, **common)


tensors = st.lists(st.floats(-1e3, 1e3, allow_nan=False, width=32), min_size=1, max_size=6)


@settings(max_examples=40, deadline=None)
@given(values=tensors, other=tensors, index=st.integers(0, 5))
def test_checksum_sees_any_change_and_ignores_order(values, other, index):
    a, b = torch.tensor(values), torch.tensor(other)
    assert weight_checksum({"a": a, "b": b}) == weight_checksum([("b", b), ("a", a)])
    changed = a.clone()
    position = index % changed.numel()
    changed[position] = torch.nextafter(changed[position], torch.tensor(float("inf")))
    assert weight_checksum({"a": changed, "b": b}) != weight_checksum({"a": a, "b": b})
    # names, dtypes and shapes count, not only the bytes
    assert weight_checksum({"c": a, "b": b}) != weight_checksum({"a": a, "b": b})
    assert weight_checksum({"a": a.double(), "b": b}) != weight_checksum({"a": a, "b": b})
    assert weight_checksum({"a": a.reshape(1, -1), "b": b}) != weight_checksum({"a": a, "b": b})


def test_checksum_of_bfloat16_weights():
    weights = {"w": torch.randn(3, 2).to(torch.bfloat16)}
    assert weight_checksum(weights) == weight_checksum({"w": weights["w"].clone()})
