"""The tiny assets' tokenizer: a word-level ``tokenizers`` model over the task's closed vocabulary.

Each letter run, digit, whitespace character and punctuation mark is one token; decoding concatenates
tokens back (``decoders.Fuse``), so ``decode(encode(text)) == text`` for any text in the vocabulary. The
special tokens and chat template follow Qwen2's ChatML layout, which verl's Qwen prompt builder expects
(``<|im_end|>`` ends a turn and is the end-of-sequence token; ``"\\n"`` is a single token).
"""

from __future__ import annotations

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

PAD = "<|endoftext|>"
TURN_START = "<|im_start|>"
TURN_END = "<|im_end|>"
UNKNOWN = "<unk>"
SPECIAL_TOKENS = (PAD, TURN_START, TURN_END, UNKNOWN)
WORDS = ("system", "user", "assistant", "count")
CHARACTERS = tuple(str(digit) for digit in range(10)) + (" ", "\n")

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def vocabulary() -> dict[str, int]:
    """Token -> id, in a fixed order: special tokens, words, then digits and whitespace."""
    tokens = SPECIAL_TOKENS + WORDS + CHARACTERS
    return {token: index for index, token in enumerate(tokens)}


def build_tokenizer() -> PreTrainedTokenizerFast:
    """The tokenizer, built offline and deterministically (same vocabulary and ids on every call)."""
    backend = Tokenizer(models.WordLevel(vocab=vocabulary(), unk_token=UNKNOWN))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[A-Za-z]+|\d|\s|[^A-Za-z\d\s]"), behavior="isolated")
    backend.decoder = decoders.Fuse()
    backend.add_special_tokens(list(SPECIAL_TOKENS))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=TURN_END,
        pad_token=PAD,
        unk_token=UNKNOWN,
        additional_special_tokens=[TURN_START],
        padding_side="left",
        model_max_length=256,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer
