# Sourced by every run script: builds each run's overrides from run_scripts/lib/presets.sh and runs it in one
# of three modes (docs/run-scripts.md):
#
#   VERL_EXT_DRY_RUN=1    compose the full config with verl's Hydra config, run verl's validate_config and
#                         verl-ext's checks, print the settings that matter (python -m verl_ext.preflight);
#                         no GPU, model or data needed
#   VERL_EXT_CPU_SMOKE=1  run it for real for 2 steps on the CPU backend, the tiny model and synthetic data
#                         substituted (run_scripts/cpu/profile.sh, applied after the script's overrides)
#   VERL_EXT_GPU_SMOKE=1  run it for real for 2 steps on one GPU with the script's own GPU settings, only the
#                         model and data swapped for the tiny GPU ones, plus what one GPU or the offline kit
#                         needs (run_scripts/gpu/profile.sh: VERL_EXT_GPU_SMOKE_OVERRIDES; docs/gpu.md)
#   (neither)             the real run on GPUs: prepare the data if missing, then python -m verl.trainer.main_ppo
#
# Environment variables users change (defaults in brackets):
#   MODEL_PATH [the profile's hub model]   DATA_DIR [<repo>/data]   RAW_DATA_PATH [download from the hub]
#   N_GPUS_PER_NODE [8]   NNODES [1]   PROJECT_NAME [the figure]   EXPERIMENT_NAME [<algorithm>-<setting>]
#   LOGGER [console,file; "file" is always added]   OUTPUT_DIR [<repo>/outputs: metrics, checkpoints]
#   TOTAL_STEPS [the profile's]   KL_TO_INITIAL [1]   ZERO_VARIANCE_MASKING [0; 1 in gsm8k/offpolicy_grpo.sh]
#   PYTHON [python]
#   ALGORITHMS, SETTINGS, LEARNING_RATES: restrict a figure script's grid; CONTINUE_ON_ERROR [0]

VERL_EXT_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

verl_ext_die() {
  echo "[verl-ext] error: $*" >&2
  exit 2
}

verl_ext_note() {
  echo "[verl-ext] $*" >&2
}

# shellcheck source=run_scripts/lib/presets.sh
source "$VERL_EXT_REPO/run_scripts/lib/presets.sh"

: "${PYTHON:=python}"
: "${DATA_DIR:=$VERL_EXT_REPO/data}"
: "${OUTPUT_DIR:=$VERL_EXT_REPO/outputs}"
: "${N_GPUS_PER_NODE:=8}"
: "${NNODES:=1}"
: "${LOGGER:=console,file}"
: "${VERL_EXT_DRY_RUN:=0}"
: "${VERL_EXT_CPU_SMOKE:=0}"
: "${VERL_EXT_GPU_SMOKE:=0}"
VERL_EXT_SMOKE_STEPS=2

verl_ext_check_environment() {
  local name value
  for name in DATA_DIR OUTPUT_DIR; do
    eval "value=\${$name}"
    case "$value" in
      *[[:space:],=]*) verl_ext_die "$name='$value' contains a space, ',' or '=': Hydra overrides cannot carry it" ;;
    esac
  done
  verl_ext_is_count "$N_GPUS_PER_NODE" && [ "$N_GPUS_PER_NODE" -ge 1 ] || verl_ext_die "N_GPUS_PER_NODE='$N_GPUS_PER_NODE' must be an integer >= 1"
  verl_ext_is_count "$NNODES" && [ "$NNODES" -ge 1 ] || verl_ext_die "NNODES='$NNODES' must be an integer >= 1"
  case "$VERL_EXT_DRY_RUN$VERL_EXT_CPU_SMOKE$VERL_EXT_GPU_SMOKE" in
    000|001|010|100|101|110) ;;
    011|111) verl_ext_die "VERL_EXT_CPU_SMOKE=1 and VERL_EXT_GPU_SMOKE=1 exclude each other: pick one" ;;
    *) verl_ext_die "VERL_EXT_DRY_RUN, VERL_EXT_CPU_SMOKE and VERL_EXT_GPU_SMOKE take 0 or 1 (got '$VERL_EXT_DRY_RUN', '$VERL_EXT_CPU_SMOKE', '$VERL_EXT_GPU_SMOKE')" ;;
  esac
}

