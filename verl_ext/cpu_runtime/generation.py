"""Token-in, token-out generation with ``transformers`` ``generate()``, per-request seeded sampling.

For a prompt ``x`` and sampled response ``y_1..y_T`` the rollout reports, per generated token,

    log pi(y_t | x, y_<t) = log_softmax(z_t / tau)[y_t]        (tau = temperature; tau = 1 when greedy)

where ``z_t`` are the model's raw logits at step ``t``: the same quantity verl's actor recomputes
(``logits / temperature`` then log-softmax), so rollout and actor log-probs agree up to floating-point
error when both run the same weights in the same dtype. Repetition penalty, top-k and top-p restrict or
reshape what can be drawn but, as with the actor, are not folded into the reported log-prob.

Sampling (:func:`next_token`). Each request has its own ``torch.Generator`` (seeded with the request's
``seed``, :mod:`verl_ext.seeding`), and token t of a response is drawn by inverse CDF from the t-th
uniform of that generator:

    z' = repetition_penalty(z_t, prompt and response so far)      (vLLM's rule: z/p if z > 0 else z*p)
    q  = softmax(z' / tau) in float64, restricted to the top-k and then to the top-p nucleus, renormalised
    u  ~ U[0, 1) from the request's generator;   y_t = min { i : sum_{j<=i} q_j > u }

(greedy, ``tau = 0``: ``y_t = argmax z'``, first index on ties). A request's tokens therefore depend on
its prompt, its seed and the logits, never on which requests arrive before it or share its batch.

Batching, bit for bit. Requests sharing their sampling parameters are generated together, and a
request's tokens and log-probs are the same bits whatever shares its batch. What moves a row's bits is
the *shape* of the forward pass, not its neighbours' values (measured on the tiny model, torch 2.11's MKL
on AVX-512): a linear layer's row comes out of another GEMM kernel depending on the number of rows M (a
decode step, M = the batch size, gives one result for M = 3..9, another for M >= 12, others for M = 1
and 2); the padding in front of a prompt changes the attention's reduction (up to 2e-7 in a logit from
one more pad column); and with several threads MKL splits M over them, so the kernel a row meets depends
on the thread count and the row (3 threads: other bits at M = 1, and at row 21 of 32, the last of the
second thread's share). So every forward pass has one fixed shape and runs on one thread
(:func:`generate_batch_with_log_probs`):

- ``rows`` rows: the batch is filled up with inert rows (one pad token, ended at once);
- prompts left-padded to ``width`` tokens, a function of the prompt's own length only
  (:func:`prompt_width`: a multiple of the configured prompt length, plus one pad column, so that every
  batch is padded and transformers never drops the attention mask for an unpadded one, which would switch
  SDPA to its ``is_causal`` path);
- one intra-op thread (:data:`GENERATION_THREADS`; a Ray actor has one already, ``OMP_NUM_THREADS=1``).

Then a row's arithmetic depends on its own tokens only (``tests/cpu/test_seeded_sampling.py``: rows at
random positions and at the rows where a thread split falls, beside prompts of other lengths, seeds and
budgets, under 1 to 3 caller threads, equal to the request alone, bit for bit). What fixes the bits is
(prompt, seed, weights, ``rows``, the configured prompt length) and the machine's kernels; the rollout
server's ``max_batch_size`` is ``rows``. The inert rows cost little, the tiny model's forward pass being
overhead-bound (``benchmarks/bench_cpu_backend.py``, CPU time): one request in 32 rows 37 ms, in one row
23 ms; 32 requests in one batch 51 ms, one at a time in one row each 0.66 s.

The number of new tokens follows vLLM's rule in verl's vLLM server: ``max_tokens`` from the request if
given, else ``min(response_length, prompt_length + response_length - len(prompt))``, clamped to
``[1, max_model_len - len(prompt)]``.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Optional, Sequence

import torch
from transformers import GenerationConfig, LogitsProcessor, LogitsProcessorList, PreTrainedModel


@dataclass(frozen=True)
class SamplingRequest:
    """The sampling parameters of one request, in verl's (vLLM-style) conventions."""

    max_new_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1  # -1 or 0: no top-k restriction
    repetition_penalty: float = 1.0
    return_log_probs: bool = True
    seed: Optional[int] = None  # the request's own sampling seed (None: the server draws one, see rollout_server)

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
MAX_SEED = 2**63 - 1  # what torch.Generator.manual_seed takes without wrapping (vLLM's seed is an int too)
GENERATION_THREADS = 1  # intra-op threads of every generation forward pass (the bits depend on it, see above)


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
            "repetition_penalty, logprobs, max_tokens, seed"
        )
    seed = params.get("seed")
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int) and not hasattr(seed, "__index__"):
            raise ValueError(f"CPU rollout: sampling parameter seed must be an integer in [0, 2^63), got {seed!r}")
        seed = int(seed)
        if not 0 <= seed <= MAX_SEED:
            raise ValueError(f"CPU rollout: sampling parameter seed must be in [0, 2^63), got {seed}")
    return SamplingRequest(
        max_new_tokens=max_tokens,
        temperature=float(params.get("temperature", 1.0)),
        top_p=float(params.get("top_p", 1.0)),
        top_k=int(params.get("top_k", -1) or -1),
        repetition_penalty=float(params.get("repetition_penalty", 1.0) or 1.0),
        return_log_probs=bool(params.get("logprobs", True)),
        seed=seed,
    )


