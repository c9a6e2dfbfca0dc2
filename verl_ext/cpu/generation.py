"""Token-in, token-out generation with ``transformers`` ``generate()`` and the log-prob of each token.

Concurrent requests are generated together: one left-padded ``generate()`` call per batch of requests
that share their sampling parameters.

For a prompt ``x`` and sampled response ``y_1..y_T`` the rollout reports, per generated token,

    log pi(y_t | x, y_<t) = log_softmax(z_t / tau)[y_t]        (tau = temperature; tau = 1 when greedy)

where ``z_t`` are the model's raw logits at step ``t``: the same quantity verl's actor recomputes
(``logits / temperature`` then log-softmax), so rollout and actor log-probs agree up to floating-point
error when both run the same weights in the same dtype. Top-k / top-p restrict which tokens can be drawn
but, as with the actor, are not folded into the reported log-prob.

The number of new tokens follows vLLM's rule in verl's vLLM server: ``max_tokens`` from the request if
given, else ``min(response_length, prompt_length + response_length - len(prompt))``, clamped to
``[1, max_model_len - len(prompt)]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from transformers import GenerationConfig, PreTrainedModel


@dataclass(frozen=True)
class SamplingRequest:
    """The sampling parameters of one request, in verl's (vLLM-style) conventions."""

    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1  # -1 or 0: no top-k restriction
    repetition_penalty: float = 1.0
    return_log_probs: bool = True

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


@dataclass(frozen=True)
class GenerationResult:
    token_ids: list[int]
    log_probs: list[float] | None
    finish_reason: str  # "stop" (an end-of-sequence token was generated) or "length"


# Sampling parameters this backend does not implement, with the values that mean "not used".
NEUTRAL_VALUES_OF_UNSUPPORTED_KEYS = {
    "n": (None, 1),
    "best_of": (None, 1),
    "presence_penalty": (None, 0, 0.0),
    "frequency_penalty": (None, 0, 0.0),
    "min_p": (None, 0, 0.0),
    "stop": (None, [], ()),
    "stop_token_ids": (None, [], ()),
}


def sampling_request_from_params(
    sampling_params: dict[str, Any],
    *,
    prompt_length_tokens: int,
    configured_prompt_length: int,
    configured_response_length: int,
    max_model_len: int,
) -> SamplingRequest:
    """Build a :class:`SamplingRequest` from the ``sampling_params`` dict verl's agent loop sends."""
    params = dict(sampling_params)
    headroom = max_model_len - prompt_length_tokens
    if headroom < 1:
        raise ValueError(
            f"prompt of {prompt_length_tokens} tokens leaves no room to generate within max_model_len={max_model_len}"
        )
    if "max_tokens" in params:
        max_tokens = int(params.pop("max_tokens"))
    elif "max_new_tokens" in params:
        max_tokens = int(params.pop("max_new_tokens"))
    else:
        max_tokens = min(
            configured_response_length, configured_prompt_length + configured_response_length - prompt_length_tokens
        )
    max_tokens = max(1, min(max_tokens, headroom))
    unsupported = {
        key: params[key]
        for key, neutral in NEUTRAL_VALUES_OF_UNSUPPORTED_KEYS.items()
        if key in params and params[key] not in neutral
    }
    if unsupported:
        raise ValueError(
            f"CPU rollout: unsupported sampling parameters {unsupported}; supported: temperature, top_p, top_k, "
            "repetition_penalty, logprobs, max_tokens (a per-request seed is ignored: the server's seed is used)"
        )
    return SamplingRequest(
        max_new_tokens=max_tokens,
        temperature=float(params.get("temperature", 1.0)),
        top_p=float(params.get("top_p", 1.0)),
        top_k=int(params.get("top_k", -1) or -1),
        repetition_penalty=float(params.get("repetition_penalty", 1.0) or 1.0),
        return_log_probs=bool(params.get("logprobs", True)),
    )


def sampling_key(request: SamplingRequest) -> tuple:
    """Requests with equal keys can share one batched ``generate()`` call (everything but the length)."""
    return (request.greedy, request.temperature, request.top_p, request.top_k, request.repetition_penalty)


@torch.no_grad()
def generate_batch_with_log_probs(
    model: PreTrainedModel,
    prompts: list[list[int]],
    requests: list[SamplingRequest],
    *,
    eos_token_ids: list[int],
    pad_token_id: int,
) -> list[GenerationResult]:
    """Generate one response per prompt in a single left-padded ``model.generate`` call.

    All requests must share :func:`sampling_key`; each response is cut at its own ``max_new_tokens`` and
    after its first end-of-sequence token. Left padding with an attention mask gives the same logits as
    generating each prompt alone (up to float rounding, ~1e-7 in float32).
    """
    if not prompts or len(prompts) != len(requests):
        raise ValueError(f"need one request per prompt, got {len(prompts)} prompts and {len(requests)} requests")
    keys = {sampling_key(request) for request in requests}
    if len(keys) != 1:
        raise ValueError(f"a batch must share its sampling parameters, got {sorted(keys)}")
    first = requests[0]
    width = max(len(prompt) for prompt in prompts)
    input_ids = torch.tensor([[pad_token_id] * (width - len(p)) + list(p) for p in prompts], dtype=torch.long)
    attention_mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], dtype=torch.long)
    generation_config = GenerationConfig(
        do_sample=not first.greedy,
        temperature=first.temperature if not first.greedy else None,
        top_p=first.top_p if not first.greedy and first.top_p < 1.0 else None,
        top_k=first.top_k if not first.greedy and first.top_k > 0 else None,
        repetition_penalty=first.repetition_penalty if first.repetition_penalty != 1.0 else None,
        max_new_tokens=max(request.max_new_tokens for request in requests),
        eos_token_id=list(eos_token_ids),
        pad_token_id=pad_token_id,
        output_logits=True,
        return_dict_in_generate=True,
    )
    output = model.generate(input_ids=input_ids, attention_mask=attention_mask, generation_config=generation_config)
    new_tokens = output.sequences[:, width:]
    logits = torch.stack(output.logits, dim=1).float()
    scale = 1.0 if first.greedy else first.temperature
    results = []
    for row, request in enumerate(requests):
        token_ids = new_tokens[row, : request.max_new_tokens].tolist()
        finish_reason = "length"
        for position, token in enumerate(token_ids):
            if token in eos_token_ids:
                token_ids, finish_reason = token_ids[: position + 1], "stop"
                break
        log_probs = None
        if request.return_log_probs:
            row_log_probs = torch.log_softmax(logits[row, : len(token_ids)] / scale, dim=-1)
            chosen = torch.tensor(token_ids, dtype=torch.long).unsqueeze(-1)
            log_probs = row_log_probs.gather(-1, chosen).squeeze(-1).tolist()
        results.append(GenerationResult(token_ids=token_ids, log_probs=log_probs, finish_reason=finish_reason))
    return results
