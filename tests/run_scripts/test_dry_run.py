"""Every figure script's runs, dry-run in this process: the config composed with verl's Hydra config, verl's
validate_config and verl-ext's checks pass, and the values that reach verl's config are the papers' (Tables 1-2),
the algorithm's and the setting's. The cells come from the launcher (``python -m verl_ext.experiments``, which
every figure script execs); their checks are :func:`verl_ext.preflight.preflight_many`, as the dry run does.

Composing a config costs about a second on two cores, so a covering subset is composed: per profile, one run for
each set of override keys its runs write (the runs of a group differ only in the values of the same keys), and
enough more that every algorithm preset, setting and the learning-rate sweep is composed here or in
tests/experiments/test_profiles_and_figures.py (whose profile x preset x setting cases are not composed again).
Every one of the 82 runs is then checked on its group's composed settings with its own override values put in:
Hydra sets a ``key=value`` override's key to that value, so only the values that differ need no second compose."""

import functools

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from tests.experiments.test_profiles_and_figures import CASES
from tests.run_scripts.scripts import FIGURE_GRIDS, planned_runs
from verl_ext import preflight
from verl_ext.runs import compose as composition
from verl_ext.algorithms.presets import parse_algorithm
from verl_ext.staleness.setting import parse_setting

# Table 1 of arXiv 2509.24203, per project: model, lr, batch, K, weight decay, warmup, evaluation (temperature, top-p)
TABLE_1 = {
    "gsm8k": ("Qwen/Qwen2.5-1.5B-Instruct", 1e-6, 96, 8, 0.01, 0, (1.0, 1.0)),
    "toolace": ("meta-llama/Llama-3.2-3B-Instruct", 1e-6, 96, 8, 0.01, 0, None),
    "guru-figure5": ("Qwen/Qwen2.5-7B-Instruct", 1e-6, 64, 16, 0.1, 80, None),
    "guru-figure12": ("Qwen/Qwen3-30B-A3B", 2e-6, 72, 16, 0.1, 80, None),
    "math": ("meta-llama/Llama-3.1-8B-Instruct", 5e-7, 64, 16, 0.1, 40, (0.6, 1.0)),
}

RUNS = 82  # every run of every figure script

# algorithm -> (estimator, loss, bypass_mode)
ALGORITHMS = {
    "rec_reinforce": ("rec", "rec_reinforce", True),
    "grpo": ("grpo", "rec_oneside_is", True),
    "opmd": ("rec", "opmd", True),
    "asymre": ("rec", "asymre", True),
    "red_drop": ("red_drop", "rec_reinforce", True),
    "red_weight": ("rec", "red_weight", True),
    "offpolicy_grpo": ("grpo", "offpolicy_grpo", False),
    "topr": ("rec", "topr", True),
    "m2po": ("grpo", "m2po", True),
}
for _loss in ("rec_oneside_is", "rec_oneside_nois", "rec_twoside_is", "rec_twoside_nois", "rec_ring_nois", "rec_gspo_is", "rec_gspo_nois"):
    ALGORITHMS[_loss] = ("rec", _loss, True)

SETTINGS = {  # setting -> (sync_interval, sync_offset, offline)
    "on_policy": (1, 0, False),
    "sync_interval_20": (20, 0, False),
    "sync_interval_10": (10, 0, False),
    "sync_interval_8": (8, 0, False),
    "sync_interval_64": (64, 0, False),
    "sync_offset_10": (1, 10, False),
    "offline": (1, 0, True),
}


def table_1_row(project):
    return next(row for prefix, row in TABLE_1.items() if project.startswith(prefix))


@pytest.fixture(scope="module", autouse=True)
def parse_each_yaml_file_once():
    with composition.memoised_config_files():
        yield


@pytest.fixture(scope="module")
def cells(tmp_path_factory):
    """{script: its cells}, as `bash run_scripts/<script>` plans them."""
    tmp_path = tmp_path_factory.mktemp("cells")
    return {script: planned_runs(tmp_path, "figure", project) for script, (project, _) in FIGURE_GRIDS.items()}


def overrides_of(cell) -> dict:
    """The cell's overrides as Hydra parses them: dotted key -> value (the last one of a key wins)."""
    return dict(_parsed_overrides(tuple(cell.main_ppo_args)))


@functools.lru_cache(maxsize=None)
def _parsed_overrides(argv: tuple) -> tuple:
    # Hydra's grammar parser takes ~1 ms an override: parse each run's arguments once
    parsed = OverridesParser.create().parse_overrides(composition.parse_main_ppo_argv(argv).overrides)
    return tuple((override.key_or_group, override.value()) for override in parsed)


