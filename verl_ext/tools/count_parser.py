"""The ``tiny_count`` tool parser (``actor_rollout_ref.rollout.multi_turn.format=tiny_count``): an assistant turn
that does not end with the end-of-turn token calls ``next_number`` with its last digit (:mod:`verl_ext.tiny.count_tool`). Registered in verl's
``ToolParser`` registry when verl imports its tool-parser module (:mod:`verl_ext.plugin`)."""

from __future__ import annotations

import json

from verl.experimental.agent_loop.tool_parser import FunctionCall, ToolParser

from verl_ext.tiny import count_tool


@ToolParser.register(count_tool.PARSER_NAME)
class TinyCountToolParser(ToolParser):
    async def extract_tool_calls(self, responses_ids: list[int], tools=None) -> tuple[str, list[FunctionCall]]:
        text = self.tokenizer.decode(responses_ids, skip_special_tokens=True)
        ended = bool(responses_ids) and responses_ids[-1] == self.tokenizer.eos_token_id
        number = count_tool.call_in_turn(text, ended)
        if number is None:
            return text, []
        return text, [FunctionCall(name=count_tool.TOOL_NAME, arguments=json.dumps({"number": number}))]
