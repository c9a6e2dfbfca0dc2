"""The offline assets' tokenizers: Qwen2-style byte-level BPEs, built offline.

:func:`build_tokenizer` (the tiny sizes) is *trained* on the counting task's own text; :func:`build_synthetic_tokenizer`
(the scale sizes) is *constructed* to a given vocabulary size, as large as Qwen2.5's (151,936 ids), so that the
embedding, the output layer and every logit cost what they cost with a real checkpoint's tokenizer.

``transformers`` loads any ``model_type=qwen2`` tokenizer as ``Qwen2Tokenizer``, which rebuilds Qwen2's
pipeline (NFC normaliser, Qwen2's split regex, byte-level pre-tokenizer and decoder) around the saved
vocabulary and merges. So the tokenizer here uses exactly that pipeline and only *learns* the vocabulary:
a ``tokenizers`` ``BpeTrainer`` run over the chat-formatted prompts and answers of the counting task,
with the byte alphabet restricted to the characters that occur. The result has about 40 tokens
(digits are a quarter of them), round-trips every task string, and is identical on every build.

Special tokens and chat template follow Qwen2's ChatML layout, which verl's Qwen prompt builder expects:
``<|im_end|>`` ends a turn and is the end-of-sequence token, ``<|endoftext|>`` pads, ``"\\n"`` is one token.
"""

from __future__ import annotations

import itertools
import string

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

PAD = "<|endoftext|>"
TURN_START = "<|im_start|>"
TURN_END = "<|im_end|>"
SPECIAL_TOKENS = (PAD, TURN_START, TURN_END)

# transformers' Qwen2Tokenizer split pattern (models/qwen2/tokenization_qwen2.py): the same pipeline is
# rebuilt on load, so training must use it too.
QWEN2_SPLIT_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def training_corpus() -> list[str]:
    """Every string the counting task and its chat template produce (roles, prompts, answers)."""
    from verl_ext.tiny.task import INSTRUCTION, MAX_COUNT

    lines = []
    for role in ("system", "user", "assistant"):
        lines.append(f"{role}\n")
    for count in range(1, MAX_COUNT + 1):
        lines.append(f"{INSTRUCTION} {count}\n")
        lines.append(" ".join(str(i) for i in range(1, count + 1)) + "\n")
    lines.append(" ".join(str(digit) for digit in range(10)) + "\n")
    return lines


def _pipeline(model: models.Model) -> Tokenizer:
    backend = Tokenizer(model)
    backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    backend.decoder = decoders.ByteLevel()
    return backend


def build_tokenizer() -> PreTrainedTokenizerFast:
    """Train the tokenizer on :func:`training_corpus` (deterministic: same vocabulary and ids every call)."""
    backend = _pipeline(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    trainer = trainers.BpeTrainer(
        vocab_size=256,
        min_frequency=1,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=[],
        show_progress=False,
    )
    backend.train_from_iterator(training_corpus(), trainer=trainer)
    return _wrapped(backend, model_max_length=256)


def _wrapped(backend: Tokenizer, model_max_length: int) -> PreTrainedTokenizerFast:
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=TURN_END,
        pad_token=PAD,
        unk_token=PAD,
        additional_special_tokens=[TURN_START],
        padding_side="left",
        model_max_length=model_max_length,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def synthetic_vocabulary(size: int) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """A byte-level BPE vocabulary of exactly ``size`` entries and its merges, built without any corpus.

    Ids 0-255: the 256 byte symbols (every string encodes). Then merged tokens, shortest first: a space followed by
    a letter, two letters, a space and two letters, three letters, and so on (Qwen2's pre-tokenizer keeps a word
    and its leading space together), each made by merging a shorter token with one letter, until ``size`` is
    reached. Deterministic; every id is a real token, so anything a model samples decodes.
    """
    if size <= 256:
        raise ValueError(f"a synthetic vocabulary needs more than the 256 byte symbols, got {size}")
    byte_symbols = pre_tokenizers.ByteLevel.alphabet()
    vocabulary = {symbol: index for index, symbol in enumerate(sorted(byte_symbols))}
    merges: list[tuple[str, str]] = []
    space = "\u0120"  # the byte-level symbol of " "
    assert space in vocabulary
    letters = string.ascii_lowercase
    for length in itertools.count(1):
        words = ("".join(combination) for combination in itertools.product(letters, repeat=length))
        spaced = (space + "".join(combination) for combination in itertools.product(letters, repeat=length))
        for word in itertools.chain(words if length > 1 else (), spaced):  # a single letter is a byte symbol
            if len(vocabulary) == size:
                return vocabulary, merges
            vocabulary[word] = len(vocabulary)
            merges.append((word[:-1], word[-1]))
    raise AssertionError("unreachable")


def build_synthetic_tokenizer(vocab_size: int, model_max_length: int = 32768) -> PreTrainedTokenizerFast:
    """A Qwen2-style tokenizer of exactly ``vocab_size`` ids (its special tokens included): the byte symbols, the
    merged letter tokens of :func:`synthetic_vocabulary`, ``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``."""
    vocabulary, merges = synthetic_vocabulary(vocab_size - len(SPECIAL_TOKENS))
    backend = _pipeline(models.BPE(vocab=vocabulary, merges=merges, unk_token=None, fuse_unk=False, byte_fallback=False))
    backend.add_special_tokens(list(SPECIAL_TOKENS))
    tokenizer = _wrapped(backend, model_max_length)
    if len(tokenizer) != vocab_size:
        raise AssertionError(f"synthetic tokenizer has {len(tokenizer)} ids, wanted {vocab_size}")
    return tokenizer
