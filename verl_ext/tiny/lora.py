"""A pre-trained LoRA adapter for the tiny model: the start of a LoRA run whose policy differs from the base model.

A fresh LoRA adapter is the base model (peft initialises ``lora_B`` to zero), so at a run's first step an engine that
never received the adapter generates exactly what the actor computes: the lag-0 log-prob check cannot tell (verl
issue #7495 went unnoticed that way). This adapter has non-zero ``lora_B``: started from it
(``actor_rollout_ref.model.lora_adapter_path``, with ``lora_rank`` = its rank), version 0 already differs from the
base model, and an engine without the adapter fails the check at step 0.

    python -m verl_ext.tiny.lora --assets assets/tiny --out assets/tiny-lora     (deterministic; ~5 s)

The folder is peft's (``adapter_config.json``, ``adapter_model.safetensors``), what verl's FSDP actor loads with
``PeftModel.from_pretrained``; it is written whole or not at all.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

DEFAULT_RANK = 4
DEFAULT_ALPHA = 8
# the standard deviation of lora_B: large enough that the adapter's policy differs from the base model's by a few
# hundredths of a nat per token (KL 0.026 measured on a counting prompt; the lag-0 tolerance is 1e-3), small enough
# to leave the counting task learnable
LORA_B_STD = 0.15


def build_tiny_adapter(assets_dir: str | Path, out: str | Path, rank: int = DEFAULT_RANK, alpha: int = DEFAULT_ALPHA,
                       seed: int = 0) -> Path:
    """Write a LoRA adapter of the tiny model in ``assets_dir`` to ``out`` (replaced whole); returns ``out``."""
    import torch
    from peft import LoraConfig, TaskType, get_peft_model
    from transformers import AutoModelForCausalLM

    from verl_ext.tiny.assets import staged_folder

    out = Path(out)
    model = AutoModelForCausalLM.from_pretrained(str(Path(assets_dir) / "model"), dtype=torch.float32)
    torch.manual_seed(seed)  # lora_A's initialisation
    model = get_peft_model(model, LoraConfig(task_type=TaskType.CAUSAL_LM, r=rank, lora_alpha=alpha,
                                             target_modules="all-linear", bias="none"))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in sorted(model.named_parameters()):
            if "lora_B" in name:
                parameter.copy_(LORA_B_STD * torch.randn(parameter.shape, generator=generator))
    with staged_folder(out, ".lora-") as staging:
        model.save_pretrained(str(staging))
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_ext.tiny.lora", description=__doc__.split("\n\n")[0])
    parser.add_argument("--assets", type=Path, required=True, help="the tiny assets (python -m verl_ext.tiny.assets)")
    parser.add_argument("--out", type=Path, required=True, help="the adapter folder to write")
    parser.add_argument("--rank", type=int, default=DEFAULT_RANK)
    parser.add_argument("--alpha", type=int, default=DEFAULT_ALPHA)
    args = parser.parse_args(argv)
    if not (args.assets / "model").is_dir():
        parser.error(f"--assets {args.assets}: no model/ folder (build it with python -m verl_ext.tiny.assets)")
    print(build_tiny_adapter(args.assets, args.out, args.rank, args.alpha))
    return 0


if __name__ == "__main__":
    sys.exit(main())