# The logger list as a Hydra list, with verl's "file" backend always in it (verl-ext plot reads its JSONL).
verl_ext_logger_list() {
  local list=",${LOGGER// /},"
  case "$list" in
    *,file,*) ;;
    *) list="${list}file," ;;
  esac
  list="${list#,}"
  echo "[${list%,}]"
}

# verl_ext_build_cell PROFILE ALGORITHM SETTING LEARNING_RATE PROJECT EXPERIMENT
# Fills VERL_EXT_CELL (the run's overrides) and VERL_EXT_RUN_* (its names).
verl_ext_build_cell() {
  local profile="$1" algorithm="$2" setting="$3" learning_rate="$4" project="$5" experiment="$6"
  VERL_EXT_CELL=()
  verl_ext_profile "$profile"
  verl_ext_profile_overrides
  verl_ext_algorithm "$algorithm"
  verl_ext_setting "$setting"
  VERL_EXT_RUN_LABEL="$ALGORITHM_LABEL"
  if [ -n "$learning_rate" ]; then
    verl_ext_is_number "$learning_rate" || verl_ext_die "learning rate '$learning_rate' is not a number"
    VERL_EXT_CELL+=("actor_rollout_ref.actor.optim.lr=$learning_rate")
    VERL_EXT_RUN_LABEL="$ALGORITHM_LABEL-lr$learning_rate"
  fi
  case "${ZERO_VARIANCE_MASKING:-0}" in
    0) ;;
    1)
      # off-policy GRPO's zero-variance masking in the delayed_sync trainer: groups whose rewards are all
      # equal leave each step's batch, no prompts are drawn to replace them (docs/staleness.md)
      VERL_EXT_CELL+=("trainer.v1.delayed_sync.zero_variance_masking=true")
      VERL_EXT_RUN_LABEL="$VERL_EXT_RUN_LABEL-zvm"
      ;;
    *) verl_ext_die "ZERO_VARIANCE_MASKING='$ZERO_VARIANCE_MASKING' must be 0 or 1" ;;
  esac
  VERL_EXT_RUN_PROFILE="$PROFILE_NAME"
  VERL_EXT_RUN_DATASET="$PROFILE_DATASET"
  VERL_EXT_RUN_VAL_FILE="$PROFILE_VAL_FILE"
  VERL_EXT_RUN_DATA_PREP_ARGS="$PROFILE_DATA_PREP_ARGS"
  VERL_EXT_RUN_ALGORITHM="$algorithm"
  VERL_EXT_RUN_SETTING="$setting"
  VERL_EXT_RUN_LEARNING_RATE="$learning_rate"
  VERL_EXT_RUN_PROJECT="${project:-verl-ext-$PROFILE_NAME}"
  VERL_EXT_RUN_EXPERIMENT="${experiment:-$VERL_EXT_RUN_LABEL-$setting}"
  VERL_EXT_CELL+=(
    "trainer.project_name=$VERL_EXT_RUN_PROJECT"
    "trainer.experiment_name=$VERL_EXT_RUN_EXPERIMENT"
    "trainer.logger=$(verl_ext_logger_list)"
    "trainer.nnodes=$NNODES"
    "trainer.n_gpus_per_node=$N_GPUS_PER_NODE"
  )
}

# verl_ext_merge OVERRIDES...: fills VERL_EXT_MERGED with the overrides, a key set again later replacing the
# earlier entry (last one wins, as in verl_ext.cpu.profile.merge_overrides); a "+key" stays "+key" when replaced.
verl_ext_merge() {
  local all=("$@") keys=() key i count="$#" later earlier entry
  for entry in "$@"; do
    key="${entry%%=*}"
    keys+=("${key#"${key%%[!+~]*}"}")
  done
  VERL_EXT_MERGED=()
  for ((i = 0; i < count; i++)); do
    key="${keys[$i]}"
    later=" ${keys[*]:$((i + 1))} "
    case "$later" in *" $key "*) continue ;; esac
    entry="${all[$i]}"
    case "$entry" in
      +*|~*) ;;
      *)
        earlier=" ${all[*]:0:$i}"
        case "$earlier" in *" +$key="*) entry="+$entry" ;; esac
        ;;
    esac
    VERL_EXT_MERGED+=("$entry")
  done
}

