"""LoRA settings verl 0.9.1 would ignore, or fail on only inside Ray (verl_ext.checks.lora): refused by the driver's
check (what ``main_ppo`` runs before Ray, and the dry run), naming the key and what it accepts; the working LoRA
configurations (colocated, with overlap, on the engine's own pool with merged weights, vLLM with a pre-loaded
base) pass verl's own validate_config too."""

import json

import pytest

from tests.adversarial.test_config_keys import config_error_in
from tests.recipe_config import compose_recipe
from verl_ext.driver_checks import validate_run_config
from verl_ext.staleness.config import engine_pool_overrides

DELAYED = ("trainer.v1.trainer_mode=delayed_sync", "trainer.v1.delayed_sync.sync_interval=3",
           "trainer.v1.delayed_sync.sync_offset=1")
OVERLAP = ("trainer.v1.delayed_sync.overlap=true", "actor_rollout_ref.rollout.free_cache_engine=false")
SPLIT = (*engine_pool_overrides(1, 1, "gloo"), "actor_rollout_ref.rollout.tensor_model_parallel_size=1")
LORA = ("actor_rollout_ref.model.lora_rank=4", "actor_rollout_ref.model.lora_alpha=8")
CPU = ("actor_rollout_ref.rollout.name=cpu", "actor_rollout_ref.rollout.tensor_model_parallel_size=1")
VLLM = ("actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.tensor_model_parallel_size=1")


