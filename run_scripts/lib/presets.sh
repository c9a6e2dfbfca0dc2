# Sourced by run_scripts/lib/common.sh. The names a run script is built from, each mapped to verl overrides:
#
#   profile     a column of the REC paper's Table 1 (dataset + model + their hyperparameters), plus our
#               resource choices for one 8-GPU node
#   algorithm   an estimator + policy loss pair (docs/algorithms.md), optionally with @EPS_LOW_EPS_HIGH
#   setting     a staleness setting of the paper (trainer.v1.trainer_mode=delayed_sync)
#
# Every function here only fills shell variables or appends to the array VERL_EXT_CELL; nothing runs.
# Written for bash 3.2 too (macOS): no associative arrays, no mapfile.

VERL_EXT_PROFILES="gsm8k-qwen2.5-1.5b toolace-llama3.2-3b guru-qwen2.5-7b guru-qwen3-30b-a3b math-llama3.1-8b"
VERL_EXT_ALGORITHMS="reinforce grpo rec_oneside_is rec_oneside_nois rec_twoside_is rec_twoside_nois rec_ring_is rec_ring_nois rec_gspo_is rec_gspo_nois opmd asymre red_drop red_weight offpolicy_grpo"
VERL_EXT_SETTINGS="on_policy sync_interval_<M> sync_offset_<N> sync_interval_<M>_offset_<N> mixed offline"

# verl_ext_profile NAME: set PROFILE_* for one column of Table 1 (arXiv 2509.24203).
#   From the paper: model, learning rate, batch size (prompts per step), K (responses per prompt),
#   weight decay, warmup steps, evaluation temperature/top-p (Table 1); AdamW (0.9, 0.999), gradient
#   clipping 1.0, constant warmup, training temperature 1.0 and top-p 1.0, no KL or entropy term (Table 2).
#   Our choices (the paper does not give them): prompt/response lengths, number of steps, evaluation
#   frequency, and the resource settings (rollout tensor parallel size, memory, offloading).
verl_ext_profile() {
  PROFILE_NAME="$1"
  # Table 2, shared by every column
  PROFILE_TRAIN_TEMPERATURE=1.0
  PROFILE_TRAIN_TOP_P=1.0
  # evaluation: "N/A" in Table 1 means the paper reports no evaluation accuracy for that column
  PROFILE_EVAL=false
  PROFILE_EVAL_TEMPERATURE=1.0
  PROFILE_EVAL_TOP_P=1.0
  PROFILE_VAL_FILE=test.parquet
  PROFILE_TEST_FREQ=-1
  # resources (our choice), for one node of 8 x 80 GB GPUs
  PROFILE_ROLLOUT_TP=1
  PROFILE_GPU_MEMORY=0.6
  PROFILE_MAX_TOKENS_PER_GPU=16384
  PROFILE_OFFLOAD=false
  PROFILE_DATA_PREP_ARGS=""
  case "$PROFILE_NAME" in
    gsm8k|gsm8k-qwen2.5-1.5b)
      PROFILE_NAME=gsm8k-qwen2.5-1.5b
      PROFILE_DATASET=gsm8k PROFILE_MODEL=Qwen/Qwen2.5-1.5B-Instruct
      PROFILE_LR=1e-6 PROFILE_BATCH=96 PROFILE_K=8 PROFILE_WEIGHT_DECAY=0.01 PROFILE_WARMUP=0
      PROFILE_EVAL=true PROFILE_EVAL_TEMPERATURE=1.0 PROFILE_EVAL_TOP_P=1.0 PROFILE_TEST_FREQ=10
      PROFILE_PROMPT_LENGTH=512 PROFILE_RESPONSE_LENGTH=1024 PROFILE_STEPS=100
      ;;
    toolace|toolace-llama3.2-3b)
      PROFILE_NAME=toolace-llama3.2-3b
      PROFILE_DATASET=toolace PROFILE_MODEL=meta-llama/Llama-3.2-3B-Instruct
      PROFILE_LR=1e-6 PROFILE_BATCH=96 PROFILE_K=8 PROFILE_WEIGHT_DECAY=0.01 PROFILE_WARMUP=0
      PROFILE_PROMPT_LENGTH=2048 PROFILE_RESPONSE_LENGTH=1024 PROFILE_STEPS=100
      # the paper's 5k single-turn subset (single-turn is data_prep.toolace's default)
      PROFILE_DATA_PREP_ARGS="--max_train_size 5000"
      ;;
    guru-qwen2.5-7b)
      PROFILE_DATASET=guru PROFILE_MODEL=Qwen/Qwen2.5-7B-Instruct
      PROFILE_LR=1e-6 PROFILE_BATCH=64 PROFILE_K=16 PROFILE_WEIGHT_DECAY=0.1 PROFILE_WARMUP=80
      PROFILE_PROMPT_LENGTH=1024 PROFILE_RESPONSE_LENGTH=4096 PROFILE_STEPS=200
      PROFILE_ROLLOUT_TP=2
      ;;
    guru-qwen3-30b-a3b)
      PROFILE_DATASET=guru PROFILE_MODEL=Qwen/Qwen3-30B-A3B
      PROFILE_LR=2e-6 PROFILE_BATCH=72 PROFILE_K=16 PROFILE_WEIGHT_DECAY=0.1 PROFILE_WARMUP=80
      PROFILE_PROMPT_LENGTH=1024 PROFILE_RESPONSE_LENGTH=8192 PROFILE_STEPS=200
      # 30B parameters: FSDP parameter and optimizer offloading; more nodes are better (NNODES)
      PROFILE_ROLLOUT_TP=4 PROFILE_GPU_MEMORY=0.5 PROFILE_OFFLOAD=true
      ;;
    math|math-llama3.1-8b)
      PROFILE_NAME=math-llama3.1-8b
      PROFILE_DATASET=math PROFILE_MODEL=meta-llama/Llama-3.1-8B-Instruct
      PROFILE_LR=5e-7 PROFILE_BATCH=64 PROFILE_K=16 PROFILE_WEIGHT_DECAY=0.1 PROFILE_WARMUP=40
      # evaluated on MATH-500 (Figure 11)
      PROFILE_EVAL=true PROFILE_EVAL_TEMPERATURE=0.6 PROFILE_EVAL_TOP_P=1.0 PROFILE_TEST_FREQ=10
      PROFILE_VAL_FILE=math500.parquet
      PROFILE_PROMPT_LENGTH=1024 PROFILE_RESPONSE_LENGTH=2048 PROFILE_STEPS=200
      PROFILE_ROLLOUT_TP=2
      ;;
    *)
      verl_ext_die "unknown profile '$PROFILE_NAME'. Allowed: $VERL_EXT_PROFILES (aliases: gsm8k, toolace, math)"
      ;;
  esac
}