# verl_ext_json_string TEXT: sets VERL_EXT_JSON to TEXT as a JSON string (no subshell: this runs per override).
verl_ext_json_string() {
  local text="$1"
  case "$text" in
    *$'\n'*|*$'\t'*|*$'\r'*) verl_ext_die "a value contains a newline or tab: '$text'" ;;
  esac
  text="${text//\\/\\\\}"
  text="${text//\"/\\\"}"
  VERL_EXT_JSON="\"$text\""
}

# The CPU profile (run_scripts/cpu/profile.sh: env vars and VERL_EXT_CPU_OVERRIDES), loaded once.
verl_ext_load_cpu_profile() {
  [ -n "${VERL_EXT_CPU_PROFILE_LOADED:-}" ] && return 0
  VERL_EXT_TINY_ASSETS="${VERL_EXT_TINY_ASSETS:-$VERL_EXT_REPO/assets/tiny}"
  if [ "$VERL_EXT_DRY_RUN" != 1 ]; then
    verl_ext_note "building the tiny CPU assets in $VERL_EXT_TINY_ASSETS (skipped when up to date)"
    "$PYTHON" -m verl_ext.tiny.assets --out "$VERL_EXT_TINY_ASSETS" >&2 || verl_ext_die "building the tiny assets failed"
  fi
  # shellcheck source=run_scripts/cpu/profile.sh
  source "$VERL_EXT_REPO/run_scripts/cpu/profile.sh" || verl_ext_die "run_scripts/cpu/profile.sh failed"
  [ "${#VERL_EXT_CPU_OVERRIDES[@]}" -gt 0 ] || verl_ext_die "run_scripts/cpu/profile.sh defined no VERL_EXT_CPU_OVERRIDES"
  VERL_EXT_CPU_PROFILE_LOADED=1
}

# The GPU profile (run_scripts/gpu/profile.sh: env vars, VERL_EXT_GPU_SMOKE_OVERRIDES), loaded once.
verl_ext_load_gpu_profile() {
  [ -n "${VERL_EXT_GPU_PROFILE_LOADED:-}" ] && return 0
  VERL_EXT_TINY_GPU_ASSETS="${VERL_EXT_TINY_GPU_ASSETS:-$VERL_EXT_REPO/assets/tiny-gpu}"
  if [ "$VERL_EXT_DRY_RUN" != 1 ]; then
    N_GPUS_PER_NODE=1 verl_ext_require_gpus  # one GPU, whatever the script asks for; checked before building anything
    verl_ext_note "building the tiny GPU assets in $VERL_EXT_TINY_GPU_ASSETS (skipped when up to date)"
    "$PYTHON" -m verl_ext.tiny.assets --size gpu --out "$VERL_EXT_TINY_GPU_ASSETS" >&2 || verl_ext_die "building the tiny GPU assets failed"
  fi
  # shellcheck source=run_scripts/gpu/profile.sh
  source "$VERL_EXT_REPO/run_scripts/gpu/profile.sh" || verl_ext_die "run_scripts/gpu/profile.sh failed"
  [ "${#VERL_EXT_GPU_SMOKE_OVERRIDES[@]}" -gt 0 ] || verl_ext_die "run_scripts/gpu/profile.sh defined no VERL_EXT_GPU_SMOKE_OVERRIDES"
  VERL_EXT_GPU_PROFILE_LOADED=1
}

