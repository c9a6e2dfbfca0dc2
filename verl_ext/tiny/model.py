"""The tiny assets' model: a randomly initialised Qwen2 causal LM small enough to train on two CPU cores.

Default size (:data:`TINY_QWEN2`): 2 layers, hidden size 64, 4 attention heads (2 key-value heads),
MLP width 256, tied input/output embeddings -- about 126K parameters over the 45-token vocabulary of
:mod:`verl_ext.tiny.tokenizer`. The ``gpu`` size (:data:`GPU_QWEN2`) is the same model with head
dimension 64 (hidden 256, 4 heads): vLLM's attention kernels (FlashAttention-3 on Hopper, Triton) need a
head dimension of at least 32, and the CPU size's is 16. Its 16K positions let the run scripts keep
their own prompt and response lengths in ``VERL_EXT_GPU_SMOKE=1`` runs (rotary positions: no weights). The same architecture class as Qwen2/Qwen2.5 checkpoints, so verl's
model-specific code paths (Qwen prompt builder, FSDP wrap policy over ``Qwen2DecoderLayer``) run.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM


@dataclass(frozen=True)
class TinyModelSize:
    num_hidden_layers: int = 2
    hidden_size: int = 64
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    intermediate_size: int = 256
    max_position_embeddings: int = 128


TINY_QWEN2 = TinyModelSize()
GPU_QWEN2 = TinyModelSize(hidden_size=256, num_attention_heads=4, num_key_value_heads=2, intermediate_size=1024,
                          max_position_embeddings=16384)
# --size of `python -m verl_ext.tiny.assets`
MODEL_SIZES = {"cpu": TINY_QWEN2, "gpu": GPU_QWEN2}


def head_dim(size: TinyModelSize) -> int:
    return size.hidden_size // size.num_attention_heads


def build_model(tokenizer: PreTrainedTokenizerFast, seed: int, size: TinyModelSize = TINY_QWEN2) -> Qwen2ForCausalLM:
    """A Qwen2 model with weights drawn from ``seed`` (same bits on every call with the same seed)."""
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        torch_dtype="float32",
        **asdict(size),
    )
    generator_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    finally:
        torch.random.set_rng_state(generator_state)
    model.generation_config = GenerationConfig(
        eos_token_id=[tokenizer.eos_token_id, tokenizer.pad_token_id],
        pad_token_id=tokenizer.pad_token_id,
        do_sample=True,
    )
    return model.to(torch.float32)


def count_parameters(model: torch.nn.Module) -> int:
    return sum(parameter.numel() for parameter in model.parameters())
