"""ToolACE preprocessor end to end on tests/fixtures/datasets/toolace/data.json, and its call-syntax parser."""

from __future__ import annotations

import json

import pytest

from data_prep.tool_call_syntax import CallSyntaxError, looks_like_call_list, parse_call_list
from data_prep.toolace import SYSTEM_PROMPT
from verl_ext.rewards import compute_score


def _by_source(rows):
    return {row["extra_info"]["source_id"]: row for row in rows}


def test_toolace_single_turn_samples(run_command, fixtures):
    result = run_command("toolace", fixtures / "toolace", "--test_size", "1")
    assert result.status == 0, result.err
    rows = _by_source(result.rows("train") + result.rows("test"))
    assert set(rows) == {"row 0, turn 1", "row 1, turn 1", "row 2, turn 1", "row 7, turn 1"}
    sample = rows["row 1, turn 1"]
    assert sample["data_source"] == "Team-ACE/ToolACE" and sample["ability"] == "tool_use"
    assert json.loads(sample["reward_model"]["ground_truth"]) == [
        {"name": "Weather/Forecast v2", "arguments": {"city": "Paris", "days": 3}},
        {
            "name": "get-news.headlines",
            "arguments": {
                "topics": ["tech", "AI (artificial intelligence)"],
                "limit": 5,
                "filters": {"lang": "en", "safe": True},
            },
        },
    ]
    system, user = sample["prompt"]
    assert system["role"] == "system" and user == {
        "role": "user",
        "content": "Weather in Paris for 3 days, and 5 headlines on tech and (AI) news.",
    }
    assert SYSTEM_PROMPT.split("{tools}")[0] in system["content"]
    tools = json.loads(system["content"].split("The functions, as a JSON list:\n")[1].split("\n\nFirst think")[0])
    assert [tool["name"] for tool in tools] == ["Weather/Forecast v2", "get-news.headlines"]
    truth = json.loads(rows["row 0, turn 1"]["reward_model"]["ground_truth"])
    assert truth[0]["arguments"] == {
        "trend_type": "MARKET_INDEXES",
        "country": "us",
        "include_closed": True,
        "note": None,
    }
    assert all(row["extra_info"]["single_turn"] for row in rows.values())

    # Two reports, each in one unit that adds up: conversations (8 = 4 + 3 + 1) and assistant turns.
    out = result.out
    assert "conversations in 8, conversations out 4, skipped 3, filtered 1" in out
    assert "skipped      1  system: no function list" in out
    assert "skipped      2  conversations: every call turn was skipped (see the assistant turns)" in out
    assert "filtered     1  conversation without a tool-call turn" in out
    assert "assistant turns in 10, assistant turns out 4, skipped 2, filtered 4" in out
    assert "skipped      1  conversations[].value: unparseable tool call (invalid call syntax)" in out
    assert "skipped      1  conversations[].value: calls a function missing from the tool list" in out
    assert "filtered     1  call turn after the first user message (kept with --multi_turn)" in out
    assert "filtered     3  assistant turn without a tool call" in out
    assert "of 4 samples: train 3 rows, test 1 rows" in out


def test_toolace_multi_turn_keeps_context_and_conversations_stay_in_one_split(run_command, fixtures):
    result = run_command("toolace", fixtures / "toolace", "--multi_turn", "--test_size", "1", "--seed", "3")
    assert result.status == 0, result.err
    train, test = result.rows("train"), result.rows("test")
    rows = _by_source(train + test)
    later = rows["row 2, turn 5"]
    assert not later["extra_info"]["single_turn"]
    assert [m["role"] for m in later["prompt"]] == ["system", "user", "assistant", "tool", "assistant", "user"]
    # The earlier call is shown in the answer format the prompt asks for.
    assert later["prompt"][2]["content"] == (
        '<tool_call>[{"name": "Weather/Forecast v2", "arguments": {"city": "Oslo"}}]</tool_call>'
    )
    assert json.loads(later["reward_model"]["ground_truth"]) == [
        {"name": "Weather/Forecast v2", "arguments": {"city": "Bergen", "days": 2}}
    ]
    split_of = {row["extra_info"]["source_id"]: row["extra_info"]["split"] for row in train + test}
    assert split_of["row 2, turn 1"] == split_of["row 2, turn 5"]


