"""LoRA keys of the wrong type or range, target modules the model does not have, and a resume at another LoRA rank
(issue 41): refused by the driver's check before Ray, naming the key and what it accepts, on every path -- verl's
``main_ppo`` driver (``ray.init`` a tripwire), the dry run, and the launchers' composition
(:meth:`verl_ext.runs.compose.ComposedRun.check`). Before, ``lora_rank=abc`` was a bare ValueError, rank -1, 1.5 or a
million, alpha 0 or nan and an empty target list passed, and a missing target module or a resume at another rank failed
inside Ray after a minute.

The model whose modules are checked is built on the meta device from a ``config.json`` alone (no weights), as the check
does with a run's local model folder."""

import copy
import json

import pytest

from tests.adversarial.test_config_paths import RayStarted, compose, config_error_in, driver  # noqa: F401 (fixture)
from tests.adversarial.test_resume_checks import fsdp_checkpoint
from tests.recipe_config import compose_recipe
from verl_ext.runs.compose import check_as_the_driver
from verl_ext.checks.lora import check_lora
from verl_ext.config_values import ConfigError

MODEL = "actor_rollout_ref.model"
RANK = f"{MODEL}.lora_rank"
CPU = ("actor_rollout_ref.rollout.name=cpu", "actor_rollout_ref.rollout.tensor_model_parallel_size=1")
LORA = (f"{RANK}=4", f"{MODEL}.lora_alpha=8")

# (overrides, the key the message must name)
BAD_VALUES = [
    ((f"{RANK}=-1",), RANK),
    ((f"{RANK}=1.5",), RANK),
    ((f"{RANK}=abc",), RANK),
    ((f"{RANK}=true",), RANK),
    ((f"{RANK}=1000000",), RANK),
    ((f"{MODEL}.lora.rank=-2",), f"{MODEL}.lora.rank"),
    ((f"{RANK}=4", f"{MODEL}.lora_alpha=0"), f"{MODEL}.lora_alpha"),
    ((f"{RANK}=4", f"{MODEL}.lora_alpha=nan"), f"{MODEL}.lora_alpha"),
    ((f"{RANK}=4", f"{MODEL}.lora_alpha=-8"), f"{MODEL}.lora_alpha"),
    ((f"{RANK}=4", f"{MODEL}.lora_alpha=inf"), f"{MODEL}.lora_alpha"),
    ((f"{RANK}=4", f"{MODEL}.lora_alpha=abc"), f"{MODEL}.lora_alpha"),
    ((*LORA, f"{MODEL}.target_modules=[]"), f"{MODEL}.target_modules"),
    ((*LORA, f"{MODEL}.target_modules=''"), f"{MODEL}.target_modules"),
    ((*LORA, f"{MODEL}.target_modules=[q_proj,'']"), f"{MODEL}.target_modules"),
    ((*LORA, f"{MODEL}.target_modules=7"), f"{MODEL}.target_modules"),
    ((*LORA, f"{MODEL}.target_modules='q_proj('"), f"{MODEL}.target_modules"),  # not a regular expression
    ((*LORA, f"{MODEL}.exclude_modules=[1]"), f"{MODEL}.exclude_modules"),
    ((*LORA, f"{MODEL}.exclude_modules=''"), f"{MODEL}.exclude_modules"),
]


@pytest.mark.filterwarnings("ignore:Disabled critic")
@pytest.mark.parametrize("overrides, key", BAD_VALUES, ids=[" ".join(case[0]) for case in BAD_VALUES])
def test_a_lora_value_of_the_wrong_type_or_range_is_refused_naming_the_key(overrides, key):
    with pytest.raises(ConfigError) as raised:
        check_lora(compose_recipe(*CPU, *overrides))
    message = str(raised.value)
    assert message.startswith(f"{key}=") and "is invalid: allowed values are" in message, message


@pytest.mark.filterwarnings("ignore:Disabled critic")
@pytest.mark.parametrize("overrides", [(f"{RANK}=abc",), (*LORA, f"{MODEL}.target_modules=[]"),
                                       (f"{RANK}=4", f"{MODEL}.lora_alpha=nan")])
def test_the_driver_the_dry_run_and_the_launchers_refuse_it_before_ray(driver, tmp_path, overrides):
    """verl's main_ppo driver stops before ray.init with the dry run's error, word for word; the launchers' composition
    refuses the run (RunRefused) before anything is written."""
    from verl_ext.cpu.backend import CPUBackend
    from verl_ext.runs.compose import compose as compose_run
    from verl_ext.runs.outputs import Outputs
    from verl_ext.runs.run import Run, RunRefused

    _, config = compose([*CPU, *overrides])
    with pytest.raises(Exception) as dry_run:
        check_as_the_driver(copy.deepcopy(config))
    with pytest.raises(Exception) as raised:
        driver(config)
    assert not isinstance(raised.value, RayStarted), "Ray started before the check"
    error = config_error_in(raised.value)
    assert error is not None and str(error) == str(config_error_in(dry_run.value))
    assert str(error).startswith(overrides[-1].split("=")[0] + "="), str(error)
    run = Run("lora", overrides=overrides)
    with pytest.raises(RunRefused) as refused:
        compose_run(run, CPUBackend(tmp_path / "assets"), Outputs(tmp_path / "out")).check()
    assert overrides[-1].split("=")[0] in str(refused.value)
    assert not (tmp_path / "out").exists()


