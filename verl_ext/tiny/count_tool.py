"""The counting task with a tool: the tiny model may hand the next number to a calculator, over several turns.

The multi-turn twin of :mod:`verl_ext.tiny.task` (same prompts ``count n``, same ground truth ``1 2 ... n``, same
reward), for verl's tool agent loop on the CPU backend. The rule of the game, all of it here:

- **A tool call** is an assistant turn that does not end the answer: a turn cut by its token cap (no end-of-turn
  token) calls ``next_number`` with its *last* digit, 0 when it wrote none (:func:`call_in_turn`); a turn that ends
  with ``<|im_end|>`` calls nothing and ends the trajectory. The tiny model's vocabulary has no room for a JSON call
  syntax; a random model seldom ends a turn within a few tokens, so most trajectories run to
  ``multi_turn.max_assistant_turns``, and a trained one can answer in one turn or count with the calculator.
- **The tool** (:func:`next_number`) answers ``number + 1``: a calculator that counts on by one.
- **The reward** is the counting task's, over the whole trajectory: the response the reward function reads holds
  every assistant turn and every tool answer, in order, so "1" (model) "2" (tool) "3" (model) counts to 3 and
  scores 1 for ``count 3``.
- **Chat template**: tool answers are rendered as ``user`` turns (as Qwen2's own template wraps them), in the
  tiny tokenizer's ChatML layout (its vocabulary has no ``tool`` role).

Each assistant turn is capped at :data:`MAX_TOKENS_PER_TURN` tokens (the seeded tool agent loop's
``max_tokens_per_turn``): verl's loop gives a turn the whole remaining budget, and the tiny model seldom ends a turn.
Nothing here imports verl; the verl glue is :mod:`verl_ext.tools`.
"""

from __future__ import annotations

import re
from typing import Optional

TOOL_NAME = "next_number"
PARSER_NAME = "tiny_count"  # actor_rollout_ref.rollout.multi_turn.format
AGENT_LOOP_NAME = "tiny_count_tool_agent"  # actor_rollout_ref.rollout.agent.default_agent_loop
MAX_TOKENS_PER_TURN = 4
MAX_ASSISTANT_TURNS = 3
# 3 turns of 4 tokens, 2 tool answers of about 9 tokens (newline, user turn, the number, the next generation prompt)
RESPONSE_LENGTH = 32
DIGIT = re.compile(r"\d")

# the tiny tokenizer's ChatML template (verl_ext.tiny.tokenizer.CHAT_TEMPLATE) with tool answers as user turns
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% set role = 'user' if message['role'] == 'tool' else message['role'] %}"
    "{{ '<|im_start|>' + role + '\n' + (message['content'] or '') + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def next_number(number: int) -> str:
    """Count on by one: the number after the given one.

    Args:
        number: The last number counted so far.
    """
    if isinstance(number, bool) or not isinstance(number, int):
        raise TypeError(f"{TOOL_NAME} takes an integer, got {number!r}")
    return str(number + 1)


def call_in_turn(text: str, ended: bool) -> Optional[int]:
    """The argument of the turn's tool call (its last digit, 0 without one), or None when the turn ``ended`` the
    answer (its last token is the end-of-turn token): that turn calls nothing."""
    if ended:
        return None
    digits = DIGIT.findall(text)
    return int(digits[-1]) if digits else 0
