"""The sizes of the offline assets ``verl-ext tiny-assets --size`` builds: model, tokenizer, task, folder.

=================  ==================================  ==========================  =========  ===================
size               model (:mod:`verl_ext.tiny.model`)  tokenizer                   task       default folder
=================  ==================================  ==========================  =========  ===================
``cpu``            2 layers, hidden 64 (126K params)   trained on the task, 45 ids counting   ``assets/tiny``
``gpu``            2 layers, hidden 256 (head_dim 64)  the same                    counting   ``assets/tiny-gpu``
``scale-cpu``      2 layers, hidden 128 (head_dim 64)  synthetic, 4,096 ids        letters    ``assets/scale-cpu``
``qwen2.5-0.5b``   Qwen2.5-0.5B's dimensions (494M)    synthetic, 151,936 ids      letters    ``assets/scale-qwen2.5-0.5b``
``qwen2.5-1.5b``   Qwen2.5-1.5B's dimensions (1.54B)   synthetic, 151,936 ids      letters    ``assets/scale-qwen2.5-1.5b``
=================  ==================================  ==========================  =========  ===================

The scale sizes (``qwen2.5-*``) are randomly initialised checkpoints of a real architecture's size, stored in
bfloat16 as Qwen2.5's are, with a task whose responses run to the configured length (:mod:`verl_ext.tiny.letters`);
``scale-cpu`` is the same builder at the CPU backend's size, to rehearse their runs. Pure data: importing this
module imports neither torch nor transformers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class TinyModelSize:
    """A Qwen2 model's dimensions (the fields of its config that differ between sizes)."""

    num_hidden_layers: int = 2
    hidden_size: int = 64
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    intermediate_size: int = 256
    max_position_embeddings: int = 128
    tie_word_embeddings: bool = True
    rope_theta: float = 10000.0


TINY_QWEN2 = TinyModelSize()
GPU_QWEN2 = TinyModelSize(hidden_size=256, num_attention_heads=4, num_key_value_heads=2, intermediate_size=1024,
                          max_position_embeddings=16384)
# Qwen2.5-0.5B and -1.5B (their config.json): layers, hidden, heads, KV heads, MLP, positions, tied embeddings, rope
QWEN25_05B = TinyModelSize(num_hidden_layers=24, hidden_size=896, num_attention_heads=14, num_key_value_heads=2,
                           intermediate_size=4864, max_position_embeddings=32768, rope_theta=1000000.0)
QWEN25_15B = TinyModelSize(num_hidden_layers=28, hidden_size=1536, num_attention_heads=12, num_key_value_heads=2,
                           intermediate_size=8960, max_position_embeddings=32768, rope_theta=1000000.0)
# the scale assets at the CPU backend's size: head_dim 64 as Qwen2.5's, 2 layers
SCALE_CPU_QWEN2 = TinyModelSize(num_hidden_layers=2, hidden_size=128, num_attention_heads=2, num_key_value_heads=1,
                                intermediate_size=512, max_position_embeddings=4096, rope_theta=1000000.0)


def head_dim(size: TinyModelSize) -> int:
    return size.hidden_size // size.num_attention_heads


COUNT_TASK, LETTERS_TASK = "count", "letters"
QWEN25_VOCAB = 151936  # Qwen2.5's embedding rows (config.json's vocab_size)


@dataclass(frozen=True)
class AssetsSize:
    """One ``--size``: the model's dimensions, the tokenizer (``vocab_size`` None: trained on the counting task;
    a number: :func:`verl_ext.tiny.tokenizer.build_synthetic_tokenizer` of that many ids), the task, the dtype
    the weights are stored in, and the default folder's name."""

    model: TinyModelSize
    folder: str
    task: str = COUNT_TASK
    vocab_size: Optional[int] = None
    dtype: str = "float32"
    description: str = ""

    @property
    def is_scale(self) -> bool:
        return self.task == LETTERS_TASK


SIZES = {
    "cpu": AssetsSize(TINY_QWEN2, "tiny", description="the CPU backend's model (head_dim 16)"),
    "gpu": AssetsSize(GPU_QWEN2, "tiny-gpu", description="head_dim 64, for vLLM"),
    "scale-cpu": AssetsSize(SCALE_CPU_QWEN2, "scale-cpu", LETTERS_TASK, 4096,
                            description="the scale assets' builder at the CPU backend's size (rehearsal, CI)"),
    "qwen2.5-0.5b": AssetsSize(QWEN25_05B, "scale-qwen2.5-0.5b", LETTERS_TASK, QWEN25_VOCAB, "bfloat16",
                               description="Qwen2.5-0.5B's dimensions, random weights (494M parameters)"),
    "qwen2.5-1.5b": AssetsSize(QWEN25_15B, "scale-qwen2.5-1.5b", LETTERS_TASK, QWEN25_VOCAB, "bfloat16",
                               description="Qwen2.5-1.5B's dimensions, random weights (1.54B parameters)"),
}
DEFAULT_SIZE = "cpu"


def assets_size(name: str) -> AssetsSize:
    if name not in SIZES:
        raise ValueError(f"tiny assets size {name!r} is unknown; allowed: {', '.join(SIZES)}")
    return SIZES[name]
