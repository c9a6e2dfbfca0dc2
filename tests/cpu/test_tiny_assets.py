"""The tiny offline assets: deterministic, loadable by transformers and verl, and a graded counting reward."""

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from verl_ext.data_sources import TINY_COUNT
from verl_ext.tiny import task
from verl_ext.tiny.assets import assets_are_current, build_tiny_assets, recipe


def test_build_is_byte_identical_and_kept_when_current(tiny_assets, tmp_path):
    again = build_tiny_assets(tmp_path / "again")
    first = json.loads((tiny_assets / "manifest.json").read_text())
    assert again["files"] == first["files"] and again["recipe"] == first["recipe"]
    weights = tmp_path / "again" / "model" / "model.safetensors"
    modified = weights.stat().st_mtime_ns
    build_tiny_assets(tmp_path / "again")
    assert weights.stat().st_mtime_ns == modified  # current: left as it is


def test_a_tampered_build_is_rebuilt(tmp_path):
    out = tmp_path / "assets"
    manifest = build_tiny_assets(out, train_examples=8, val_examples=2)
    (out / "data" / "val.parquet").write_bytes(b"not parquet")
    assert not assets_are_current(out, manifest["recipe"])
    assert build_tiny_assets(out, train_examples=8, val_examples=2)["files"] == manifest["files"]
    assert assets_are_current(out, recipe(0, 8, 2))
    import os

    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o777 & ~umask  # built in a staging folder: not mkdtemp's 0700


def test_bad_sizes_are_refused(tmp_path):
    with pytest.raises(ValueError, match="train_examples"):
        build_tiny_assets(tmp_path / "x", train_examples=0)


def test_tokenizer_loads_as_qwen2_and_round_trips_the_task(tiny_assets):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_assets / "model"))
    assert type(tokenizer).__name__ == "Qwen2Tokenizer"
    assert len(tokenizer.encode("\n", add_special_tokens=False)) == 1  # verl's Qwen prompt builder requires it
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"
    digits = [tokenizer.convert_tokens_to_ids(str(d)) for d in range(10)]
    assert len(set(digits)) == 10 and len(tokenizer) < 64
    for row in task.make_split(20, "train", seed=1):
        for text in (row["prompt"][0]["content"], row["reward_model"]["ground_truth"]):
            assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == text
        ids = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=True)["input_ids"]
        assert tokenizer.decode(ids) == f"<|im_start|>user\n{row['prompt'][0]['content']}<|im_end|>\n<|im_start|>assistant\n"
        assert len(ids) <= 16  # the CPU profile's data.max_prompt_length


def test_verl_reads_the_parquet_and_its_rows(tiny_assets):
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_assets / "model"))
    config = OmegaConf.create({"max_prompt_length": 16, "filter_overlong_prompts": True, "cache_dir": str(tiny_assets / "cache")})
    dataset = RLHFDataset(str(tiny_assets / "data" / "train.parquet"), tokenizer, config)
    assert len(dataset) == json.loads((tiny_assets / "manifest.json").read_text())["recipe"]["train_examples"]
    row = dataset[3]
    assert row["data_source"] == TINY_COUNT and row["index"] == 3
    count = int(row["raw_prompt"][0]["content"].split()[1])
    assert row["reward_model"]["ground_truth"] == " ".join(str(i) for i in range(1, count + 1))


@pytest.mark.parametrize(
    "response, truth, counting, fraction",
    [
        ("1 2 3", "1 2 3", 1.0, 1.0),
        ("1 2", "1 2 3", 2 / 3, 1.0),
        ("1 2 3 4", "1 2 3", 0.75, 1.0),  # overshoot: 3/3 correct * 3/4
        ("2 1", "1 2", 0.0, 1.0),
        ("", "1", 0.0, 0.0),
        ("count1 and 2", "1 2", 1.0, 2 / 10),  # digits in order, whatever surrounds them
        ("1 3", "1 2 3 4", 0.25, 1.0),
        ("user", "1", 0.0, 0.0),
    ],
)
def test_count_reward(response, truth, counting, fraction):
    assert task.counting_score(response, truth) == pytest.approx(counting)
    assert task.digit_fraction(response) == pytest.approx(fraction)
    assert task.count_reward(response, truth) == pytest.approx(0.8 * counting + 0.2 * fraction)