# verl_ext_profile_overrides: the overrides of the profile set by verl_ext_profile (appended to VERL_EXT_CELL).
verl_ext_profile_overrides() {
  local model="${MODEL_PATH:-$PROFILE_MODEL}"
  local data="$DATA_DIR/$PROFILE_DATASET"
  VERL_EXT_CELL+=(
    "data.train_files=$data/train.parquet"
    "data.val_files=$data/$PROFILE_VAL_FILE"
    "data.train_batch_size=$PROFILE_BATCH"
    "data.max_prompt_length=$PROFILE_PROMPT_LENGTH"
    "data.max_response_length=$PROFILE_RESPONSE_LENGTH"
    "data.filter_overlong_prompts=true"
    "reward.custom_reward_function.path=pkg://verl_ext.rewards"
    "reward.custom_reward_function.name=compute_score"
    "actor_rollout_ref.model.path=$model"
    "actor_rollout_ref.model.use_remove_padding=true"
    "actor_rollout_ref.model.enable_gradient_checkpointing=true"
    # one gradient step per batch (the papers' setting): the mini-batch is the whole batch, one epoch
    "actor_rollout_ref.actor.ppo_mini_batch_size=$PROFILE_BATCH"
    "actor_rollout_ref.actor.ppo_epochs=1"
    "actor_rollout_ref.actor.optim.optimizer=AdamW"
    "actor_rollout_ref.actor.optim.lr=$PROFILE_LR"
    "actor_rollout_ref.actor.optim.betas=[0.9,0.999]"
    "actor_rollout_ref.actor.optim.weight_decay=$PROFILE_WEIGHT_DECAY"
    "actor_rollout_ref.actor.optim.lr_warmup_steps=$PROFILE_WARMUP"
    "actor_rollout_ref.actor.optim.lr_scheduler_type=constant"
    "actor_rollout_ref.actor.optim.clip_grad=1.0"
    # no KL or entropy term in the loss or the reward (Table 2)
    "actor_rollout_ref.actor.entropy_coeff=0"
    "algorithm.use_kl_in_reward=false"
    "actor_rollout_ref.rollout.n=$PROFILE_K"
    "actor_rollout_ref.rollout.temperature=$PROFILE_TRAIN_TEMPERATURE"
    "actor_rollout_ref.rollout.top_p=$PROFILE_TRAIN_TOP_P"
    "actor_rollout_ref.rollout.calculate_log_probs=true"
    "actor_rollout_ref.rollout.val_kwargs.do_sample=true"
    "actor_rollout_ref.rollout.val_kwargs.temperature=$PROFILE_EVAL_TEMPERATURE"
    "actor_rollout_ref.rollout.val_kwargs.top_p=$PROFILE_EVAL_TOP_P"
    "actor_rollout_ref.rollout.val_kwargs.n=1"
    # resources: vLLM rollout colocated with an FSDP2 actor, token-budgeted micro-batches
    "actor_rollout_ref.rollout.name=vllm"
    "actor_rollout_ref.rollout.tensor_model_parallel_size=$PROFILE_ROLLOUT_TP"
    "actor_rollout_ref.rollout.gpu_memory_utilization=$PROFILE_GPU_MEMORY"
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4"
    "actor_rollout_ref.actor.strategy=fsdp2"
    "actor_rollout_ref.actor.use_dynamic_bsz=true"
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=$PROFILE_MAX_TOKENS_PER_GPU"
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4"
    "actor_rollout_ref.actor.fsdp_config.param_offload=$PROFILE_OFFLOAD"
    "actor_rollout_ref.actor.fsdp_config.optimizer_offload=$PROFILE_OFFLOAD"
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4"
    "trainer.total_training_steps=${TOTAL_STEPS:-$PROFILE_STEPS}"
    "trainer.test_freq=$PROFILE_TEST_FREQ"
    "trainer.val_before_train=$PROFILE_EVAL"
  )
  if [ "${KL_TO_INITIAL:-1}" = 1 ]; then
    # Measure (not optimise) the KL to the initial policy, the paper's "KL divergence" panel: verl computes
    # its KL loss against the reference model (= the initial weights) and logs actor/kl_loss; with
    # coefficient 0 it adds nothing to the loss. Costs one reference forward pass per step.
    VERL_EXT_CELL+=(
      "actor_rollout_ref.actor.use_kl_loss=true"
      "actor_rollout_ref.actor.kl_loss_coef=0"
      "actor_rollout_ref.actor.kl_loss_type=low_var_kl"
      "actor_rollout_ref.ref.fsdp_config.param_offload=true"
    )
  else
    VERL_EXT_CELL+=("actor_rollout_ref.actor.use_kl_loss=false")
  fi
}

