"""verl's multi-turn limits (``actor_rollout_ref.rollout.multi_turn.*``, read by verl's ``ToolAgentLoop``) checked for
type and range by the driver's check before Ray, naming the key and what it accepts (issue 41): before, a negative turn
limit ended every trajectory after one turn, zero parallel calls ran no tool, a zero response-length limit let a 3 MB
tool answer through whole, an unknown truncation side truncated in the middle -- all without a word.

Also the rule behind the length limit, on verl's own truncation code: a limit of 0 or 1 with ``middle`` truncation keeps
the whole answer."""

import pytest

from tests.adversarial.test_config_paths import RayStarted, compose, config_error_in, driver  # noqa: F401 (fixture)
from tests.adversarial.test_tool_settings import CPU, TOOLS
from tests.recipe_config import compose_recipe
from verl_ext.checks.tools import check_multi_turn_limits, check_tools
from verl_ext.config_values import ConfigError

MT = "actor_rollout_ref.rollout.multi_turn"

BAD = [
    (f"{MT}.max_assistant_turns=-1", "null (no limit) or an integer >= 1"),
    (f"{MT}.max_assistant_turns=0", "null (no limit) or an integer >= 1"),
    (f"{MT}.max_user_turns=-3", "null (no limit) or an integer >= 1"),
    (f"{MT}.max_user_turns=2.5", "null (no limit) or an integer >= 1"),
    (f"{MT}.max_parallel_calls=0", "an integer >= 1"),
    (f"{MT}.max_parallel_calls=abc", "an integer >= 1"),
    (f"{MT}.max_tool_response_length=0", "an integer >= 2 with tool_response_truncate_side=middle"),
    (f"{MT}.max_tool_response_length=1", "an integer >= 2 with tool_response_truncate_side=middle"),
    (f"{MT}.max_tool_response_length=-5", "an integer >= 2"),
    (f"{MT}.tool_response_truncate_side=top", "left, middle, right"),
    (f"{MT}.tokenization_sanity_check_mode=loose", "disable, strict, ignore_strippable"),
    (f"{MT}.enable=2", "true or false"),
]


@pytest.mark.filterwarnings("ignore:Disabled critic")
@pytest.mark.parametrize("override, allowed", BAD, ids=[case[0].split(".")[-1] for case in BAD])
def test_a_multi_turn_limit_out_of_range_is_refused_naming_the_key(override, allowed):
    with pytest.raises(ConfigError) as raised:
        check_tools(compose_recipe(*CPU, *TOOLS, override))
    message = str(raised.value)
    key, _, _ = override.partition("=")
    assert message.startswith(f"{key}=") and f"is invalid: allowed values are {allowed}" in message, message


@pytest.mark.filterwarnings("ignore:Disabled critic")
def test_the_defaults_and_sensible_limits_pass():
    check_multi_turn_limits(compose_recipe(*CPU))
    check_tools(compose_recipe(*CPU, *TOOLS, f"{MT}.max_user_turns=4", f"{MT}.max_parallel_calls=3",
                               f"{MT}.max_tool_response_length=1", f"{MT}.tool_response_truncate_side=left",
                               f"{MT}.tokenization_sanity_check_mode=disable"))


@pytest.mark.filterwarnings("ignore:Disabled critic")
def test_the_driver_refuses_a_bad_limit_before_ray(driver):
    _, config = compose([*CPU, f"{MT}.max_parallel_calls=0"])
    with pytest.raises(Exception) as raised:
        driver(config)
    assert not isinstance(raised.value, RayStarted), "Ray started before the check"
    assert f"{MT}.max_parallel_calls=0 is invalid" in str(config_error_in(raised.value))


@pytest.mark.parametrize("length", [0, 1])
def test_why_middle_truncation_needs_two_characters_verls_own_code(length):
    """verl's ToolAgentLoop keeps ``length // 2`` characters of each end: a half of 0 keeps ``text[-0:]``, all of it."""
    import asyncio
    from types import SimpleNamespace

    from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
    from verl.tools.schemas import ToolResponse

    answer = "x" * 3_000_000

    class Tool:
        async def create(self, **kwargs):
            return "id", ToolResponse()

        async def execute(self, instance_id, parameters, **kwargs):
            return ToolResponse(text=answer), 0.0, {}

        async def release(self, instance_id):
            pass

    loop = ToolAgentLoop.__new__(ToolAgentLoop)
    loop.tools = {"t": Tool()}
    loop.max_tool_response_length, loop.tool_response_truncate_side = length, "middle"
    call = SimpleNamespace(name="t", arguments="{}")
    response, _, _ = asyncio.run(loop._call_tool(call, {}, SimpleNamespace(tools_kwargs={}, extra_fields={})))
    assert len(response.text) >= len(answer)  # the whole 3 MB answer reaches the model
