"""The lab's initial policy: the tiny model, briefly taught the counting task, like an instruct model.

The papers start RL from instruct models that already solve part of their tasks (Qwen2.5-1.5B-Instruct
on GSM8k). The tiny assets' model (:mod:`verl_ext.tiny`) is randomly initialised instead, and from there
on-policy RL on the counting task stalls on a local optimum on two cores (measured: it learns to print
one "1" among filler tokens, mean reward about 0.3, and stays there; see ``docs/lab.md``). So the lab
starts from a *warm start*: the tiny model after a few supervised steps on correct answers, stopped as
soon as its sampled reward reaches :attr:`WarmStartRecipe.stop_at_reward`, well below the lab's target.
All reinforcement learning then happens in verl's ``main_ppo``; this module only prepares the initial
weights, once, like the assets builder does.

Supervised steps: prompt = the task's chat-formatted ``count n`` (as verl's dataset renders it, with the
generation prompt), target = ``1 2 ... n`` followed by the end-of-turn token; cross-entropy on the target
tokens only; AdamW. Every ``check_every`` steps the model is sampled (temperature 1, as the rollout does,
``max_new_tokens`` = the CPU profile's response length) on a fixed set of prompts (each count equally
often) and scored with the task's reward (:func:`verl_ext.tiny.task.count_reward`).

Layout of the output folder: ``model/`` (the warm-started weights, the tiny tokenizer), ``data/`` (the tiny
assets' parquet files, copied), ``manifest.json`` (the recipe, the tiny assets' manifest, the sampled
reward before and after, and the files' sha256). An existing folder whose manifest matches is reused.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

FORMAT = 1


@dataclass(frozen=True)
class WarmStartRecipe:
    seed: int = 0
    stop_at_reward: float = 0.75  # stop the supervised steps once the sampled mean reward reaches this
    learning_rate: float = 3e-3
    batch_size: int = 32
    max_steps: int = 400
    check_every: int = 5
    samples_per_count: int = 32  # evaluation prompts: every count 1..MAX_COUNT this many times
    max_new_tokens: int = 12  # the CPU profile's data.max_response_length


def _prompt_ids(tokenizer, count: int) -> list[int]:
    from verl_ext.tiny.task import INSTRUCTION

    ids = tokenizer.apply_chat_template([{"role": "user", "content": f"{INSTRUCTION} {count}"}], add_generation_prompt=True, tokenize=True)
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def _answer(count: int) -> str:
    return " ".join(str(i) for i in range(1, count + 1))


def sampled_reward(model, tokenizer, recipe: WarmStartRecipe, seed: int) -> float:
    """Mean task reward of samples at temperature 1 over every count, ``samples_per_count`` times each."""
    import torch

    from verl_ext.tiny.task import MAX_COUNT, count_reward

    counts = [count for count in range(1, MAX_COUNT + 1) for _ in range(recipe.samples_per_count)]
    prompts = [_prompt_ids(tokenizer, count) for count in counts]
    width = max(len(p) for p in prompts)
    pad = tokenizer.pad_token_id
    input_ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    attention = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        with torch.no_grad():
            output = model.generate(
                input_ids=input_ids, attention_mask=attention, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                max_new_tokens=recipe.max_new_tokens, pad_token_id=pad,
            )
    finally:
        torch.random.set_rng_state(generator_state)
    texts = tokenizer.batch_decode(output[:, width:], skip_special_tokens=True)
    return sum(count_reward(text, _answer(count)) for text, count in zip(texts, counts)) / len(counts)


def warm_start(model, tokenizer, recipe: WarmStartRecipe) -> dict[str, Any]:
    """Supervised steps on ``model`` (in place) until the sampled reward reaches the recipe's stop value."""
    import random

    import torch

    from verl_ext.tiny.task import MAX_COUNT

    rng = random.Random(recipe.seed)
    torch.manual_seed(recipe.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.learning_rate)
    eos = tokenizer.eos_token_id
    before = reward = sampled_reward(model, tokenizer, recipe, recipe.seed)
    step = 0
    while reward < recipe.stop_at_reward and step < recipe.max_steps:
        model.train()
        counts = [rng.randint(1, MAX_COUNT) for _ in range(recipe.batch_size)]
        rows = []
        for count in counts:
            prompt = _prompt_ids(tokenizer, count)
            target = tokenizer(_answer(count), add_special_tokens=False)["input_ids"] + [eos]
            rows.append((prompt + target, [-100] * len(prompt) + target))
        width = max(len(ids) for ids, _ in rows)
        input_ids = torch.tensor([ids + [tokenizer.pad_token_id] * (width - len(ids)) for ids, _ in rows])
        labels = torch.tensor([labels + [-100] * (width - len(labels)) for _, labels in rows])
        attention = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in rows])
        loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if step % recipe.check_every == 0:
            model.eval()
            reward = sampled_reward(model, tokenizer, recipe, recipe.seed + step)
    model.eval()
    if reward < recipe.stop_at_reward:
        raise RuntimeError(f"warm start: sampled reward {reward:.3f} < {recipe.stop_at_reward} after {step} supervised steps")
    return {"supervised_steps": step, "sampled_reward_before": round(before, 4), "sampled_reward_after": round(reward, 4)}


