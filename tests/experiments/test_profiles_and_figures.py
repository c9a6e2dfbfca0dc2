"""Profiles and figure grids: every figure cell parses and is written in the one spelling; each profile with a
preset passes the dry run's checks (Hydra compose, verl's validate_config, verl-ext's loss and run checks)."""

from pathlib import Path

import pytest

from verl_ext import preflight
from verl_ext.algorithms.presets import parse_algorithm
from verl_ext.experiments.catalogue import FIGURES, figure_named, labelled_points
from verl_ext.overrides import merge_overrides, override_key
from verl_ext.experiments.profiles import ALIASES, PROFILES, profile_named
from verl_ext.runs.names import SAFE
from verl_ext.staleness.setting import parse_setting
from verl_ext.runs.backend import Backend
from verl_ext.runs.compose import compose
from verl_ext.runs.outputs import Outputs
from verl_ext.runs.run import Run

REPO = Path(__file__).resolve().parents[2]


def test_every_cell_of_every_figure_parses_and_is_written_as_its_label():
    for project, figure in FIGURES.items():
        assert SAFE.match(project) and figure_named(project) is figure and figure.name == project
        assert (REPO / figure.script).is_file(), figure.script
        assert figure.profile in PROFILES
        for spec in (choice.label for choice in figure.algorithms()):
            assert parse_algorithm(spec).label == spec, f"{project}: write {spec!r} as {parse_algorithm(spec).label!r}"
        for name in (setting.label for setting in figure.settings()):
            assert parse_setting(name).label == name, f"{project}: write {name!r} as {parse_setting(name).label!r}"
        assert all(rate > 0 for rate in figure.learning_rates)
        assert all("=" in override for override in figure.overrides)
    with pytest.raises(ValueError, match="unknown figure 'figure2'; allowed: gsm8k-figure2"):
        figure_named("figure2")
    # the catalogue is written in the one spelling: another fails where it is written
    with pytest.raises(ValueError, match="write 'rec_oneside_nois@0.6_2.0' as 'rec_oneside_nois@0.6_2'"):
        labelled_points(["rec_oneside_nois@0.6_2.0"], ["offline"])
    with pytest.raises(ValueError, match="write 'mixed' as 'sync_interval_16_offset_8'"):
        labelled_points(["grpo"], ["mixed"])


def test_profile_aliases_and_an_unknown_profile():
    assert {alias: profile_named(alias).name for alias in ALIASES} == ALIASES
    with pytest.raises(ValueError, match="unknown profile 'gsm'; allowed: gsm8k-qwen2.5-1.5b.*aliases: gsm8k = "):
        profile_named("gsm")


def test_profile_overrides_set_each_key_once_and_name_the_data_and_model(tmp_path):
    for profile in PROFILES.values():
        overrides = profile.overrides(tmp_path, model_path="/models/m", total_steps=7, kl_to_initial=False)
        keys = [override_key(override) for override in overrides]
        assert len(keys) == len(set(keys)), profile.name
        values = dict(override.split("=", 1) for override in overrides)
        assert values["data.train_files"] == str(tmp_path / profile.dataset / "train.parquet")
        assert values["actor_rollout_ref.model.path"] == "/models/m"
        assert values["trainer.total_training_steps"] == "7"
        assert values["actor_rollout_ref.actor.use_kl_loss"] == "false"


# One case per profile, each with a preset that exercises another part of the presets (estimator, outer margins,
# aggregation, beta, temperature, pi_old recomputed, dropped responses) and another setting.
CASES = [
    ("gsm8k-qwen2.5-1.5b", "grpo", "sync_interval_20"),
    ("gsm8k-qwen2.5-1.5b", "opmd", "mixed"),
    ("gsm8k-qwen2.5-1.5b", "red_drop", "on_policy"),
    ("toolace-llama3.2-3b", "rec_ring_nois@0.3_0.5", "sync_offset_10"),
    ("guru-qwen2.5-7b", "red_weight", "on_policy"),
    ("guru-qwen3-30b-a3b", "rec_gspo_nois@0.0006_0.0008", "sync_interval_8"),
    ("math-llama3.1-8b", "offpolicy_grpo", "offline"),
]


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    """The dry run of every case in one batch (the YAML files parsed once), as the run scripts check theirs."""
    data = tmp_path_factory.mktemp("data")
    runs = []
    for profile, algorithm, setting in CASES:
        overrides = merge_overrides(
            profile_named(profile).overrides(data),
            parse_algorithm(algorithm).overrides(),
            parse_setting(setting).overrides(),
            ["trainer.nnodes=1", "trainer.n_gpus_per_node=8"],
        )
        runs.append((f"{profile}/{algorithm}/{setting}", Run("case", overrides=tuple(overrides))))
    unread = Run("unread", overrides=(*runs[0][1].overrides, "actor_rollout_ref.actor.policy_loss.reg_coef=0.5"))  # grpo's loss does not read beta
    outputs = Outputs(tmp_path_factory.mktemp("outputs"))
    return {result.name: result for result in preflight.preflight_many(
        [(name, compose(run, Backend(), outputs)) for name, run in [*runs, ("unread", unread)]])}


@pytest.mark.parametrize("profile, algorithm, setting", CASES)
def test_each_profile_with_a_preset_passes_the_dry_runs_checks(checked, profile, algorithm, setting):
    result = checked[f"{profile}/{algorithm}/{setting}"]
    assert result.ok, result.error
    values = result.settings
    choice, staleness = parse_algorithm(algorithm), parse_setting(setting)
    assert values["actor_rollout_ref.actor.policy_loss.loss_mode"] == choice.loss_mode
    assert values["algorithm.adv_estimator"] == choice.estimator
    assert (values["actor_rollout_ref.actor.clip_ratio_low"], values["actor_rollout_ref.actor.clip_ratio_high"]) == (
        choice.epsilons or (0.2, 0.2))
    assert (values["trainer.v1.delayed_sync.sync_interval"], values["trainer.v1.delayed_sync.sync_offset"],
            values["trainer.v1.delayed_sync.offline"]) == (staleness.sync_interval, staleness.sync_offset, staleness.offline)
    assert values["actor_rollout_ref.actor.optim.lr"] == profile_named(profile).learning_rate
    assert f"offline={staleness.offline} ({staleness.label})" in dict(result.lines)["staleness"]


def test_a_loss_key_the_preset_does_not_read_fails_the_dry_run_naming_it_and_its_readers(checked):
    result = checked["unread"]
    assert not result.ok
    assert "actor_rollout_ref.actor.policy_loss.reg_coef=0.5 is invalid" in result.error
    assert "loss_mode='rec_oneside_is', which does not read it. Only ['asymre', 'opmd'] read it" in result.error