# verl_ext_final_overrides EXTRA...: the cell + the user's extra overrides (+ the CPU profile and the smoke caps
# in smoke mode, applied last so they win), merged into VERL_EXT_FINAL.
verl_ext_final_overrides() {
  local all=("${VERL_EXT_CELL[@]}" "$@")
  VERL_EXT_METRICS_DIR="$OUTPUT_DIR/metrics/$VERL_EXT_RUN_PROJECT"
  local checkpoints="$OUTPUT_DIR/checkpoints/$VERL_EXT_RUN_PROJECT/$VERL_EXT_RUN_EXPERIMENT"
  if [ "$VERL_EXT_CPU_SMOKE" = 1 ]; then
    verl_ext_load_cpu_profile
    VERL_EXT_METRICS_DIR="$OUTPUT_DIR/cpu-smoke/metrics/$VERL_EXT_RUN_PROJECT"
    checkpoints="$OUTPUT_DIR/cpu-smoke/checkpoints/$VERL_EXT_RUN_PROJECT/$VERL_EXT_RUN_EXPERIMENT"
    all+=("${VERL_EXT_CPU_OVERRIDES[@]}"
      "trainer.total_training_steps=$VERL_EXT_SMOKE_STEPS"
      "trainer.save_freq=-1"
      "trainer.resume_mode=disable")
  elif [ "$VERL_EXT_GPU_SMOKE" = 1 ]; then
    verl_ext_load_gpu_profile
    VERL_EXT_METRICS_DIR="$OUTPUT_DIR/gpu-smoke/metrics/$VERL_EXT_RUN_PROJECT"
    checkpoints="$OUTPUT_DIR/gpu-smoke/checkpoints/$VERL_EXT_RUN_PROJECT/$VERL_EXT_RUN_EXPERIMENT"
    all+=("${VERL_EXT_GPU_SMOKE_OVERRIDES[@]}"
      "trainer.total_training_steps=$VERL_EXT_SMOKE_STEPS"
      "trainer.save_freq=-1"
      "trainer.resume_mode=disable")
  fi
  VERL_EXT_METRICS_FILE="$VERL_EXT_METRICS_DIR/$VERL_EXT_RUN_EXPERIMENT.jsonl"
  all+=("trainer.default_local_dir=$checkpoints"
    # verl's file logger writes every step's metrics here (read by verl-ext plot); passed to every Ray worker
    "+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH=$VERL_EXT_METRICS_FILE")
  verl_ext_merge "${all[@]}"
  VERL_EXT_FINAL=("${VERL_EXT_MERGED[@]}")
}

verl_ext_main_ppo_args() {
  VERL_EXT_ARGV=("--config-path=$VERL_EXT_REPO/recipe/rec/config" "--config-name=rec_trainer" "${VERL_EXT_FINAL[@]}")
}

# One queued dry-run record: {"name": ..., "argv": [...]} (read by python -m verl_ext.preflight --queue).
verl_ext_queue_record() {
  local queue="$1" record arg separator=""
  verl_ext_json_string "$2"
  record="{\"name\": $VERL_EXT_JSON, \"argv\": ["
  shift 2
  for arg in "$@"; do
    verl_ext_json_string "$arg"
    record="$record$separator$VERL_EXT_JSON"
    separator=", "
  done
  printf '%s]}\n' "$record" >> "$queue"
}

verl_ext_count_gpus() {
  local count=0 visible
  if command -v nvidia-smi > /dev/null 2>&1; then
    count="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')" || count=0
  fi
  if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
    visible="$(printf '%s' "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c '[^[:space:]]')" || visible=0
    [ "$visible" -lt "$count" ] && count="$visible"
  fi
  echo "$count"
}

# Stop before anything starts when this node has fewer GPUs than the run asks for.
verl_ext_require_gpus() {
  [ -n "${VERL_EXT_GPUS_CHECKED:-}" ] && return 0
  [ "${VERL_EXT_SKIP_GPU_CHECK:-0}" = 1 ] && return 0
  local found script
  found="$(verl_ext_count_gpus)"
  script="bash ${VERL_EXT_SCRIPT:-run_scripts/...} ${VERL_EXT_SCRIPT_ARGS:-}"
  if [ "$found" -lt "$N_GPUS_PER_NODE" ]; then
    cat >&2 <<EOF
[verl-ext] This run needs $N_GPUS_PER_NODE GPU(s) per node (N_GPUS_PER_NODE=$N_GPUS_PER_NODE, NNODES=$NNODES);
[verl-ext] found $found NVIDIA GPU(s) on this machine (nvidia-smi, CUDA_VISIBLE_DEVICES). Nothing was started.
[verl-ext]   check the full configuration without a GPU:  VERL_EXT_DRY_RUN=1 $script
[verl-ext]   run it for real for 2 steps on the CPU:      VERL_EXT_CPU_SMOKE=1 $script
[verl-ext]   see the papers' effects on a CPU:            verl-ext lab
[verl-ext]   fewer GPUs on this node:                     N_GPUS_PER_NODE=<n> $script
EOF
    exit 1
  fi
  VERL_EXT_GPUS_CHECKED=1
}