def model_folder(tmp_path, **overrides):
    """A local model folder holding only a small Qwen2 config.json: the check builds the model on the meta device."""
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    config = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64, "intermediate_size": 128,
              "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 64,
              "max_position_embeddings": 128, "tie_word_embeddings": True, **overrides}
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.filterwarnings("ignore:Disabled critic")
def test_target_modules_the_model_has_pass_and_others_are_named(tmp_path):
    model = f"{MODEL}.path={model_folder(tmp_path)}"
    for good in ("[q_proj,v_proj]", "[self_attn.o_proj,down_proj]", "all-linear", "'.*\\.(q|k)_proj'"):
        check_lora(compose_recipe(*CPU, model, *LORA, f"{MODEL}.target_modules={good}"))
    check_lora(compose_recipe(*CPU, model, *LORA, f"{MODEL}.exclude_modules=[lm_head]"))
    with pytest.raises(ConfigError) as raised:
        check_lora(compose_recipe(*CPU, model, *LORA, f"{MODEL}.target_modules=[q_proj,query_key_value]"))
    message = str(raised.value)
    assert message.startswith(f"{MODEL}.target_modules=") and "'query_key_value'" in message and "q_proj" in message
    assert "'q_proj'" not in message.split("no module named")[1]  # only the missing name is named
    with pytest.raises(ConfigError, match=f"{MODEL}.target_modules=.*matches none"):
        check_lora(compose_recipe(*CPU, model, *LORA, f"{MODEL}.target_modules='attention\\..*'"))
    with pytest.raises(ConfigError, match=f"{MODEL}.exclude_modules=.*'classifier'"):
        check_lora(compose_recipe(*CPU, model, *LORA, f"{MODEL}.exclude_modules=[classifier]"))
    with pytest.raises(ConfigError, match=f"{RANK}=128 is invalid: allowed values are an integer in 1..64"):
        check_lora(compose_recipe(*CPU, model, f"{RANK}=128"))


def lora_checkpoint(root, rank):
    """verl's FSDP checkpoint layout; ``rank`` > 0: with the lora_train_meta.json verl writes for a LoRA actor."""
    folder = fsdp_checkpoint(root)
    if rank:
        (folder / "actor" / "lora_train_meta.json").write_text(json.dumps({"r": rank, "lora_alpha": 8,
                                                                           "task_type": "CAUSAL_LM"}))
    return folder


@pytest.mark.filterwarnings("ignore:Disabled critic")
@pytest.mark.parametrize("saved, asked, words", [(8, 4, "saved with LoRA rank 8"), (8, 0, "saved with LoRA (rank 8)"),
                                                 (0, 4, "saved without LoRA")])
def test_a_resume_at_another_lora_rank_is_refused_before_ray(driver, tmp_path, saved, asked, words):
    lora_checkpoint(tmp_path / "ckpt", saved)
    overrides = [*CPU, f"trainer.default_local_dir={tmp_path / 'ckpt'}", "trainer.resume_mode=auto", f"{RANK}={asked}"]
    _, config = compose(overrides)
    with pytest.raises(Exception) as raised:
        driver(config)
    assert not isinstance(raised.value, RayStarted), "Ray started before the check"
    message = str(config_error_in(raised.value))
    assert words in message and f"{RANK}={asked}" in message and f"{RANK}={saved}" in message, message


@pytest.mark.filterwarnings("ignore:Disabled critic")
@pytest.mark.parametrize("rank", [0, 4])
def test_a_resume_at_the_saved_lora_rank_passes(tmp_path, rank):
    from verl_ext.checks.resume import check_resume

    lora_checkpoint(tmp_path / "ckpt", rank)
    check_resume(compose_recipe(*CPU, f"trainer.default_local_dir={tmp_path / 'ckpt'}", "trainer.resume_mode=auto",
                                f"{RANK}={rank}"))


@pytest.mark.parametrize("content", [b'{"r": 0}', b'{"r": "8"}', b"[8]", b"{"])
def test_a_lora_record_that_is_not_verls_is_named(tmp_path, content):
    from verl_ext.checks.resume import saved_lora_rank

    actor = fsdp_checkpoint(tmp_path) / "actor"
    (actor / "lora_train_meta.json").write_bytes(content)
    with pytest.raises(ConfigError, match="lora_train_meta.json"):
        saved_lora_rank(actor)