def test_toolace_split_is_deterministic_and_max_train_size_caps(run_command, fixtures):
    first = run_command("toolace", fixtures / "toolace", "--test_size", "1", "--seed", "5")
    second = run_command("toolace", fixtures / "toolace", "--test_size", "1", "--seed", "5")
    assert first.rows("test") == second.rows("test") and first.rows("train") == second.rows("train")
    capped = run_command("toolace", fixtures / "toolace", "--test_size", "1", "--max_train_size", "2")
    assert len(capped.rows("train")) == 2 and "train 2 rows (of 3, --max_train_size)" in capped.out


def test_toolace_ground_truth_scores_one_through_the_reward(run_command, fixtures):
    """The data and the reward agree: answering with the ground truth in the prompted format scores 1."""
    result = run_command("toolace", fixtures / "toolace", "--multi_turn", "--test_size", "1")
    for row in result.rows("train") + result.rows("test"):
        truth = row["reward_model"]["ground_truth"]
        answer = f"<think>call it</think>\n<tool_call>{truth}</tool_call>"
        assert compute_score(row["data_source"], answer, truth, row["extra_info"])["score"] == 1.0


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            '[Market Trends API(trend_type="MARKET_INDEXES", country="us")]',
            [{"name": "Market Trends API", "arguments": {"trend_type": "MARKET_INDEXES", "country": "us"}}],
        ),
        ('[Get Quote(symbol="A) B, C=(D")]', [{"name": "Get Quote", "arguments": {"symbol": "A) B, C=(D"}}]),
        (
            "[f(a=true, b=false, c=null, d=True, e=None)]",
            [{"name": "f", "arguments": {"a": True, "b": False, "c": None, "d": True, "e": None}}],
        ),
        (
            '[Files/List v1.2-beta(path="/tmp/(x)")]',
            [{"name": "Files/List v1.2-beta", "arguments": {"path": "/tmp/(x)"}}],
        ),
        (
            "[a(), b(x=[1, (2, 3)], y={'k': -1.5})]",
            [{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": [1, [2, 3]], "y": {"k": -1.5}}}],
        ),
        ("[Bob's API(q='it\\'s')]", [{"name": "Bob's API", "arguments": {"q": "it's"}}]),
        ('[f(text="""tri)ple""", n=\n 2)]', [{"name": "f", "arguments": {"text": "tri)ple", "n": 2}}]),
        ("  [f(a=1)]\n", [{"name": "f", "arguments": {"a": 1}}]),
    ],
)
def test_call_syntax_parses(text, expected):
    assert parse_call_list(text) == expected


@pytest.mark.parametrize(
    "text, reason",
    [
        ("[f(1)]", "positional argument"),
        ("[f(a=1, a=2)]", "repeated argument"),
        ("[f(a=g(1))]", "an argument is not a literal value"),
        ("[f(a={1, 2})]", "an argument has no JSON form (set, bytes, inf, ...)"),
        ("[f(a=1e999)]", "an argument has no JSON form (set, bytes, inf, ...)"),
        ('[f(a="open)]', "invalid call syntax"),
        ("[f(a=1) g(b=2)]", "invalid call syntax"),
        ("[f]", "a name not followed by '(...)'"),
        ('["f"(a=1)]', "a string where a function name should be"),
        ("[f(**{'a': 1})]", "'**' argument"),
        ("[]", "empty call list"),
        ("f(a=1)", "not enclosed in [ ]"),
    ],
)
def test_call_syntax_rejects_with_reason(text, reason):
    with pytest.raises(CallSyntaxError) as error:
        parse_call_list(text)
    assert error.value.reason == reason


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[f(a=1)]", True),
        ("I need the city first.", False),
        ('[{"name": "x", "results": {}}]', False),
        ("[1, 2]", False),
    ],
)
def test_looks_like_call_list(text, expected):
    assert looks_like_call_list(text) is expected


def test_toolace_reward_options_stored_in_extra_info_select_the_reward(run_command, fixtures):
    result = run_command(
        "toolace", fixtures / "toolace", "--test_size", "1", "--toolace_mode", "partial", "--toolace_strict_format"
    )
    assert result.status == 0, result.err
    row = result.rows("train")[0]
    assert row["extra_info"]["toolace_mode"] == "partial" and row["extra_info"]["toolace_strict_format"] is True
    truth = row["reward_model"]["ground_truth"]
    no_think = f"<tool_call>{truth}</tool_call>"
    assert compute_score(row["data_source"], no_think, truth, row["extra_info"])["score"] == 0.0  # strict format
    assert compute_score(row["data_source"], no_think, truth, {})["score"] == 1.0
    plain = run_command("toolace", fixtures / "toolace", "--test_size", "1").rows("train")[0]
    assert "toolace_mode" not in plain["extra_info"]