# Prepare the dataset with data_prep when its parquet files are missing or incomplete (once per script).
# Prepared data counts only when data_prep's manifest says the files are one complete run with these
# flags (python -m data_prep.manifest: checks sizes and SHA-256); otherwise it is prepared again.
verl_ext_prepare_data() {
  local dataset="$VERL_EXT_RUN_DATASET" directory="$DATA_DIR/$VERL_EXT_RUN_DATASET"
  case " ${VERL_EXT_PREPARED:-} " in *" $dataset "*) return 0 ;; esac
  if [ ! -f "$directory/train.parquet" ] || [ ! -f "$directory/$VERL_EXT_RUN_VAL_FILE" ] \
    || ! "$PYTHON" -m data_prep.manifest "$directory" train.parquet "$VERL_EXT_RUN_VAL_FILE" \
      --dataset "$dataset" --args="$VERL_EXT_RUN_DATA_PREP_ARGS" >&2; then
    verl_ext_note "preparing $dataset in $directory (python -m data_prep.$dataset)"
    # shellcheck disable=SC2086  # PROFILE_DATA_PREP_ARGS holds several flags
    "$PYTHON" -m "data_prep.$dataset" --local_save_dir "$directory" \
      ${RAW_DATA_PATH:+--local_dataset_path "$RAW_DATA_PATH"} $VERL_EXT_RUN_DATA_PREP_ARGS \
      || verl_ext_die "data preparation failed: python -m data_prep.$dataset --local_save_dir $directory"
    [ -f "$directory/$VERL_EXT_RUN_VAL_FILE" ] || verl_ext_die "data_prep.$dataset wrote no $directory/$VERL_EXT_RUN_VAL_FILE"
  fi
  VERL_EXT_PREPARED="${VERL_EXT_PREPARED:-} $dataset"
}

# The run's description next to its metrics, read by verl-ext plot (curve label and panel row).
verl_ext_write_run_description() {
  mkdir -p "$VERL_EXT_METRICS_DIR"
  local record="{" field value separator=""
  for field in run:VERL_EXT_RUN_LABEL group:VERL_EXT_RUN_SETTING profile:VERL_EXT_RUN_PROFILE \
    algorithm:VERL_EXT_RUN_ALGORITHM setting:VERL_EXT_RUN_SETTING learning_rate:VERL_EXT_RUN_LEARNING_RATE; do
    eval "value=\${${field#*:}}"
    verl_ext_json_string "$value"
    record="$record$separator\"${field%%:*}\": $VERL_EXT_JSON"
    separator=", "
  done
  printf '%s, "cpu_smoke": %s}\n' "$record" "$([ "$VERL_EXT_CPU_SMOKE" = 1 ] && echo true || echo false)" \
    > "$VERL_EXT_METRICS_DIR/$VERL_EXT_RUN_EXPERIMENT.run.json"
  # verl's file logger truncates its file: keep an earlier run's (or a resumed run's first part's) metrics
  if [ -s "$VERL_EXT_METRICS_FILE" ]; then
    local part=1
    while [ -e "${VERL_EXT_METRICS_FILE%.jsonl}.part$part.jsonl" ]; do part=$((part + 1)); done
    mv "$VERL_EXT_METRICS_FILE" "${VERL_EXT_METRICS_FILE%.jsonl}.part$part.jsonl"
    verl_ext_note "kept the earlier metrics as ${VERL_EXT_METRICS_FILE%.jsonl}.part$part.jsonl (verl-ext plot joins the parts)"
  fi
}

# verl_ext_validate_runs NAME ARGV... | verl_ext_validate_runs --queue FILE: the checks of the dry run
# (python -m verl_ext.preflight, the same function main_ppo's driver calls) before a real run prepares or
# downloads data; only the failures are printed.
verl_ext_validate_runs() {
  if [ "$1" = --queue ]; then
    "$PYTHON" -m verl_ext.preflight --quiet --queue "$2" >&2 \
      || verl_ext_die "the configuration check failed (above): nothing was prepared or started"
    return 0
  fi
  local name="$1"
  shift
  "$PYTHON" -m verl_ext.preflight --quiet --name "$name" -- "$@" >&2 \
    || verl_ext_die "the configuration check of $name failed (above): nothing was prepared or started"
}

