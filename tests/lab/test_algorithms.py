"""The lab's algorithm names: parsing, and the overrides each name gives, checked against verl and the run scripts."""

import subprocess
from pathlib import Path

import pytest

from verl_ext.lab.algorithms import ALGORITHMS, DEFAULT_EPSILONS, AlgorithmChoice, parse_algorithm, parse_algorithms
from verl_ext.lab.plan import ON_POLICY, LabRun, Setting

REPO = Path(__file__).resolve().parents[2]


def test_clipped_names_take_the_default_or_given_range_and_unclipped_ones_none():
    assert parse_algorithm("rec_oneside_nois") == AlgorithmChoice("rec_oneside_nois", DEFAULT_EPSILONS)
    assert parse_algorithm("rec_oneside_nois", (0.3, 0.4)).epsilons == (0.3, 0.4)
    assert parse_algorithm("rec_oneside_nois@0.6_2.0").epsilons == (0.6, 2.0)
    assert parse_algorithm("reinforce").epsilons is None
    assert parse_algorithm(" grpo ").estimator == "grpo"


def test_labels_name_a_non_default_range_only():
    assert parse_algorithm("rec_oneside_nois").label == "rec_oneside_nois"
    assert parse_algorithm("rec_oneside_nois@0.6_2.0").label == "rec_oneside_nois@0.6_2"
    assert parse_algorithm("grpo", (0.6, 2.0)).label == "grpo@0.6_2"


@pytest.mark.parametrize(
    "spec, message",
    [
        ("ppo", "unknown algorithm 'ppo'; allowed: reinforce, grpo"),
        ("reinforce@0.6_2.0", "'reinforce' has no clipping range"),
        ("rec_oneside_nois@0.6", "write the clipping range as NAME@EPS_LOW_EPS_HIGH"),
        ("rec_oneside_nois@a_b", "must be two numbers"),
        ("rec_oneside_nois@1.5_2.0", "epsilon_low must be in [0, 1]"),
        ("rec_oneside_nois@0.2_-1", "epsilon_high must be >= 0"),
    ],
)
def test_bad_specs_are_rejected_with_the_reason(spec, message):
    with pytest.raises(ValueError) as error:
        parse_algorithm(spec)
    assert message in str(error.value)


def test_a_list_rejects_duplicates_and_emptiness():
    assert [choice.label for choice in parse_algorithms("reinforce, rec_oneside_nois,")] == ["reinforce", "rec_oneside_nois"]
    with pytest.raises(ValueError, match="rec_oneside_nois given twice"):
        parse_algorithms("rec_oneside_nois,rec_oneside_nois@0.2_0.2")
    with pytest.raises(ValueError, match="no algorithm given"):
        parse_algorithms(" , ")


def presets_sh_cell(spec: str) -> list[str]:
    """The overrides run_scripts/lib/presets.sh gives an algorithm spec (bash, the GPU run scripts' source)."""
    script = (
        'verl_ext_die() { echo "$*" >&2; exit 3; }; source run_scripts/lib/presets.sh; VERL_EXT_CELL=(); '
        f'verl_ext_algorithm "{spec}"; printf "%s\\n" "${{VERL_EXT_CELL[@]}}"'
    )
    result = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True, check=True)
    return result.stdout.splitlines()


@pytest.mark.parametrize("spec", [*ALGORITHMS, "rec_oneside_nois@0.6_2.0", "grpo@0.3_0.28"])
def test_each_name_trains_what_the_gpu_run_scripts_train(spec):
    assert sorted(parse_algorithm(spec).overrides()) == sorted(presets_sh_cell(spec))


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_each_lab_run_composes_and_verl_builds_its_actor_config(name):
    """The run's overrides through the recipe config (Hydra) and verl's actor config with verl-ext's checks."""
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, POLICY_LOSS_REGISTRY
    from verl.utils.config import omega_conf_to_dataclass

    from tests.recipe_config import compose_recipe
    from verl_ext.staleness.config import delayed_sync_config_from

    run = LabRun(parse_algorithm(name), Setting(20, 0), seed=3, steps=5, learning_rate=0.02)
    config = compose_recipe(*run.overrides())
    actor = omega_conf_to_dataclass(config.actor_rollout_ref.actor)
    assert actor.policy_loss.loss_mode == ALGORITHMS[name][1] in POLICY_LOSS_REGISTRY
    assert config.algorithm.adv_estimator == ALGORITHMS[name][0]
    assert ALGORITHMS[name][0] in ADV_ESTIMATOR_REGISTRY or ALGORITHMS[name][0] == "grpo"
    assert actor.optim.lr == 0.02 and actor.use_kl_loss and actor.kl_loss_coef == 0
    assert config.data.seed == 3 and config.actor_rollout_ref.rollout.seed == 3
    block = delayed_sync_config_from(config)
    assert (block.sync_interval, block.sync_offset, block.offline) == (20, 0, False)


def test_settings_label_and_reject_bad_knobs():
    assert ON_POLICY.label == "on-policy"
    assert Setting(20, 0).label == "m=20,n=0"
    assert Setting(offline=True).label == "offline"
    with pytest.raises(ValueError, match="sync_interval must be an integer >= 1"):
        Setting(0, 0)
    with pytest.raises(ValueError, match="sync_offset must be an integer >= 0"):
        Setting(1, -1)


def test_run_names_are_unique_and_file_system_safe():
    runs = [
        LabRun(parse_algorithm(spec), setting, seed)
        for spec in ("rec_oneside_nois", "rec_oneside_nois@0.6_2.0", "reinforce")
        for setting in (ON_POLICY, Setting(20, 0), Setting(1, 10), Setting(offline=True))
        for seed in (0, 1)
    ]
    names = [run.name for run in runs]
    assert len(set(names)) == len(names)
    assert all("/" not in name and "@" not in name and " " not in name for name in names)