def group_of(cell):
    """Runs of one profile that write the same override keys: one composed run stands for them all."""
    return cell.profile.name, frozenset(overrides_of(cell))


# composed by tests/experiments/test_profiles_and_figures.py: (profile, preset, setting)
COMPOSED_ELSEWHERE = {(profile, parse_algorithm(algorithm).name, parse_setting(setting).label) for profile, algorithm, setting in CASES}


def covering(cells):
    """The runs to compose: one per group (the groups with the fewest presets choose first), each chosen for the
    most presets, settings or learning-rate sweep composed nowhere yet, then one run for each still missing;
    a profile x preset x setting composed elsewhere only where it adds as much as any other run."""
    everything = [(script, cell) for script, script_cells in cells.items() for cell in script_cells]
    seen = {("preset", preset) for _, preset, _ in COMPOSED_ELSEWHERE} | {("setting", setting) for _, _, setting in COMPOSED_ELSEWHERE}

    def features(cell):
        return {("preset", cell.algorithm.name), ("setting", cell.setting.label), ("learning rate sweep", cell.learning_rate is not None)}

    def best(candidates):
        elsewhere = lambda cell: (cell.profile.name, cell.algorithm.name, cell.setting.label) in COMPOSED_ELSEWHERE
        return min(candidates, key=lambda run: (-len(features(run[1]) - seen), elsewhere(run[1])))

    groups = {}
    for script, cell in everything:
        groups.setdefault(group_of(cell), []).append((script, cell))
    chosen = []
    for runs in sorted(groups.values(), key=lambda runs: len({cell.algorithm.name for _, cell in runs})):
        chosen.append(best(runs))
        seen |= features(chosen[-1][1])
    while missing := [run for run in everything if features(run[1]) - seen]:
        chosen.append(best(missing))
        seen |= features(chosen[-1][1])
    return chosen


def check(chosen):
    results = preflight.preflight_many([(cell.title, cell.composed) for _, cell in chosen])
    failed = {result.name: result.error for result in results if not result.ok}
    assert not failed, "\n".join(f"{name}: {error}" for name, error in failed.items())
    assert not [result.warnings for result in results if result.warnings]
    return [(script, cell, result) for (script, cell), result in zip(chosen, results)]


@pytest.fixture(scope="module")
def checked(cells):
    return check(covering(cells))


# keys the derived gradient_steps_per_batch is computed from: equal within a group, or the run is composed itself
GRADIENT_STEP_KEYS = ("data.train_batch_size", "actor_rollout_ref.rollout.n", "actor_rollout_ref.actor.ppo_mini_batch_size",
                      "actor_rollout_ref.actor.ppo_epochs")


@pytest.fixture(scope="module")
def every_run(cells, checked):
    """(script, cell, settings) for all 82 runs: the composed ones as composed; each other one its group's composed
    settings with the values of the overrides where it differs from that run."""
    composed = {group_of(cell): (cell, result) for _, cell, result in checked}
    runs = []
    for script, script_cells in cells.items():
        for cell in script_cells:
            representative, result = composed[group_of(cell)]
            mine, theirs = overrides_of(cell), overrides_of(representative)
            differ = {key: value for key, value in mine.items() if theirs[key] != value}
            assert not differ.keys() & set(GRADIENT_STEP_KEYS), (cell.title, representative.title)
            runs.append((script, cell, {**result.settings, **{k: v for k, v in differ.items() if k in result.settings}}))
    return runs


@pytest.mark.parametrize("script", sorted(FIGURE_GRIDS))
def test_each_script_runs_its_figure_grid(cells, script):
    project, grid = FIGURE_GRIDS[script]
    assert {cell.project for cell in cells[script]} == {project}
    assert sorted(cell.name for cell in cells[script]) == sorted(f"{label}-{setting}" for label, setting in grid)
    assert sorted(cell.label for cell in cells[script]) == sorted(label for label, _ in grid)


def test_a_covering_set_of_runs_passes_the_dry_run(cells, checked):
    everything = [cell for script_cells in cells.values() for cell in script_cells]
    assert len(everything) == sum(len(grid) for _, grid in FIGURE_GRIDS.values()) == RUNS
    composed = {(cell.profile.name, cell.algorithm.name, cell.setting.label) for _, cell, _ in checked}
    assert {group_of(cell) for _, cell, _ in checked} == {group_of(cell) for cell in everything}
    for feature in (lambda c: c[1], lambda c: c[2]):  # every preset and setting, here or in test_profiles_and_figures
        assert {feature(c) for c in composed | COMPOSED_ELSEWHERE} >= {feature((None, cell.algorithm.name, cell.setting.label)) for cell in everything}
    assert any(cell.learning_rate is not None for _, cell, _ in checked)
    assert len(checked) <= RUNS // 3  # the point of covering: a fraction of the runs