# verl_ext_algorithm SPEC: SPEC is NAME or NAME@EPS_LOW_EPS_HIGH (e.g. rec_oneside_nois@0.6_2.0).
# Sets ALGORITHM_LABEL (for run names) and appends the algorithm's overrides to VERL_EXT_CELL.
verl_ext_algorithm() {
  local spec="$1" name epsilons="" low=0.2 high=0.2 clipped=true estimator=rec loss
  name="${spec%%@*}"
  if [ "$name" != "$spec" ]; then
    epsilons="${spec#*@}"
    low="${epsilons%%_*}"
    high="${epsilons#*_}"
    if [ "$low" = "$epsilons" ] || ! verl_ext_is_number "$low" || ! verl_ext_is_number "$high"; then
      verl_ext_die "algorithm '$spec': write the clipping range as NAME@EPS_LOW_EPS_HIGH, e.g. rec_oneside_nois@0.6_2.0"
    fi
  fi
  loss="$name"
  case "$name" in
    reinforce) loss=rec_reinforce clipped=false ;;
    # The paper's GRPO (section 4.1): std-normalised advantages with the clipped importance-sampled
    # gradient of eq. 8, which is exactly rec_oneside_is's gradient (verl's own `vanilla` adds dual-clip).
    grpo) estimator=grpo loss=rec_oneside_is ;;
    rec_oneside_is|rec_oneside_nois|rec_twoside_is|rec_twoside_nois|rec_ring_is|rec_ring_nois) ;;
    rec_gspo_is|rec_gspo_nois) ;;
    opmd|asymre) clipped=false ;;
    # RED-Drop (appendix B.6): drop excess negatives, recompute the advantages, plain REINFORCE loss
    red_drop) estimator=red_drop loss=rec_reinforce clipped=false ;;
    red_weight) clipped=false ;;
    offpolicy_grpo) estimator=grpo ;;
    *) verl_ext_die "unknown algorithm '$name'. Allowed: $VERL_EXT_ALGORITHMS (clipped ones take @EPS_LOW_EPS_HIGH)" ;;
  esac
  if [ -n "$epsilons" ] && [ "$clipped" = false ]; then
    verl_ext_die "algorithm '$spec': '$name' has no clipping range (@EPS_LOW_EPS_HIGH applies to grpo, rec_*, offpolicy_grpo)"
  fi
  ALGORITHM_LABEL="$name"
  [ -n "$epsilons" ] && ALGORITHM_LABEL="$name-eps${low}_$high"
  VERL_EXT_CELL+=(
    "algorithm.adv_estimator=$estimator"
    "actor_rollout_ref.actor.policy_loss.loss_mode=$loss"
    "actor_rollout_ref.actor.clip_ratio_low=$low"
    "actor_rollout_ref.actor.clip_ratio_high=$high"
  )
  case "$name" in
    grpo|offpolicy_grpo) VERL_EXT_CELL+=("algorithm.norm_adv_by_std_in_grpo=true") ;;
    rec_ring_is|rec_ring_nois) VERL_EXT_CELL+=(
      "actor_rollout_ref.actor.policy_loss.outer_clip_ratio_low=0.6"
      "actor_rollout_ref.actor.policy_loss.outer_clip_ratio_high=2.0") ;;
    # REC-GSPO's formula is a mean over responses of token means (appendix B.7)
    rec_gspo_is|rec_gspo_nois) VERL_EXT_CELL+=("actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean") ;;
    opmd|asymre) VERL_EXT_CELL+=("actor_rollout_ref.actor.policy_loss.reg_coef=0.1") ;;
    red_weight) VERL_EXT_CELL+=("actor_rollout_ref.actor.policy_loss.weight_temperature=1.0") ;;
  esac
  if [ "$name" = offpolicy_grpo ]; then
    # r = pi/alpha needs pi_k (recomputed old_log_prob) and alpha (rollout log-probs as IS weights r')
    VERL_EXT_CELL+=(
      "algorithm.rollout_correction.bypass_mode=false"
      "algorithm.rollout_correction.rollout_is=token"
      "algorithm.rollout_correction.rollout_is_threshold=1e6"
    )
  else
    # pi_old = the behaviour policy (the recipe's default, repeated here so every run states it)
    VERL_EXT_CELL+=("algorithm.rollout_correction.bypass_mode=true")
  fi
}