@settings(max_examples=60, deadline=None)
@given(response=st.text(alphabet="0123456789 ab\n", max_size=20), count=st.integers(1, task.MAX_COUNT))
def test_count_reward_is_a_fraction_and_one_only_for_the_answer(response, count):
    truth = " ".join(str(i) for i in range(1, count + 1))
    reward = task.count_reward(response, truth)
    assert 0.0 <= reward <= 1.0 + 1e-12
    exact = task.DIGIT.findall(response) == truth.split() and not set(response) - set("0123456789 \n")
    assert (reward > 1.0 - 1e-12) == exact


def test_compute_score_checks_its_inputs():
    assert task.compute_score(TINY_COUNT, "1 2", "1 2") == {"score": 1.0, "counting": 1.0, "digit_fraction": 1.0, "exact": 1.0}
    assert task.compute_score(TINY_COUNT, "1 x", "1 2")["exact"] == 0.0
    with pytest.raises(ValueError, match="data_source"):
        task.compute_score("openai/gsm8k", "1", "1")
    with pytest.raises(ValueError, match="ground truth"):
        task.compute_score(TINY_COUNT, "1", "one")


def test_the_random_model_gets_a_graded_nonzero_reward(tiny_assets):
    """Groups of 4 samples from the untrained model: some reward, and reward variance inside every group."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_assets / "model"))
    model = AutoModelForCausalLM.from_pretrained(str(tiny_assets / "model"), dtype=torch.float32).eval()
    rows = task.make_split(8, "train", seed=0)
    torch.manual_seed(0)
    group_rewards = []
    for row in rows:
        ids = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=True, return_tensors="pt")
        output = model.generate(**ids, do_sample=True, max_new_tokens=12, num_return_sequences=4, pad_token_id=0)
        responses = tokenizer.batch_decode(output[:, ids["input_ids"].shape[1] :], skip_special_tokens=True)
        group_rewards.append([task.count_reward(r, row["reward_model"]["ground_truth"]) for r in responses])
    rewards = [reward for group in group_rewards for reward in group]
    assert 0.0 < sum(rewards) / len(rewards) < 0.5
    assert all(len(set(group)) > 1 for group in group_rewards)


def test_gpu_size_is_deterministic_and_runs_a_forward_in_transformers(tmp_path):
    """The gpu size (python -m verl_ext.tiny.assets --size gpu): byte-identical builds, head_dim >= 32 (vLLM's
    attention kernels), the same tokenizer and task, and a finite forward pass through transformers."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from verl_ext.tiny.assets import default_assets_dir
    from verl_ext.tiny.model import GPU_QWEN2, head_dim

    first = build_tiny_assets(tmp_path / "one", train_examples=8, val_examples=2, size="gpu")
    second = build_tiny_assets(tmp_path / "two", train_examples=8, val_examples=2, size="gpu", force=True)
    assert first["files"] == second["files"] and first["recipe"] == second["recipe"]
    cpu = recipe(0, 8, 2)
    assert first["recipe"]["model_size"] != cpu["model_size"] and first["files"]["model/model.safetensors"]
    assert not assets_are_current(tmp_path / "one", cpu)  # a cpu build is never taken for a gpu one
    assert default_assets_dir("gpu").name == "tiny-gpu" != default_assets_dir().name
    config = AutoConfig.from_pretrained(str(tmp_path / "one" / "model"))
    assert config.hidden_size // config.num_attention_heads == head_dim(GPU_QWEN2) == 64
    assert config.max_position_embeddings >= 1024 + 8192  # the run scripts' longest prompt + response
    tokenizer = AutoTokenizer.from_pretrained(str(tmp_path / "one" / "model"))
    model = AutoModelForCausalLM.from_pretrained(str(tmp_path / "one" / "model"), dtype=torch.float32).eval()
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "count 3"}], add_generation_prompt=True,
                                        tokenize=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**ids).logits
    assert logits.shape == (1, ids["input_ids"].shape[1], len(tokenizer)) and torch.isfinite(logits).all()
    with pytest.raises(ValueError, match="allowed: cpu, gpu"):
        build_tiny_assets(tmp_path / "x", size="tpu")