def test_every_run_of_every_script_has_the_papers_values_algorithm_and_setting(every_run):
    assert len(every_run) == RUNS
    for script, cell, settings in every_run:
        assert_papers_values(script, cell, settings)
        assert_algorithm_and_setting(script, cell, settings)


def assert_papers_values(script, cell, s):
    model, lr, batch, group, weight_decay, warmup, evaluation = table_1_row(cell.project)
    if cell.learning_rate is not None:  # Figure 9's learning-rate sweep
        lr = cell.learning_rate
    if script == "gsm8k/offpolicy_grpo.sh":
        group = 16  # arXiv 2505.22257's group size
    assert s["actor_rollout_ref.model.path"] == model, cell.title
    assert s["actor_rollout_ref.actor.optim.lr"] == pytest.approx(lr), cell.title
    assert (s["data.train_batch_size"], s["actor_rollout_ref.rollout.n"]) == (batch, group), cell.title
    assert s["actor_rollout_ref.actor.optim.weight_decay"] == weight_decay, cell.title
    assert s["actor_rollout_ref.actor.optim.lr_warmup_steps"] == warmup, cell.title
    # Table 2 and the one-gradient-step protocol
    assert s["actor_rollout_ref.actor.optim.optimizer"] == "AdamW"
    assert list(s["actor_rollout_ref.actor.optim.betas"]) == [0.9, 0.999]
    assert s["actor_rollout_ref.actor.optim.clip_grad"] == 1.0
    assert s["actor_rollout_ref.actor.optim.lr_scheduler_type"] == "constant"
    assert (s["actor_rollout_ref.rollout.temperature"], s["actor_rollout_ref.rollout.top_p"]) == (1.0, 1.0)
    assert s["gradient_steps_per_batch"] == 1
    assert s["actor_rollout_ref.actor.kl_loss_coef"] == 0 and s["actor_rollout_ref.actor.entropy_coeff"] == 0
    assert s["actor_rollout_ref.actor.use_kl_loss"] is True  # measured (KL to the initial policy), not optimised
    assert s["algorithm.use_kl_in_reward"] is False
    if evaluation is None:
        assert (s["trainer.val_before_train"], s["trainer.test_freq"]) == (False, -1), cell.title
    else:
        assert s["trainer.val_before_train"] is True and s["trainer.test_freq"] > 0
        assert (s["actor_rollout_ref.rollout.val_kwargs.temperature"], s["actor_rollout_ref.rollout.val_kwargs.top_p"]) == evaluation
    assert s["reward.custom_reward_function.path"] == "pkg://verl_ext.rewards"
    assert "file" in s["trainer.logger"]
    assert (s["trainer.project_name"], s["trainer.experiment_name"]) == (cell.project, cell.name)


def assert_algorithm_and_setting(script, cell, s):
    estimator, loss, bypass = ALGORITHMS[cell.algorithm.name]
    assert s["algorithm.adv_estimator"] == estimator, cell.title
    assert s["actor_rollout_ref.actor.policy_loss.loss_mode"] == loss, cell.title
    assert s["algorithm.rollout_correction.bypass_mode"] is bypass, cell.title
    epsilons = (0.2, 0.2)
    if "@" in cell.label:
        low, high = cell.label.split("@", 1)[1].split("-")[0].split("_")
        epsilons = (float(low), float(high))
    clip = (s["actor_rollout_ref.actor.clip_ratio_low"], s["actor_rollout_ref.actor.clip_ratio_high"])
    assert clip == pytest.approx(epsilons), cell.title
    name = cell.algorithm.name
    if name.startswith("rec_ring"):
        assert (s["actor_rollout_ref.actor.policy_loss.outer_clip_ratio_low"], s["actor_rollout_ref.actor.policy_loss.outer_clip_ratio_high"]) == (0.6, 2.0)
    if name.startswith("rec_gspo"):
        assert s["actor_rollout_ref.actor.loss_agg_mode"] == "seq-mean-token-mean"
    if name in ("opmd", "asymre"):
        assert s["actor_rollout_ref.actor.policy_loss.reg_coef"] == 0.1
    if name == "m2po":
        assert s["actor_rollout_ref.actor.policy_loss.m2_threshold"] == 0.04
        assert s["algorithm.norm_adv_by_std_in_grpo"] is True
    if name == "offpolicy_grpo":
        assert s["algorithm.rollout_correction.rollout_is"] == "token"
        assert s["algorithm.rollout_correction.rollout_is_threshold"] == pytest.approx(1e6)
    staleness = (
        s["trainer.v1.delayed_sync.sync_interval"],
        s["trainer.v1.delayed_sync.sync_offset"],
        s["trainer.v1.delayed_sync.offline"],
    )
    assert s["trainer.v1.trainer_mode"] == "delayed_sync"
    assert staleness == SETTINGS[cell.setting.label], cell.title
    # off-policy GRPO masks zero-variance groups (arXiv 2505.22257); the REC paper's figures do not
    assert s["trainer.v1.delayed_sync.zero_variance_masking"] is cell.label.endswith("-zvm"), cell.title
    assert cell.label.endswith("-zvm") is (script == "gsm8k/offpolicy_grpo.sh"), cell.title


