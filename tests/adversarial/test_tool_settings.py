"""A multi-turn tool configuration that cannot run (verl_ext.checks.tools) is refused by the driver's check (what
``main_ppo`` runs before Ray, and the dry run), naming the key; the tiny counting task's tool configuration
(verl_ext.tools) passes verl's own validate_config too."""

import pytest

from tests.adversarial.test_config_keys import config_error_in
from tests.recipe_config import compose_recipe
from verl_ext.driver_checks import validate_run_config
from verl_ext.tools import tiny_count_tool_overrides

CPU = ("actor_rollout_ref.rollout.name=cpu", "actor_rollout_ref.rollout.tensor_model_parallel_size=1")
TOOLS = tuple(tiny_count_tool_overrides())


def without(overrides, *prefixes):
    return tuple(override for override in overrides if not override.startswith(prefixes))


@pytest.mark.filterwarnings("ignore:Disabled critic")
def test_the_tiny_tool_configuration_passes():
    validate_run_config(compose_recipe(*CPU, *TOOLS))


def error_of(*overrides):
    with pytest.raises(Exception) as raised:
        validate_run_config(compose_recipe(*overrides))
    error = config_error_in(raised.value)
    assert error is not None, f"{type(raised.value).__name__}: {raised.value}"
    return str(error)


@pytest.mark.filterwarnings("ignore:Disabled critic")
def test_missing_files_and_unknown_names_are_refused(tmp_path):
    assert "function_tool_path" in error_of(*CPU, *without(TOOLS, "actor_rollout_ref.rollout.multi_turn.function_tool_path"),
                                            f"actor_rollout_ref.rollout.multi_turn.function_tool_path={tmp_path / 'no.py'}")
    assert "agent_loop_config_path" in error_of(
        *CPU, *without(TOOLS, "actor_rollout_ref.rollout.agent.agent_loop_config_path"),
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={tmp_path / 'no.yaml'}")
    message = error_of(*CPU, *without(TOOLS, "actor_rollout_ref.rollout.multi_turn.format"),
                       "actor_rollout_ref.rollout.multi_turn.format=no_such_parser")
    assert "actor_rollout_ref.rollout.multi_turn.format='no_such_parser' is invalid" in message and "hermes" in message
    message = error_of(*CPU, "actor_rollout_ref.rollout.agent.default_agent_loop=no_such_loop")
    assert "default_agent_loop='no_such_loop' is invalid" in message and "tool_agent" in message


@pytest.mark.filterwarnings("ignore:Disabled critic")
def test_a_tool_agent_without_tools_is_refused():
    """verl's tool agent with no tool runs, silently single-turn: every trajectory ends after its first turn."""
    message = error_of(*CPU, "actor_rollout_ref.rollout.agent.default_agent_loop=seeded_tool_agent")
    assert "function_tool_path" in message and "first turn" in message


@pytest.mark.filterwarnings("ignore:Disabled critic")
def test_broken_tool_files_are_named(tmp_path):
    bad_function = tmp_path / "tools.py"
    bad_function.write_text("from verl.tools.function_tool import function_tool\n\n@function_tool\ndef f(x):\n    return x\n")
    message = error_of(*CPU, *without(TOOLS, "actor_rollout_ref.rollout.multi_turn.function_tool_path"),
                       f"actor_rollout_ref.rollout.multi_turn.function_tool_path={bad_function}")
    assert "function_tool_path" in message and "do not load" in message  # no docstring, no type hints
    bad_config = tmp_path / "tools.yaml"
    bad_config.write_text("tools:\n  - class_name: no.such.Tool\n    config: {type: native}\n")
    message = error_of(*CPU, f"actor_rollout_ref.rollout.multi_turn.tool_config_path={bad_config}")
    assert "tool_config_path" in message and "tools[0]" in message and "class_name" in message
    loops = tmp_path / "loops.yaml"
    loops.write_text("- name: capped\n  _target_: verl_ext.seeded_agent_loop.SeededToolAgentLoop\n  max_tokens_per_turn: 0\n")
    message = error_of(*CPU, *without(TOOLS, "actor_rollout_ref.rollout.agent.agent_loop_config_path",
                                      "actor_rollout_ref.rollout.agent.default_agent_loop"),
                       f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loops}",
                       "actor_rollout_ref.rollout.agent.default_agent_loop=capped")
    assert "max_tokens_per_turn=0 is invalid" in message and "entry 0" in message


@pytest.mark.filterwarnings("ignore:Disabled critic")
def test_a_parser_with_stop_tokens_is_refused_on_the_cpu_rollout():
    message = error_of(*CPU, *without(TOOLS, "actor_rollout_ref.rollout.multi_turn.format"),
                       "actor_rollout_ref.rollout.multi_turn.format=gemma4")
    assert "multi_turn.format='gemma4' is invalid" in message and "stop" in message


def test_the_tiny_task_rule_and_parser(tiny_assets):
    """A turn that does not end the answer calls next_number with its last digit (0 without one), a turn ending with
    the end-of-turn token calls nothing; the tool counts on by one; verl's parser registry has the tiny parser
    (registered by the plugin when verl imports its parsers)."""
    import asyncio
    import json

    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.tool_parser import ToolParser

    from verl_ext.tiny import count_tool

    assert count_tool.call_in_turn("count 1 2", ended=False) == 2 and count_tool.call_in_turn("count", ended=False) == 0
    assert count_tool.call_in_turn("1 2", ended=True) is None
    assert count_tool.next_number(4) == "5"
    with pytest.raises(TypeError):
        count_tool.next_number("4")
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_assets / "model"))
    parser = ToolParser.get_tool_parser(count_tool.PARSER_NAME, tokenizer)
    text, calls = asyncio.run(parser.extract_tool_calls(tokenizer.encode("1 3")))
    assert [(call.name, json.loads(call.arguments)) for call in calls] == [("next_number", {"number": 3})]
    assert asyncio.run(parser.extract_tool_calls(tokenizer.encode("1 3<|im_end|>")))[1] == []
    # the chat template renders a tool answer as a user turn the tiny vocabulary can encode
    tokenizer.chat_template = count_tool.CHAT_TEMPLATE
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "count 3"}, {"role": "assistant", "content": "1"},
                                         {"role": "tool", "content": "2"}], add_generation_prompt=True, tokenize=True)
    ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
    assert tokenizer.decode(ids).endswith("<|im_start|>user\n2<|im_end|>\n<|im_start|>assistant\n")
