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

import math
from dataclasses import dataclass, fields
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

    def __post_init__(self) -> None:
        """Refuse (ValueError naming the field) dimensions that cannot form a Qwen2 model: a count that is not an
        integer >= 1, attention heads that do not divide the hidden size, key-value heads that do not divide the
        attention heads, an odd head dimension (rotary embeddings pair the dimensions), a rope theta that is not a
        finite number > 0."""
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name == "tie_word_embeddings":
                if not isinstance(value, bool):
                    raise ValueError(f"model size: tie_word_embeddings must be true or false, got {value!r}")
            elif item.name == "rope_theta":
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
                    raise ValueError(f"model size: rope_theta must be a finite number > 0, got {value!r}")
            elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"model size: {item.name} must be an integer >= 1, got {value!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"model size: num_attention_heads {self.num_attention_heads} does not divide hidden_size "
                             f"{self.hidden_size} (each head takes hidden_size / num_attention_heads dimensions)")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"model size: num_key_value_heads {self.num_key_value_heads} does not divide "
                             f"num_attention_heads {self.num_attention_heads} (grouped-query attention)")
        if (self.hidden_size // self.num_attention_heads) % 2:
            raise ValueError(f"model size: the head dimension hidden_size / num_attention_heads = "
                             f"{self.hidden_size // self.num_attention_heads} is odd (rotary embeddings need it even)")


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


def parameter_count(size: TinyModelSize, vocab_size: int) -> int:
    """The parameters of a Qwen2 causal LM of ``size`` over ``vocab_size`` ids, by arithmetic (no torch): embeddings
    (and an untied output layer), per layer the q/k/v projections with their biases, the output projection, the
    gated MLP and two norms, and the final norm. :func:`verl_ext.tiny.model.parameters_of` counts the same on the
    meta device."""
    hidden, kv = size.hidden_size, head_dim(size) * size.num_key_value_heads
    attention = (hidden * hidden + hidden) + 2 * (hidden * kv + kv) + hidden * hidden
    layer = attention + 3 * hidden * size.intermediate_size + 2 * hidden
    embeddings = vocab_size * hidden * (1 if size.tie_word_embeddings else 2)
    return embeddings + size.num_hidden_layers * layer + hidden


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
COUNT_TASK_VOCAB = 45  # the counting task's trained tokenizer (verl_ext.tiny.tokenizer)
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
BUILD_OVERHEAD_BYTES = 2**30  # torch, transformers and the tokenizer, beside the weights


def build_memory_bytes(spec: "AssetsSize") -> int:
    """An estimate of the memory a build of ``spec`` takes: the weights drawn in float32, plus their copy in the
    stored dtype while both are alive, plus :data:`BUILD_OVERHEAD_BYTES` (qwen2.5-1.5b: about 10 GB)."""
    parameters = parameter_count(spec.model, spec.vocab_size or COUNT_TASK_VOCAB)
    return parameters * (4 + (DTYPE_BYTES[spec.dtype] if spec.dtype != "float32" else 0)) + BUILD_OVERHEAD_BYTES


def assets_size(name: str) -> AssetsSize:
    if name not in SIZES:
        raise ValueError(f"tiny assets size {name!r} is unknown; allowed: {', '.join(SIZES)}")
    return SIZES[name]