def test_scale_sizes_have_the_checkpoints_dimensions_and_parameter_counts():
    """qwen2.5-0.5b / qwen2.5-1.5b: Qwen2.5's layers, widths, heads and vocabulary, so the parameter count is the
    checkpoint's (counted on the meta device: no weight is allocated)."""
    from verl_ext.tiny.model import parameters_of
    from verl_ext.tiny.sizes import SIZES
    from verl_ext.tiny.tokenizer import build_synthetic_tokenizer

    tokenizer = build_synthetic_tokenizer(151936)
    assert len(tokenizer) == 151936
    assert parameters_of(tokenizer, SIZES["qwen2.5-0.5b"].model) == 494_032_768  # Qwen2.5-0.5B, tied embeddings
    assert parameters_of(tokenizer, SIZES["qwen2.5-1.5b"].model) == 1_543_714_304  # Qwen2.5-1.5B
    half = SIZES["qwen2.5-0.5b"]
    assert (half.model.num_hidden_layers, half.model.hidden_size, half.model.num_attention_heads,
            half.model.num_key_value_heads, half.model.intermediate_size) == (24, 896, 14, 2, 4864)
    assert half.dtype == "bfloat16" and half.is_scale and not SIZES["cpu"].is_scale


def test_the_synthetic_tokenizer_decodes_every_id_and_keeps_the_chat_layout():
    import random

    from verl_ext.tiny.tokenizer import build_synthetic_tokenizer

    tokenizer = build_synthetic_tokenizer(4096)
    assert len(tokenizer) == 4096 and len(set(tokenizer.get_vocab().values())) == 4096
    assert len(tokenizer.encode("\n", add_special_tokens=False)) == 1  # verl's Qwen prompt builder requires it
    rng = random.Random(0)
    ids = [rng.randrange(len(tokenizer) - 3) for _ in range(200)]  # anything a model samples but the specials
    text = tokenizer.decode(ids)
    assert len(text) > 200 and tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == text
    prompt = [{"role": "user", "content": "letters d-k"}]
    encoded = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True)["input_ids"]
    assert tokenizer.decode(encoded) == "<|im_start|>user\nletters d-k<|im_end|>\n<|im_start|>assistant\n"
    assert build_synthetic_tokenizer(4096).get_vocab() == tokenizer.get_vocab()  # deterministic


def test_scale_cpu_assets_build_deterministically_and_a_random_model_writes_long_graded_answers(tmp_path):
    """The scale builder at the CPU backend's size: byte-identical builds, the letters task, and a random model
    whose 64-token answers (no end-of-sequence) score about the range's share of the alphabet, differently in every
    group (reward variance for every step's gradient)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from verl_ext.data_sources import TINY_LETTERS
    from verl_ext.tiny import letters

    first = build_tiny_assets(tmp_path / "one", train_examples=8, val_examples=2, size="scale-cpu")
    second = build_tiny_assets(tmp_path / "two", train_examples=8, val_examples=2, size="scale-cpu", force=True)
    assert first["files"] == second["files"] and first["recipe"]["tokenizer"] == {"synthetic_vocab_size": 4096}
    assert not assets_are_current(tmp_path / "one", recipe(0, 8, 2))  # never taken for a cpu build
    model_dir = tmp_path / "one" / "model"
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    assert len(tokenizer) == model.config.vocab_size == 4096
    rows = letters.make_split(3, "train", seed=0)
    assert {row["data_source"] for row in rows} == {TINY_LETTERS}
    torch.manual_seed(0)
    for row in rows:
        ids = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=True, return_tensors="pt")
        output = model.generate(**ids, do_sample=True, max_new_tokens=64, min_new_tokens=64, num_return_sequences=4,
                                pad_token_id=tokenizer.pad_token_id)
        responses = tokenizer.batch_decode(output[:, ids["input_ids"].shape[1]:], skip_special_tokens=True)
        rewards = [task.compute_score(TINY_LETTERS, response, row["reward_model"]["ground_truth"])["score"]
                   for response in responses]
        first_letter, last_letter = row["reward_model"]["ground_truth"].split("-")
        share = (ord(last_letter) - ord(first_letter) + 1) / 26
        assert len(set(rewards)) > 1 and all(abs(reward - share) < 0.25 for reward in rewards), (rewards, share)


@pytest.mark.parametrize("response, truth, score", [
    ("abc xyz", "a-c", 0.5), ("ABC", "a-c", 1.0), ("123 !", "a-c", 0.0), ("", "d-k", 0.0), ("dk", "d-k", 1.0),
])
def test_letters_reward(response, truth, score):
    from verl_ext.data_sources import TINY_LETTERS

    assert task.compute_score(TINY_LETTERS, response, truth)["score"] == pytest.approx(score)
    with pytest.raises(ValueError, match="letter range"):
        task.compute_score(TINY_LETTERS, response, "k-d")
