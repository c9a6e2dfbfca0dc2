"""compute_score's dispatch, and loading it the way verl 0.9.1 does.

verl resolves ``reward.custom_reward_function.path=pkg://verl_ext.rewards`` with
``verl.utils.import_utils.load_extern_object`` (``pkg://`` = import that module, ``/`` or ``.``
separated) and ``name`` (default ``compute_score``) in ``verl.trainer.ppo.reward.get_custom_reward_fn``,
which merges ``reward_kwargs`` into every call. The reward-loop worker then builds a reward manager
(``naive`` by default) that decodes each response and calls the function in a thread pool.
"""

from __future__ import annotations

import json

import pytest
import torch
from omegaconf import OmegaConf

import verl_ext.rewards as rewards
from verl_ext.rewards import UnknownDataSourceError, compute_score

TOOLACE_TRUTH = json.dumps([{"name": "f", "arguments": {"a": 1, "b": 2}}])
HALF_RIGHT = '<think>x</think><tool_call>[{"name": "f", "arguments": {"a": 1, "b": 3}}]</tool_call>'


def reward_config(**reward_kwargs):
    return OmegaConf.create(
        {
            "reward": {
                "custom_reward_function": {
                    "path": "pkg://verl_ext.rewards",
                    "name": "compute_score",
                    "reward_kwargs": reward_kwargs,
                },
                "reward_manager": {"source": "register", "name": "naive"},
                "reward_model": {"enable": False},
            }
        }
    )


@pytest.mark.parametrize(
    "data_source, response, truth",
    [
        ("openai/gsm8k", "#### 72", "72"),
        ("DigitalLearningGmbH/MATH-lighteval", "\\boxed{\\frac12}", "0.5"),
        ("HuggingFaceH4/MATH-500", "\\boxed{3}", "3"),
        ("lighteval/MATH", "\\boxed{3}", "3"),
        ("math__deepscaler_preview", "</think>\\boxed{3}", "3"),
        (
            "Team-ACE/ToolACE",
            '<think>x</think><tool_call>[{"name": "f", "arguments": {"b": 2, "a": 1}}]</tool_call>',
            TOOLACE_TRUTH,
        ),
    ],
)
def test_every_known_source_dispatches_and_returns_the_same_float_keys(data_source, response, truth):
    result = compute_score(data_source, response, truth, extra_info={"split": "test", "index": 0})
    assert list(result) == ["score", "acc", "answer_found", "format_ok", "timed_out", "scorer_error"]
    assert all(type(value) is float for value in result.values())
    assert result["score"] == 1.0


def test_unknown_data_source_is_a_clear_error():
    with pytest.raises(UnknownDataSourceError) as error:
        compute_score("openai/gsm8k_typo", "#### 1", "1")
    message = str(error.value)
    assert "data_source='openai/gsm8k_typo'" in message
    for name in ("'openai/gsm8k'", "'DigitalLearningGmbH/MATH-lighteval'", "'Team-ACE/ToolACE'", "'math'"):
        assert name in message


def test_scorer_failure_is_scored_zero_and_flagged(monkeypatch):
    def broken(solution, truth):
        raise RuntimeError("bug")

    monkeypatch.setattr(rewards.gsm8k, "compute_score", broken)
    result = compute_score("openai/gsm8k", "#### 1", "1")
    assert result["score"] == 0.0 and result["scorer_error"] == 1.0


def test_extra_keyword_arguments_from_reward_managers_are_accepted():
    result = compute_score("openai/gsm8k", "#### 1", "1", None, reward_router_address=None, reward_model_tokenizer=None)
    assert result["score"] == 1.0


@pytest.mark.parametrize("path", ["pkg://verl_ext.rewards", "pkg://verl_ext/rewards"])
def test_verl_load_extern_object_resolves_the_pkg_path(path):
    from verl.utils.import_utils import load_extern_object

    assert load_extern_object(module_path=path, object_name="compute_score") is compute_score


def test_verl_get_custom_reward_fn_merges_reward_kwargs():
    from verl.trainer.ppo.reward import get_custom_reward_fn

    function = get_custom_reward_fn(reward_config(toolace_mode="partial"))
    result = function(
        data_source="Team-ACE/ToolACE", solution_str=HALF_RIGHT, ground_truth=TOOLACE_TRUTH, extra_info={}
    )
    assert 0.0 < result["score"] < 1.0 and result["acc"] == 0.0  # partial credit came from reward_kwargs
    exact = get_custom_reward_fn(reward_config())
    assert exact(data_source="Team-ACE/ToolACE", solution_str=HALF_RIGHT, ground_truth=TOOLACE_TRUTH)["score"] == 0.0


def byte_level_tokenizer():
    """A tokenizer that round-trips any text (one token per byte); no download."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocabulary = {symbol: i for i, symbol in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    vocabulary["<pad>"] = len(vocabulary)
    backend = Tokenizer(models.BPE(vocab=vocabulary, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>")


@pytest.mark.parametrize(
    "data_source, response, truth, expected",
    [
        ("openai/gsm8k", "She has 12 pens.\n#### 12", "12", 1.0),
        ("DigitalLearningGmbH/MATH-lighteval", "So $x = \\boxed{\\dfrac{3}{4}}$.", "0.75", 1.0),
        ("math__deepscaler_preview", "<think>\\boxed{2}</think>The answer is \\boxed{3}.", "2", 0.0),
        ("Team-ACE/ToolACE", HALF_RIGHT, TOOLACE_TRUTH, 0.0),
    ],
)
def test_verl_naive_reward_manager_scores_a_real_batch(data_source, response, truth, expected):
    """verl's own loader and NaiveRewardManager: decode the response, call compute_score in a worker thread."""
    from verl import DataProto
    from verl.trainer.ppo.reward import load_reward_manager

    tokenizer = byte_level_tokenizer()
    manager = load_reward_manager(reward_config(), tokenizer)
    prompt_ids = tokenizer("Question?", return_tensors="pt")["input_ids"]
    response_ids = tokenizer(response, return_tensors="pt")["input_ids"]
    assert tokenizer.decode(response_ids[0]) == response
    padding = torch.full((1, 3), tokenizer.pad_token_id)
    responses = torch.cat([response_ids, padding], dim=1)
    attention_mask = torch.cat(
        [torch.ones_like(prompt_ids), torch.ones_like(response_ids), torch.zeros_like(padding)], 1
    )
    data = DataProto.from_dict(
        tensors={"prompts": prompt_ids, "responses": responses, "attention_mask": attention_mask},
        non_tensors={
            "data_source": [data_source],
            "reward_model": [{"style": "rule", "ground_truth": truth}],
            "extra_info": [{"split": "train", "index": 0}],
        },
    )
    output = manager.loop.run_until_complete(manager.run_single(data))
    assert output["reward_score"] == expected
    assert output["reward_extra_info"]["acc"] == expected
    assert set(output["reward_extra_info"]) == {
        "score",
        "acc",
        "answer_found",
        "format_ok",
        "timed_out",
        "scorer_error",
    }