def sampling_key(request: SamplingRequest) -> tuple:
    """Requests with equal keys can share one batched ``generate()`` call (everything but length and seed)."""
    return (request.greedy, request.temperature, request.top_p, request.top_k, request.repetition_penalty)


# ---------------------------------------------------------------------------------------------- sampling


def apply_repetition_penalty(logits: torch.Tensor, seen_token_ids: torch.Tensor, penalty: float) -> torch.Tensor:
    """vLLM's (and HF's) repetition penalty: for every token id in ``seen_token_ids``, z/p if z > 0 else z*p."""
    if penalty == 1.0 or seen_token_ids.numel() == 0:
        return logits
    seen = torch.unique(seen_token_ids)
    values = logits[seen]
    out = logits.clone()
    out[seen] = torch.where(values > 0, values / penalty, values * penalty)
    return out


def sampling_distribution(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """q (float64, over the vocabulary): softmax(z / tau), kept to the top-k, then to the top-p nucleus, renormalised.

    Top-k keeps every token whose logit is at least the k-th largest (ties at the boundary stay). Top-p
    keeps, in decreasing probability (a stable sort: lower token id first on ties), each token whose
    preceding mass is below ``top_p`` -- the smallest such prefix with mass >= top_p; the first is always kept.
    """
    scaled = logits.to(torch.float64) / temperature
    vocabulary = scaled.numel()
    if 0 < top_k < vocabulary:
        kth = torch.topk(scaled, top_k).values[-1]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    probs = torch.softmax(scaled, dim=-1)
    if top_p < 1.0:
        order = torch.sort(probs, descending=True, stable=True).indices
        sorted_probs = probs[order]
        mass_before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
        keep_sorted = mass_before < top_p
        keep_sorted[0] = True
        keep = torch.zeros_like(keep_sorted).scatter_(0, order, keep_sorted)
        probs = torch.where(keep, probs, torch.zeros_like(probs))
    return probs / probs.sum()


def draw_from(probs: torch.Tensor, generator: torch.Generator) -> int:
    """Inverse-CDF draw of one token from ``probs`` with one uniform of ``generator``."""
    cdf = torch.cumsum(probs, dim=-1)
    u = torch.rand((), generator=generator, dtype=torch.float64) * cdf[-1]
    return int(torch.searchsorted(cdf, u.reshape(1), right=True).clamp_max(probs.numel() - 1))


def next_token(
    logits: torch.Tensor, seen_token_ids: torch.Tensor, request: SamplingRequest, generator: torch.Generator
) -> int:
    """The next token of one request from its raw logits (see the module docstring)."""
    penalised = apply_repetition_penalty(logits, seen_token_ids, request.repetition_penalty)
    if request.greedy:
        return int(torch.argmax(penalised))
    probs = sampling_distribution(penalised, request.temperature, request.top_k, request.top_p)
    return draw_from(probs, generator)


class PerRequestSampler(LogitsProcessor):
    """Chooses each row's next token with :func:`next_token` and the row's own generator, and hands
    ``generate()`` (run greedy) scores whose only finite entry is that token.

    ``prompt_starts[row]``: where the row's prompt begins in the left-padded ``input_ids`` (the
    repetition penalty sees the prompt and the response so far, never the padding). Rows past the
    requests are inert (they fill the batch to its fixed shape): they end at once with ``end_token``.
    """

    def __init__(
        self,
        requests: Sequence[SamplingRequest],
        generators: Sequence[torch.Generator],
        prompt_starts: Sequence[int],
        end_token: int,
    ):
        self.requests = list(requests)
        self.generators = list(generators)
        self.prompt_starts = list(prompt_starts)
        self.end_token = end_token

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        chosen = torch.full_like(scores, float("-inf"))
        for row, (request, generator, start) in enumerate(zip(self.requests, self.generators, self.prompt_starts)):
            token = next_token(scores[row], input_ids[row, start:], request, generator)
            chosen[row, token] = 0.0
        chosen[len(self.requests) :, self.end_token] = 0.0
        return chosen


def request_generator(request: SamplingRequest) -> torch.Generator:
    """The request's own generator, seeded with its seed (a greedy request draws nothing and needs none)."""
    if request.seed is None:
        if request.greedy:
            return torch.Generator()
        raise ValueError("a sampled request needs a seed (the rollout server gives one to a request without)")
    return torch.Generator().manual_seed(request.seed)


def prompt_width(prompt_tokens: int, prompt_length: int) -> int:
    """The width a prompt of ``prompt_tokens`` tokens is left-padded to: the smallest multiple of the
    configured ``prompt_length`` that holds it, plus one pad column (see the module docstring). A function
    of the prompt's own length only, so its neighbours never change it."""
    if prompt_length < 1:
        raise ValueError(f"the configured prompt length must be at least 1, got {prompt_length}")
    return -(-max(prompt_tokens, 1) // prompt_length) * prompt_length + 1


@contextmanager
def intra_op_threads(count: int) -> Iterator[None]:
    """Run torch's intra-op work of the block on ``count`` threads (the previous count is restored)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@torch.no_grad()
def generate_batch_with_log_probs(
    model: PreTrainedModel,
    prompts: list[list[int]],
    requests: list[SamplingRequest],
    *,
    eos_token_ids: list[int],
    pad_token_id: int,
    rows: int,
    width: int,
) -> list[GenerationResult]:
    """Generate one response per prompt in a single ``model.generate`` call of a fixed shape: ``rows``
    rows (inert rows fill what the prompts leave), every prompt left-padded to ``width`` tokens, on
    :data:`GENERATION_THREADS` threads. A request's tokens and log-probs depend on its prompt, its seed,
    the weights, ``rows`` and ``width``, not on the other prompts (see the module docstring).

    All requests must share :func:`sampling_key`, and sampled ones carry a seed; each response is cut at its own
    ``max_new_tokens`` and after its first end-of-sequence token.
    """
    if not prompts or len(prompts) != len(requests):
        raise ValueError(f"need one request per prompt, got {len(prompts)} prompts and {len(requests)} requests")
    if len(prompts) > rows:
        raise ValueError(f"{len(prompts)} prompts do not fit a batch of {rows} rows")
    longest = max(len(prompt) for prompt in prompts)
    if longest > width:
        raise ValueError(f"a prompt of {longest} tokens does not fit the batch width of {width}")
    keys = {sampling_key(request) for request in requests}
    if len(keys) != 1:
        raise ValueError(f"a batch must share its sampling parameters, got {sorted(keys)}")
    filled = [list(prompt) for prompt in prompts] + [[pad_token_id]] * (rows - len(prompts))
    input_ids = torch.tensor([[pad_token_id] * (width - len(p)) + p for p in filled], dtype=torch.long)
    attention_mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in filled], dtype=torch.long)
    sampler = PerRequestSampler(
        requests,
        [request_generator(request) for request in requests],
        [width - len(p) for p in prompts],
        end_token=eos_token_ids[0],
    )
    generation_config = GenerationConfig(
        do_sample=False,  # the token is chosen by PerRequestSampler; generate() takes its only finite score
        max_new_tokens=max(request.max_new_tokens for request in requests),
        eos_token_id=list(eos_token_ids),
        pad_token_id=pad_token_id,
        output_logits=True,
        return_dict_in_generate=True,
    )
    with intra_op_threads(GENERATION_THREADS):
        output = model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            generation_config=generation_config,
            logits_processor=LogitsProcessorList([sampler]),
        )
        return _results(output, requests, width, eos_token_ids)


def _results(output: Any, requests: list[SamplingRequest], width: int, eos_token_ids: list[int]) -> list[GenerationResult]:
    """Each request's tokens (cut at its budget and first end-of-sequence token) and their log-probs."""
    new_tokens = output.sequences[:, width:]
    logits = torch.stack(output.logits, dim=1).float()
    scale = 1.0 if requests[0].greedy else requests[0].temperature
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