# verl_ext_check_overrides ARG...: a script's extra arguments are Hydra overrides (KEY=VALUE, +KEY=VALUE,
# ~KEY); anything else (an option, a typo) is an error now, not after data preparation.
verl_ext_check_overrides() {
  local arg
  for arg in "$@"; do
    case "$arg" in
      -*) verl_ext_die "'$arg' is not an option of this script: extra arguments are Hydra overrides KEY=VALUE" ;;
      "~"?*|?*=*) ;;
      *) verl_ext_die "'$arg' is not a Hydra override: write KEY=VALUE (+KEY=VALUE adds a key, ~KEY removes one)" ;;
    esac
  done
}

# verl_ext_launch EXTRA...: run the cell built by verl_ext_build_cell in the mode chosen by the environment.
verl_ext_launch() {
  verl_ext_final_overrides "$@"
  verl_ext_main_ppo_args
  local name="$VERL_EXT_RUN_PROJECT/$VERL_EXT_RUN_EXPERIMENT"
  if [ "$VERL_EXT_DRY_RUN" = 1 ]; then
    [ "$VERL_EXT_CPU_SMOKE" = 1 ] && name="$name (cpu smoke)"
    [ "$VERL_EXT_GPU_SMOKE" = 1 ] && name="$name (gpu smoke)"
    if [ -n "${VERL_EXT_PREFLIGHT_QUEUE:-}" ]; then
      verl_ext_queue_record "$VERL_EXT_PREFLIGHT_QUEUE" "$name" "${VERL_EXT_ARGV[@]}"
      return 0
    fi
    "$PYTHON" -m verl_ext.preflight --name "$name" -- "${VERL_EXT_ARGV[@]}"
    return
  fi
  if [ "$VERL_EXT_CPU_SMOKE" != 1 ] && [ "$VERL_EXT_GPU_SMOKE" != 1 ]; then
    verl_ext_require_gpus
    [ "${VERL_EXT_VALIDATED:-0}" = 1 ] || verl_ext_validate_runs "$name" "${VERL_EXT_ARGV[@]}"
    verl_ext_prepare_data
  fi
  verl_ext_write_run_description
  verl_ext_note "run $name: metrics in $VERL_EXT_METRICS_FILE"
  verl_ext_note "$PYTHON -m verl.trainer.main_ppo ${VERL_EXT_ARGV[*]}"
  VERL_FILE_LOGGER_PATH="$VERL_EXT_METRICS_FILE" "$PYTHON" -m verl.trainer.main_ppo "${VERL_EXT_ARGV[@]}"
}

# verl_ext_run PROFILE ALGORITHM [SETTING] [OVERRIDE...]: one run (run_scripts/run.sh).
verl_ext_run() {
  verl_ext_check_environment
  [ $# -ge 2 ] || verl_ext_die "usage: run.sh PROFILE ALGORITHM[@EPS_LOW_EPS_HIGH] [SETTING] [hydra overrides...]"
  local profile="$1" algorithm="$2" setting=on_policy
  shift 2
  if [ $# -gt 0 ]; then
    case "$1" in
      *=*) ;;
      *) setting="$1"; shift ;;
    esac
  fi
  verl_ext_check_overrides "$@"
  verl_ext_build_cell "$profile" "$algorithm" "$setting" "" "${PROJECT_NAME:-}" "${EXPERIMENT_NAME:-}"
  verl_ext_launch "$@"
}

verl_ext_words() {
  printf '%s' "$1" | tr ',' ' '
}