# verl_ext_setting NAME: the staleness setting (appendix B.2), appended to VERL_EXT_CELL.
#   on_policy                      sync_interval=1, sync_offset=0
#   sync_interval_M                weights pushed every M steps
#   sync_offset_N                  each batch consumed N steps after its weights were pushed
#   sync_interval_M_offset_N       both (the paper's "mixed" is sync_interval_16_offset_8)
#   mixed                          sync_interval=16, sync_offset=8 (Figure 2's caption)
#   offline                        every batch from the initial policy (the paper's stress test)
verl_ext_setting() {
  local setting="$1" interval=1 offset=0 offline=false rest
  case "$setting" in
    on_policy) ;;
    offline) offline=true ;;
    mixed) interval=16 offset=8 ;;
    sync_interval_*_offset_*)
      rest="${setting#sync_interval_}"
      interval="${rest%%_offset_*}"
      offset="${rest#*_offset_}"
      ;;
    sync_interval_*) interval="${setting#sync_interval_}" ;;
    sync_offset_*) offset="${setting#sync_offset_}" ;;
    *) verl_ext_die "unknown setting '$setting'. Allowed: $VERL_EXT_SETTINGS" ;;
  esac
  if ! verl_ext_is_count "$interval" || ! verl_ext_is_count "$offset" || [ "$interval" -lt 1 ]; then
    verl_ext_die "setting '$setting': sync_interval must be an integer >= 1 and sync_offset an integer >= 0 (at most 9 digits)"
  fi
  VERL_EXT_CELL+=(
    "trainer.v1.trainer_mode=delayed_sync"
    "trainer.v1.delayed_sync.sync_interval=$interval"
    "trainer.v1.delayed_sync.sync_offset=$offset"
    "trainer.v1.delayed_sync.offline=$offline"
  )
}

verl_ext_is_number() {
  case "$1" in
    ''|*[!0-9.eE+-]*) return 1 ;;
    *) return 0 ;;
  esac
}

# A whole number of at most 9 digits: bash compares it without overflow (a longer one made `[ -lt ]` fail
# with "integer expression expected" and let the value through).
verl_ext_is_count() {
  case "$1" in
    ''|*[!0-9]*|??????????*) return 1 ;;
    *) return 0 ;;
  esac
}
