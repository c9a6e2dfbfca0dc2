"""The run profiles: the REC paper's Table 1 columns (dataset + model + their hyperparameters), as overrides.

From the paper (arXiv 2509.24203): model, learning rate, batch size (prompts per step), K (responses per
prompt), weight decay, warmup steps, evaluation temperature/top-p (Table 1); AdamW (0.9, 0.999), gradient
clipping 1.0, constant warmup, training temperature 1.0 and top-p 1.0, no KL or entropy term (Table 2).
Our choices (the paper does not give them): prompt/response lengths, number of steps, evaluation frequency,
and the resources (rollout tensor parallel size, GPU memory, offloading) for one node of 8 x 80 GB GPUs.
"Evaluation N/A" in Table 1: the paper reports no evaluation accuracy for that column (``evaluate=False``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from verl_ext.overrides import hydra_string


@dataclass(frozen=True)
class Profile:
    name: str
    dataset: str  # a data_prep module: python -m data_prep.<dataset>
    model: str
    learning_rate: float
    prompts_per_step: int
    responses_per_prompt: int  # K
    weight_decay: float
    warmup_steps: int
    prompt_length: int
    response_length: int
    steps: int
    evaluate: bool = False
    eval_temperature: float = 1.0
    eval_top_p: float = 1.0
    val_file: str = "test.parquet"
    test_freq: int = -1
    rollout_tensor_parallel: int = 1
    gpu_memory_utilization: float = 0.6
    max_tokens_per_gpu: int = 16384
    offload: bool = False
    data_prep_args: tuple[str, ...] = ()
    note: str = ""

    def overrides(self, data_dir: Path, model_path: Optional[str] = None, total_steps: Optional[int] = None,
                  kl_to_initial: bool = True) -> list[str]:
        data = Path(data_dir) / self.dataset
        offload = str(self.offload).lower()
        out = [
            f"data.train_files={hydra_string(str(data / 'train.parquet'))}",
            f"data.val_files={hydra_string(str(data / self.val_file))}",
            f"data.train_batch_size={self.prompts_per_step}",
            f"data.max_prompt_length={self.prompt_length}",
            f"data.max_response_length={self.response_length}",
            "data.filter_overlong_prompts=true",
            "reward.custom_reward_function.path=pkg://verl_ext.rewards",
            "reward.custom_reward_function.name=compute_score",
            f"actor_rollout_ref.model.path={hydra_string(model_path or self.model)}",
            "actor_rollout_ref.model.use_remove_padding=true",
            "actor_rollout_ref.model.enable_gradient_checkpointing=true",
            # one gradient step per batch (the papers' setting): the mini-batch is the whole batch, one epoch
            f"actor_rollout_ref.actor.ppo_mini_batch_size={self.prompts_per_step}",
            "actor_rollout_ref.actor.ppo_epochs=1",
            "actor_rollout_ref.actor.optim.optimizer=AdamW",
            f"actor_rollout_ref.actor.optim.lr={self.learning_rate}",
            "actor_rollout_ref.actor.optim.betas=[0.9,0.999]",
            f"actor_rollout_ref.actor.optim.weight_decay={self.weight_decay}",
            f"actor_rollout_ref.actor.optim.lr_warmup_steps={self.warmup_steps}",
            "actor_rollout_ref.actor.optim.lr_scheduler_type=constant",
            "actor_rollout_ref.actor.optim.clip_grad=1.0",
            # no KL or entropy term in the loss or the reward (Table 2)
            "actor_rollout_ref.actor.entropy_coeff=0",
            "algorithm.use_kl_in_reward=false",
            f"actor_rollout_ref.rollout.n={self.responses_per_prompt}",
            "actor_rollout_ref.rollout.temperature=1.0",
            "actor_rollout_ref.rollout.top_p=1.0",
            "actor_rollout_ref.rollout.calculate_log_probs=true",
            "actor_rollout_ref.rollout.val_kwargs.do_sample=true",
            f"actor_rollout_ref.rollout.val_kwargs.temperature={self.eval_temperature}",
            f"actor_rollout_ref.rollout.val_kwargs.top_p={self.eval_top_p}",
            "actor_rollout_ref.rollout.val_kwargs.n=1",
            # resources: vLLM rollout colocated with an FSDP2 actor, token-budgeted micro-batches
            "actor_rollout_ref.rollout.name=vllm",
            f"actor_rollout_ref.rollout.tensor_model_parallel_size={self.rollout_tensor_parallel}",
            f"actor_rollout_ref.rollout.gpu_memory_utilization={self.gpu_memory_utilization}",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
            "actor_rollout_ref.actor.strategy=fsdp2",
            "actor_rollout_ref.actor.use_dynamic_bsz=true",
            f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={self.max_tokens_per_gpu}",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
            f"actor_rollout_ref.actor.fsdp_config.param_offload={offload}",
            f"actor_rollout_ref.actor.fsdp_config.optimizer_offload={offload}",
            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4",
            f"trainer.total_training_steps={total_steps or self.steps}",
            f"trainer.test_freq={self.test_freq}",
            f"trainer.val_before_train={str(self.evaluate).lower()}",
        ]
        if kl_to_initial:
            out += KL_TO_INITIAL + ["actor_rollout_ref.ref.fsdp_config.param_offload=true"]
        else:
            out.append("actor_rollout_ref.actor.use_kl_loss=false")
        return out


# Measure (not optimise) the KL to the initial policy, the paper's "KL divergence" panel: verl computes its KL
# loss against the reference model (= the initial weights) and logs actor/kl_loss; with coefficient 0 it adds
# nothing to the loss. Costs one reference forward pass per step.
KL_TO_INITIAL = [
    "actor_rollout_ref.actor.use_kl_loss=true",
    "actor_rollout_ref.actor.kl_loss_coef=0",
    "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
]

PROFILES: dict[str, Profile] = {
    profile.name: profile
    for profile in (
        Profile("gsm8k-qwen2.5-1.5b", "gsm8k", "Qwen/Qwen2.5-1.5B-Instruct", 1e-6, 96, 8, 0.01, 0, 512, 1024, 100,
                evaluate=True, test_freq=10),
        Profile("toolace-llama3.2-3b", "toolace", "meta-llama/Llama-3.2-3B-Instruct", 1e-6, 96, 8, 0.01, 0, 2048, 1024,
                100, data_prep_args=("--max_train_size", "5000"), note="the paper's 5k single-turn subset"),
        Profile("guru-qwen2.5-7b", "guru", "Qwen/Qwen2.5-7B-Instruct", 1e-6, 64, 16, 0.1, 80, 1024, 4096, 200,
                rollout_tensor_parallel=2),
        Profile("guru-qwen3-30b-a3b", "guru", "Qwen/Qwen3-30B-A3B", 2e-6, 72, 16, 0.1, 80, 1024, 8192, 200,
                rollout_tensor_parallel=4, gpu_memory_utilization=0.5, offload=True,
                note="30B parameters: FSDP parameter and optimizer offloading; more nodes are better (NNODES)"),
        Profile("math-llama3.1-8b", "math", "meta-llama/Llama-3.1-8B-Instruct", 5e-7, 64, 16, 0.1, 40, 1024, 2048,
                200, evaluate=True, eval_temperature=0.6, val_file="math500.parquet", test_freq=10,
                rollout_tensor_parallel=2, note="evaluated on MATH-500 (Figure 11)"),
    )
}

# Short names users may write for a profile.
ALIASES = {"gsm8k": "gsm8k-qwen2.5-1.5b", "toolace": "toolace-llama3.2-3b", "math": "math-llama3.1-8b"}


def profile_named(name: str) -> Profile:
    full = ALIASES.get(name, name)
    if full not in PROFILES:
        aliases = ", ".join(f"{alias} = {value}" for alias, value in ALIASES.items())
        raise ValueError(f"unknown profile {name!r}; allowed: {', '.join(PROFILES)} (aliases: {aliases})")
    return PROFILES[full]