def test_papers_hyperparameters_reach_verls_config(checked):
    for script, cell, result in checked:
        assert_papers_values(script, cell, result.settings)


def test_algorithms_and_settings_reach_verls_config(checked):
    for script, cell, result in checked:
        assert_algorithm_and_setting(script, cell, result.settings)


def test_a_bad_override_fails_the_dry_run_naming_the_key(tmp_path):
    cell, = planned_runs(tmp_path, "run", "gsm8k", "rec_ring_nois", "sync_offset_10",
                          "actor_rollout_ref.actor.policy_loss.outer_clip_ratio_high=0.1")
    result = preflight.check_run(cell.title, cell.composed)
    assert not result.ok
    assert "actor_rollout_ref.actor.policy_loss.outer_clip_ratio_high=0.1" in result.error
    cell, = planned_runs(tmp_path, "run", "gsm8k", "grpo", "data.train_batch_size=95")
    result = preflight.check_run(cell.title, cell.composed)
    assert not result.ok and "data.train_batch_size=95" in result.error and "ppo_mini_batch_size=96" in result.error
    assert preflight.main(["--name", "bad", "--quiet", "--", *cell.main_ppo_args]) == 1


def test_the_dry_run_prints_every_runs_settings_and_the_count(tmp_path, capsys):
    from verl_ext.experiments.__main__ import main

    environ = {**__import__("os").environ, "VERL_EXT_DRY_RUN": "1", "OUTPUT_DIR": str(tmp_path), "DATA_DIR": str(tmp_path)}
    environ.pop("ALGORITHMS", None)
    assert main(["figure", "guru-figure5"], environ) == 0
    out = capsys.readouterr().out
    assert "preflight: 2 of 2 run configuration(s) passed" in out
    assert "== guru-figure5/red_weight-on_policy ==" in out and "== guru-figure5/grpo-on_policy ==" in out
    for line in ("estimator     grpo", "loss          red_weight", "delayed_sync sync_interval=1 sync_offset=0",
                 "64 prompts x K=16 responses", "lr=1e-06", "model         Qwen/Qwen2.5-7B-Instruct"):
        assert line in out, line
    environ["ALGORITHMS"] = "grpo"
    assert main(["figure", "guru-figure5", "data.train_batch_size=63"], environ) == 1  # a failing run: exit 1
    assert "preflight: 0 of 1 run configuration(s) passed; failed: guru-figure5/grpo-on_policy" in capsys.readouterr().out


def test_memoised_composition_equals_hydras(tmp_path):
    from omegaconf import OmegaConf

    cell, = planned_runs(tmp_path, "run", "math", "red_weight", "mixed")
    assert cell.name == "red_weight-sync_interval_16_offset_8"  # the alias is written out in the one spelling
    arguments = composition.parse_main_ppo_argv(cell.main_ppo_args)
    plain = OmegaConf.to_container(arguments.config(), resolve=True)
    with composition.memoised_config_files():
        arguments.config()  # fills the memo
        memoised = OmegaConf.to_container(arguments.config(), resolve=True)
    assert memoised == plain
    assert memoised["trainer"]["v1"]["delayed_sync"]["sync_interval"] == 16