def build_warm_start_assets(tiny_assets: Path, out: Path, recipe: WarmStartRecipe = WarmStartRecipe()) -> dict[str, Any]:
    """Build (or reuse) the warm-started assets in ``out`` from the tiny assets in ``tiny_assets``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from verl_ext.tiny.assets import build_tiny_assets, check_replaceable, file_checksums, read_manifest, staged_folder

    tiny_assets, out = Path(os.path.abspath(tiny_assets)), Path(os.path.abspath(out))  # links refused, not followed
    check_replaceable(out)
    tiny_manifest = build_tiny_assets(tiny_assets)
    wanted = {"format": FORMAT, "recipe": asdict(recipe), "tiny_assets": tiny_manifest["files"]}
    manifest_path = out / "manifest.json"
    if manifest_path.is_file():
        manifest = read_manifest(manifest_path)
        if manifest.get("wanted") == wanted and manifest.get("files") == file_checksums(out):
            return manifest
    with staged_folder(out, prefix=".warm-start-") as staging:
        tokenizer = AutoTokenizer.from_pretrained(tiny_assets / "model")
        model = AutoModelForCausalLM.from_pretrained(tiny_assets / "model", dtype=torch.float32)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            outcome = warm_start(model, tokenizer, recipe)
        finally:
            torch.set_num_threads(threads)
        model.save_pretrained(staging / "model", safe_serialization=True)
        tokenizer.save_pretrained(staging / "model")
        shutil.copytree(tiny_assets / "data", staging / "data")
        manifest = {"wanted": wanted, **outcome, "files": file_checksums(staging)}
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


INITIAL_MODELS = ("warm", "random")


def initial_policy_assets(tiny_assets: Path, initial_model: str = "warm", recipe: WarmStartRecipe = WarmStartRecipe()) -> Path:
    """The assets folder a lab run starts from: ``random`` = the tiny assets as built (random weights),
    ``warm`` = the warm start, built next to them in ``<tiny_assets>-warm-start`` (both built if missing)."""
    from verl_ext.tiny.assets import build_tiny_assets

    if initial_model not in INITIAL_MODELS:
        raise ValueError(f"initial model {initial_model!r}; allowed: {', '.join(INITIAL_MODELS)}")
    tiny_assets = Path(os.path.abspath(tiny_assets))  # a link is refused by the builder, never followed
    build_tiny_assets(tiny_assets)
    if initial_model == "random":
        return tiny_assets
    out = tiny_assets.parent / f"{tiny_assets.name}-warm-start"
    build_warm_start_assets(tiny_assets, out, recipe)
    return out
