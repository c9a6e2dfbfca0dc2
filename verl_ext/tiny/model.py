"""The offline assets' model: a randomly initialised Qwen2 causal LM, from two CPU cores' size to Qwen2.5-1.5B's.

Default size (:data:`TINY_QWEN2`): 2 layers, hidden size 64, 4 attention heads (2 key-value heads),
MLP width 256, tied input/output embeddings -- about 126K parameters over the 45-token vocabulary of
:mod:`verl_ext.tiny.tokenizer`. The ``gpu`` size (:data:`GPU_QWEN2`) is the same model with head
dimension 64 (hidden 256, 4 heads): vLLM's attention kernels (FlashAttention-3 on Hopper, Triton) need a
head dimension of at least 32, and the CPU size's is 16. Its 16K positions let the run scripts keep
their own prompt and response lengths in ``VERL_EXT_GPU_SMOKE=1`` runs (rotary positions: no weights).

The scale sizes have a real checkpoint's dimensions, randomly initialised (:data:`QWEN25_05B`: Qwen2.5-0.5B's
24 layers, hidden 896, 14 query and 2 key-value heads, MLP 4864, tied embeddings, rope theta 1e6, 32K positions;
:data:`QWEN25_15B`: Qwen2.5-1.5B's), so that generation, training, the weight push and memory cost what they
cost at that size; with the synthetic vocabulary of :func:`verl_ext.tiny.tokenizer.build_synthetic_tokenizer`
sized to Qwen2.5's 151,936 ids, the parameter count is the checkpoint's (494,032,768 and 1,543,714,304).
:data:`SCALE_CPU_QWEN2` is the same builder at two cores' size, for rehearsing the scale runs on the CPU backend.

The same architecture class as Qwen2/Qwen2.5 checkpoints, so verl's model-specific code paths (Qwen prompt
builder, FSDP wrap policy over ``Qwen2DecoderLayer``) run.
"""

from __future__ import annotations

from dataclasses import asdict

import torch
from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from verl_ext.tiny.sizes import (  # noqa: F401 -- the dimensions, re-exported for the model's readers
    GPU_QWEN2, QWEN25_05B, QWEN25_15B, SCALE_CPU_QWEN2, TINY_QWEN2, TinyModelSize, head_dim,
)


def model_config(tokenizer: PreTrainedTokenizerFast, size: TinyModelSize, dtype: str = "float32") -> Qwen2Config:
    """The Qwen2 config of ``size`` over ``tokenizer``'s vocabulary (every id decodes: vocab = the tokenizer's length)."""
    return Qwen2Config(
        vocab_size=len(tokenizer),
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        torch_dtype=dtype,
        **asdict(size),
    )


def build_model(tokenizer: PreTrainedTokenizerFast, seed: int, size: TinyModelSize = TINY_QWEN2,
                dtype: str = "float32") -> Qwen2ForCausalLM:
    """A Qwen2 model with weights drawn from ``seed`` (same bits on every call with the same seed), in ``dtype``
    (drawn in float32, then cast)."""
    config = model_config(tokenizer, size, dtype)
    generator_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config).to(torch.float32)
    finally:
        torch.random.set_rng_state(generator_state)
    model.generation_config = GenerationConfig(
        eos_token_id=[tokenizer.eos_token_id, tokenizer.pad_token_id],
        pad_token_id=tokenizer.pad_token_id,
        do_sample=True,
    )
    return model.to(getattr(torch, dtype))


def count_parameters(model: torch.nn.Module) -> int:
    return sum(parameter.numel() for parameter in model.parameters())


def parameters_of(tokenizer: PreTrainedTokenizerFast, size: TinyModelSize) -> int:
    """The parameter count of ``size`` over ``tokenizer``'s vocabulary, without allocating a weight (meta device)."""
    with torch.device("meta"):
        return count_parameters(Qwen2ForCausalLM(model_config(tokenizer, size)))
