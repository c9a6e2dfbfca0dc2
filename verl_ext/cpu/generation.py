"""Token-in, token-out generation with ``transformers`` ``generate()`` and the log-prob of each token.

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


@torch.no_grad()
def generate_with_log_probs(
    model: PreTrainedModel,
    prompt_ids: list[int],
    request: SamplingRequest,
    *,
    eos_token_ids: list[int],
    pad_token_id: int,
) -> GenerationResult:
    """Generate one response with ``model.generate`` and report each generated token's log-prob."""
    input_ids = torch.tensor([prompt_ids], dtype=torch.long)
    generation_config = GenerationConfig(
        do_sample=not request.greedy,
        temperature=request.temperature if not request.greedy else None,
        top_p=request.top_p if not request.greedy and request.top_p < 1.0 else None,
        top_k=request.top_k if not request.greedy and request.top_k > 0 else None,
        repetition_penalty=request.repetition_penalty if request.repetition_penalty != 1.0 else None,
        max_new_tokens=request.max_new_tokens,
        eos_token_id=list(eos_token_ids),
        pad_token_id=pad_token_id,
        output_logits=True,
        return_dict_in_generate=True,
    )
    output = model.generate(
        input_ids=input_ids,
        attention_mask=torch.ones_like(input_ids),
        generation_config=generation_config,
    )
    token_ids = output.sequences[0, input_ids.shape[1] :].tolist()
    # generate() stops a batch of one at its first end-of-sequence token: nothing follows it.
    finish_reason = "stop" if token_ids and token_ids[-1] in eos_token_ids else "length"
    log_probs = None
    if request.return_log_probs:
        logits = torch.stack(output.logits, dim=1)[0, : len(token_ids)].float()
        scale = 1.0 if request.greedy else request.temperature
        token_log_probs = torch.log_softmax(logits / scale, dim=-1)
        chosen = torch.tensor(token_ids, dtype=torch.long).unsqueeze(-1)
        log_probs = token_log_probs.gather(-1, chosen).squeeze(-1).tolist()
    return GenerationResult(token_ids=token_ids, log_probs=log_probs, finish_reason=finish_reason)
