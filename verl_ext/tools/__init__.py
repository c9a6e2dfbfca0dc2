"""verl-ext's glue for verl's multi-turn tool agent loop: the tiny counting tool task (:mod:`verl_ext.tiny.count_tool`)
as verl tools, parser and agent loop, and the overrides that turn a CPU run into a multi-turn tool-use run.

- :mod:`verl_ext.tools.count_parser`: the ``tiny_count`` tool parser, registered in verl's ``ToolParser`` registry
  when verl imports it (:mod:`verl_ext.plugin`);
- ``count_function.py``: the ``next_number`` function tool, the file ``multi_turn.function_tool_path`` names (verl
  executes it by path in its agent-loop workers);
- ``count_agent_loops.yaml``: the agent loop config (``agent.agent_loop_config_path``) naming
  ``tiny_count_tool_agent``, verl-ext's seeded tool agent loop with its turns capped.

This module imports neither verl nor torch.
"""

from __future__ import annotations

from pathlib import Path

from verl_ext.tiny import count_tool

HERE = Path(__file__).resolve().parent
FUNCTION_TOOL_FILE = HERE / "count_function.py"
AGENT_LOOP_CONFIG_FILE = HERE / "count_agent_loops.yaml"


def tiny_count_tool_overrides(max_assistant_turns: int = count_tool.MAX_ASSISTANT_TURNS) -> list[str]:
    """Hydra overrides (after a CPU run's profile) for the counting task with its calculator, several turns each."""
    from verl_ext.overrides import hydra_string

    return [
        f"actor_rollout_ref.rollout.agent.default_agent_loop={count_tool.AGENT_LOOP_NAME}",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={hydra_string(str(AGENT_LOOP_CONFIG_FILE))}",
        f"actor_rollout_ref.rollout.multi_turn.function_tool_path={hydra_string(str(FUNCTION_TOOL_FILE))}",
        f"actor_rollout_ref.rollout.multi_turn.format={count_tool.PARSER_NAME}",
        f"actor_rollout_ref.rollout.multi_turn.max_assistant_turns={max_assistant_turns}",
        f"actor_rollout_ref.model.custom_chat_template={hydra_string(count_tool.CHAT_TEMPLATE)}",
        f"data.max_response_length={count_tool.RESPONSE_LENGTH}",
    ]