def test_zero_variance_masking_outside_delayed_sync_fails_the_dry_run(tmp_path):
    cell, = planned_runs(tmp_path, "run", "gsm8k", "offpolicy_grpo", "trainer.v1.trainer_mode=sync", ZERO_VARIANCE_MASKING="1")
    result = preflight.check_run(cell.title, cell.composed)
    assert not result.ok and ("zero_variance_masking=True is invalid: allowed values are false outside "
                              "trainer.v1.trainer_mode=delayed_sync") in result.error
    cell, = planned_runs(tmp_path, "run", "gsm8k", "offpolicy_grpo", ZERO_VARIANCE_MASKING="1")
    result = preflight.check_run(cell.title, cell.composed)
    assert result.ok, result.error
    assert ("zero-variance masking", "on (delayed_sync: equal-reward groups leave the batch, no refill)") in result.lines


def test_the_dry_run_shows_the_seeds_and_rejects_a_bad_rollout_seed_of_the_seeded_agent_loop(tmp_path):
    from verl_ext.seeding import SEEDED_AGENT_LOOP

    seeded = f"actor_rollout_ref.rollout.agent.default_agent_loop={SEEDED_AGENT_LOOP}"
    cell, = planned_runs(tmp_path, "run", "gsm8k", "grpo", seeded, "actor_rollout_ref.rollout.seed=7")
    result = preflight.check_run(cell.title, cell.composed)
    assert result.ok, result.error
    seeds = dict(result.lines)["seeds"]
    assert "actor_rollout_ref.rollout.seed=7" in seeds and "each request seeded from rollout.seed" in seeds
    cell, = planned_runs(tmp_path, "run", "gsm8k", "grpo")
    assert "the engine's own (single_turn_agent" in dict(preflight.check_run(cell.title, cell.composed).lines)["seeds"]
    for bad, allowed in (("actor_rollout_ref.rollout.seed=-1", "an integer >= 0"), ("trainer.use_v1=false", "use_v1=false")):
        cell, = planned_runs(tmp_path, "run", "gsm8k", "grpo", seeded, bad)
        result = preflight.check_run(cell.title, cell.composed)
        assert not result.ok and allowed in result.error, result.error


# the cluster forms of docs/scale-out.md: two nodes of 8 GPUs (W = 16), and the split over two nodes (8 trainer
# GPUs on one, the engine's 8 on the other)
CLUSTER_FORMS = {
    "two nodes": ({"NNODES": "2"}, "nnodes=2 n_gpus_per_node=8", "colocated with the actor"),
    "split over two nodes": ({"ENGINE_GPUS_PER_NODE": "8"}, "nnodes=1 n_gpus_per_node=8", "own pool: 1 node(s) x 8 GPUs = 8 GPUs"),
}


@pytest.mark.parametrize("form", sorted(CLUSTER_FORMS))
def test_one_run_of_each_profile_passes_the_dry_run_on_a_cluster(tmp_path, cells, form):
    """One run per profile (its first script's first run; with zero-variance masking, the off-policy GRPO run
    too: it pads to lcm(W, mini-batch x n)) planned again in the cluster form, composed and checked."""
    environment, trainer, engine = CLUSTER_FORMS[form]
    chosen = {}
    for script in sorted(cells):
        for cell in cells[script]:
            chosen.setdefault(cell.profile.name, (cell.project, cell.label, cell.setting.label))
    chosen["zero-variance masking"] = ("gsm8k-offpolicy-grpo", "offpolicy_grpo", "sync_interval_10")
    runs = []
    for project, label, setting in chosen.values():
        cell, = planned_runs(tmp_path, "figure", project, ALGORITHMS=label.split("-")[0], SETTINGS=setting,
                              **environment)
        runs.append((cell.title, cell.composed))
    assert len(runs) == 6
    results = preflight.preflight_many(runs)
    failed = {result.name: result.error for result in results if not result.ok}
    assert not failed, failed
    for result in results:
        lines = dict(result.lines)
        assert trainer in lines["resources"], lines["resources"]
        assert lines["engine"].startswith(engine), lines["engine"]


def test_a_world_size_that_stops_dividing_fails_the_dry_run_naming_the_key(tmp_path):
    """docs/scale-out.md's example: 5 nodes of 8 (W = 40) for guru-qwen3-30b-a3b cannot split its 72 x 16 = 1152
    responses evenly; 8 nodes (W = 64, 18 per rank) can."""
    results = {}
    for nodes in ("5", "8"):
        cell, = planned_runs(tmp_path, "figure", "guru-figure12", NNODES=nodes, ALGORITHMS="rec_gspo_is@0.0006_0.0008")
        results[nodes] = preflight.check_run(cell.title, cell.composed)
    assert results["8"].ok, results["8"].error
    assert not results["5"].ok
    assert "data.train_batch_size=72" in results["5"].error and "40" in results["5"].error, results["5"].error