def adapter_folder(tmp_path, rank=4):
    folder = tmp_path / "adapter"
    folder.mkdir(exist_ok=True)
    (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": rank, "lora_alpha": 8}))
    return folder


GOOD = {
    "colocated": (*DELAYED, *CPU, *LORA),
    "colocated, overlap": (*DELAYED, *CPU, *OVERLAP, *LORA),
    "own pool, merged": (*DELAYED, "actor_rollout_ref.rollout.name=cpu", *OVERLAP, *SPLIT, *LORA,
                         "actor_rollout_ref.model.lora.merge=true"),
    "vllm, merged": (*VLLM, *LORA, "actor_rollout_ref.model.lora.merge=true"),
    "megatron rank key": ("actor_rollout_ref.actor.strategy=megatron", "actor_rollout_ref.model.lora.rank=8"),
}


@pytest.mark.filterwarnings("ignore:Disabled critic")
@pytest.mark.parametrize("name", list(GOOD))
def test_working_lora_configurations_pass(name):
    from verl_ext.checks.lora import check_lora

    config = compose_recipe(*GOOD[name])
    if name == "megatron rank key":  # verl's validate_config wants Megatron's own settings; ours is the point
        check_lora(config)
    else:
        validate_run_config(config)


def test_a_pre_trained_adapter_of_the_configured_rank_passes(tmp_path):
    from verl_ext.checks.lora import check_lora

    check_lora(compose_recipe(*DELAYED, "actor_rollout_ref.model.lora_rank=4",
                              f"actor_rollout_ref.model.lora_adapter_path={adapter_folder(tmp_path)}"))


BAD = [
    # LoRA keys without LoRA: ignored by verl
    ((), "actor_rollout_ref.model.lora_alpha=32", "actor_rollout_ref.model.lora_alpha"),
    ((), "actor_rollout_ref.model.target_modules=[q_proj]", "actor_rollout_ref.model.target_modules"),
    ((), "actor_rollout_ref.model.exclude_modules=lm_head", "actor_rollout_ref.model.exclude_modules"),
    ((), "actor_rollout_ref.model.lora.merge=true", "actor_rollout_ref.model.lora.merge"),
    ((), "+actor_rollout_ref.model.lora.fully_sharded_loras=true", "actor_rollout_ref.model.lora.fully_sharded_loras"),
    ((), "actor_rollout_ref.rollout.layered_summon=true", "actor_rollout_ref.rollout.layered_summon"),
    ((), "actor_rollout_ref.model.lora_adapter_path=/some/adapter", "actor_rollout_ref.model.lora_adapter_path"),
    # the other strategy's rank key
    ((), "actor_rollout_ref.model.lora.rank=8", "actor_rollout_ref.model.lora.rank"),
    (("actor_rollout_ref.actor.strategy=megatron",), "actor_rollout_ref.model.lora_rank=8",
     "actor_rollout_ref.model.lora_rank"),
    # an adapter that never reaches the engine (verl issue #7495): checkpoint-engine pushes send base weights only
    ((*DELAYED, "actor_rollout_ref.rollout.name=cpu", *OVERLAP, *SPLIT), "actor_rollout_ref.model.lora_rank=4",
     "actor_rollout_ref.model.lora.merge"),
    # vLLM options verl overwrites in adapter mode
    ((*VLLM, *LORA), "+actor_rollout_ref.rollout.engine_kwargs.vllm.max_loras=4",
     "actor_rollout_ref.rollout.engine_kwargs.vllm.max_loras"),
    ((*VLLM, *LORA), "+actor_rollout_ref.rollout.engine_kwargs.vllm.max_lora_rank=64",
     "actor_rollout_ref.rollout.engine_kwargs.vllm.max_lora_rank"),
    # what fails (or is ignored) inside Ray
    ((*CPU, *LORA), "actor_rollout_ref.rollout.layered_summon=true", "actor_rollout_ref.rollout.layered_summon"),
    ((*CPU, *LORA, "actor_rollout_ref.model.lora.merge=true", "actor_rollout_ref.rollout.load_format=safetensors"),
     "actor_rollout_ref.rollout.layered_summon=true", "actor_rollout_ref.rollout.layered_summon"),
    ((*CPU, *LORA, "actor_rollout_ref.model.lora.merge=true"), "+actor_rollout_ref.model.lora.fully_sharded_loras=true",
     "actor_rollout_ref.model.lora.fully_sharded_loras"),
]


@pytest.mark.filterwarnings("ignore:Disabled critic")
@pytest.mark.parametrize("base, override, key", BAD, ids=[override for _, override, _ in BAD])
def test_a_lora_setting_verl_would_ignore_is_refused_naming_the_key(base, override, key):
    with pytest.raises(Exception) as raised:
        validate_run_config(compose_recipe(*base, override))
    error = config_error_in(raised.value)
    assert error is not None, f"{type(raised.value).__name__}: {raised.value}"
    assert key in str(error) and "allowed values are" in str(error), str(error)


def test_a_pre_trained_adapter_is_checked_against_the_config(tmp_path):
    """verl builds the adapter from its own config: lora_rank must be its r (vLLM's slot), and the FSDP LoRA keys it
    ignores are refused; a folder without adapter_config.json is named."""
    from verl_ext.checks.lora import check_lora
    from verl_ext.config_values import ConfigError

    path = f"actor_rollout_ref.model.lora_adapter_path={adapter_folder(tmp_path, rank=8)}"
    with pytest.raises(ConfigError, match=r"lora_rank=4 is invalid: allowed values are the adapter's r \(8"):
        check_lora(compose_recipe(*DELAYED, "actor_rollout_ref.model.lora_rank=4", path))
    with pytest.raises(ConfigError, match="lora_alpha=32 is invalid"):
        check_lora(compose_recipe("actor_rollout_ref.model.lora_rank=8", "actor_rollout_ref.model.lora_alpha=32", path))
    with pytest.raises(ConfigError, match="adapter_config.json"):
        check_lora(compose_recipe("actor_rollout_ref.model.lora_rank=8",
                                  f"actor_rollout_ref.model.lora_adapter_path={tmp_path / 'missing'}"))


GPU_LORA = ("trainer.v1.trainer_mode=delayed_sync", "trainer.v1.delayed_sync.sync_interval=3",
            "trainer.v1.delayed_sync.sync_offset=1", "actor_rollout_ref.model.lora_rank=32",
            "actor_rollout_ref.model.lora_alpha=64", "actor_rollout_ref.rollout.load_format=safetensors",
            "actor_rollout_ref.rollout.layered_summon=true")


def test_the_dry_run_composes_verls_vllm_lora_path_for_the_gpu(tmp_path):
    """The GPU profile (vLLM in bf16, FSDP2) with LoRA adapter pushes under delayed_sync (3, 1), through the dry run
    a GPU run script's VERL_EXT_DRY_RUN uses: verl's whole validate_config runs, its vLLM LoRA rank lookup included
    (vLLM is not installed here: the lookup runs with verl's rule, said in a note), and the summary says what verl
    sets in vLLM (enable_lora, max_loras=1, max_lora_rank from lora_rank) and how the weights travel."""
    import importlib.util

    from verl_ext.gpu.profile import gpu_overrides
    from verl_ext.preflight import preflight
    from tests.recipe_config import RECIPE_CONFIG_DIR

    argv = [f"--config-path={RECIPE_CONFIG_DIR}", "--config-name=rec_trainer", *gpu_overrides(tmp_path), *GPU_LORA]
    result = preflight("gpu_lora", argv)
    assert result.ok, result.error
    lines = dict(result.lines)
    assert "vLLM enable_lora max_loras=1 max_lora_rank=32" in lines["lora"], lines["lora"]
    assert "adapter pushes (base weights loaded by the engine, layered; the engine sleeps at level 1)" in lines["lora"]
    if importlib.util.find_spec("vllm") is None:
        assert any("verl's LoRA rank lookup ran with verl's rule (lora_rank 32 -> vLLM max_lora_rank 32)" in note
                   for note in result.warnings), result.warnings
    import sys
    assert "verl.workers.rollout.vllm_rollout.utils" not in sys.modules or importlib.util.find_spec("vllm")

    # the same run with an adapter that cannot reach vLLM: refused by the dry run, naming the key
    bad = preflight("gpu_lora_layered_dummy", [*argv, "actor_rollout_ref.rollout.load_format=dummy"])
    assert not bad.ok and "actor_rollout_ref.rollout.layered_summon" in bad.error
    too_large = preflight("gpu_lora_rank", [*argv, "actor_rollout_ref.model.lora_rank=1024"])
    assert not too_large.ok and "actor_rollout_ref.model.lora_rank=1024" in too_large.error