# verl_ext_sweep PROFILE "ALGORITHMS" "SETTINGS" "LEARNING_RATES" PROJECT [OVERRIDE...]
# Every (algorithm, setting, learning rate) cell, one after the other. An empty LEARNING_RATES keeps the
# profile's learning rate. EXPERIMENT_NAME, when set, prefixes every cell's name.
verl_ext_sweep() {
  verl_ext_check_environment
  local profile="$1" algorithms setting_list rates project="$5" algorithm setting rate
  algorithms="$(verl_ext_words "$2")"
  setting_list="$(verl_ext_words "$3")"
  rates="$(verl_ext_words "$4")"
  shift 5
  verl_ext_check_overrides "$@"
  [ -n "$rates" ] || rates="-"
  local cells=() failed=() status=0 total=0 queue_owner=0 prefix="${EXPERIMENT_NAME:+$EXPERIMENT_NAME-}"
  # build every cell first: a typo in any name fails before the first run starts
  for algorithm in $algorithms; do
    for setting in $setting_list; do
      for rate in $rates; do
        [ "$rate" = "-" ] && rate=""
        verl_ext_build_cell "$profile" "$algorithm" "$setting" "$rate" "$project" ""
        cells+=("$algorithm|$setting|$rate|$prefix$VERL_EXT_RUN_EXPERIMENT")
      done
    done
  done
  total="${#cells[@]}"
  [ "$total" -gt 0 ] || verl_ext_die "the grid is empty (ALGORITHMS='$2' SETTINGS='$3')"
  verl_ext_note "$project: $total run(s) of profile $profile"
  if [ "$VERL_EXT_DRY_RUN" = 1 ] && [ -z "${VERL_EXT_PREFLIGHT_QUEUE:-}" ]; then
    VERL_EXT_PREFLIGHT_QUEUE="$(mktemp "${TMPDIR:-/tmp}/verl-ext-preflight.XXXXXX")"
    queue_owner=1
  fi
  local cell
  if [ "$VERL_EXT_DRY_RUN" != 1 ] && [ "$VERL_EXT_CPU_SMOKE" != 1 ] && [ "$VERL_EXT_GPU_SMOKE" != 1 ]; then
    # a real sweep: check every cell in one process before the first one prepares data or starts
    verl_ext_require_gpus
    local checks
    checks="$(mktemp "${TMPDIR:-/tmp}/verl-ext-checks.XXXXXX")"
    for cell in "${cells[@]}"; do
      IFS='|' read -r algorithm setting rate experiment <<< "$cell"
      verl_ext_build_cell "$profile" "$algorithm" "$setting" "$rate" "$project" "$experiment"
      verl_ext_final_overrides "$@"
      verl_ext_main_ppo_args
      verl_ext_queue_record "$checks" "$VERL_EXT_RUN_PROJECT/$VERL_EXT_RUN_EXPERIMENT" "${VERL_EXT_ARGV[@]}"
    done
    ( verl_ext_validate_runs --queue "$checks" ) || { status=$?; rm -f "$checks"; exit "$status"; }
    rm -f "$checks"
    VERL_EXT_VALIDATED=1
  fi
  for cell in "${cells[@]}"; do
    IFS='|' read -r algorithm setting rate experiment <<< "$cell"
    verl_ext_build_cell "$profile" "$algorithm" "$setting" "$rate" "$project" "$experiment"
    if verl_ext_launch "$@"; then
      :
    else
      status=$?
      failed+=("$experiment")
      [ "${CONTINUE_ON_ERROR:-0}" = 1 ] || { verl_ext_note "run $experiment failed (exit $status): stopping (CONTINUE_ON_ERROR=1 goes on)"; break; }
    fi
  done
  VERL_EXT_VALIDATED=0
  if [ "$queue_owner" = 1 ]; then
    "$PYTHON" -m verl_ext.preflight --queue "$VERL_EXT_PREFLIGHT_QUEUE"
    status=$?
    rm -f "$VERL_EXT_PREFLIGHT_QUEUE"
    unset VERL_EXT_PREFLIGHT_QUEUE
    return "$status"
  fi
  if [ "${#failed[@]}" -gt 0 ]; then
    verl_ext_note "failed run(s): ${failed[*]}"
    return 1
  fi
  if [ "$VERL_EXT_DRY_RUN" != 1 ]; then
    verl_ext_note "plot the runs: verl-ext plot ${VERL_EXT_METRICS_DIR}"
  fi
  return 0
}

# verl_ext_figure PROJECT PROFILE "ALGORITHMS" "SETTINGS" "LEARNING_RATES" [OVERRIDE...]: a figure script's grid,
# restricted or replaced by the environment variables ALGORITHMS, SETTINGS and LEARNING_RATES when set.
verl_ext_figure() {
  local project="${PROJECT_NAME:-$1}" profile="$2"
  local algorithms="${ALGORITHMS:-$3}" setting_list="${SETTINGS:-$4}" rates="${LEARNING_RATES:-$5}"
  shift 5
  verl_ext_sweep "$profile" "$algorithms" "$setting_list" "$rates" "$project" "$@"
}
