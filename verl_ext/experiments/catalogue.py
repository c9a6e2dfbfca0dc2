"""The catalogue of named grids (:class:`~verl_ext.runs.grid.Grid`): each figure script's and each finding the lab
tests.

- :data:`FIGURES`: one grid per figure script (``bash run_scripts/<dataset>/<figure>.sh`` runs ``figure PROJECT``),
  named by its project (the metrics folder ``outputs/metrics/<project>`` and verl's ``trainer.project_name``), on a
  run profile (a Table 1 column, :mod:`verl_ext.experiments.profiles`); ``ALGORITHMS=``, ``SETTINGS=`` and
  ``LEARNING_RATES=`` replace a part of it. Its points go algorithm by algorithm, each one's settings in a row.
- :data:`FINDINGS`: the lab's grids (``verl-ext lab --grid NAME``), one per finding of the REC paper (arXiv
  2509.24203 Section 4 and Appendix B, "Findings the paper reports" in docs/algorithms.md) and the short default
  comparison, on the CPU backend's tiny task, with their steps, prompts per step and default number of seeds; the
  paper's off-policy settings (Appendix B.2, Figure 2) are ``sync_interval_20`` and ``sync_offset_10``, the stress
  test ``offline``. Learning rates are the lab's ``--lr`` times the point's factor (the paper's B.4 sweep multiplies
  its rate by 2 and 5). Their points go setting by setting (the lab's tables).

Algorithms and settings are written as their one label (:mod:`verl_ext.algorithms.presets`,
:mod:`verl_ext.staleness.setting`): a spelling that is not (``rec_oneside_nois@0.6_2.0``) fails on import.
What a grid becomes is :meth:`Grid.runs`' (the one planner), on the run scripts' base or the lab's.

Pure: nothing here imports verl or torch.
"""

from __future__ import annotations

from typing import Sequence

from verl_ext.algorithms.presets import parse_algorithm
from verl_ext.runs.grid import Grid, Point, points
from verl_ext.staleness.setting import parse_setting


def labelled_points(algorithms: Sequence[str], settings: Sequence[str], factor: float = 1.0,
                    settings_outer: bool = True) -> tuple[Point, ...]:
    """Every algorithm in every setting (:func:`verl_ext.runs.grid.points`), each written as its label (ValueError
    naming one that is not)."""
    choices = [parse_algorithm(name) for name in algorithms]
    staleness = [parse_setting(name) for name in settings]
    for written, label in [*zip(algorithms, (c.label for c in choices)), *zip(settings, (s.label for s in staleness))]:
        if written != label:
            raise ValueError(f"write {written!r} as {label!r} (the one spelling of names, plots and tables)")
    return points(choices, staleness, factor, settings_outer)


OFF_POLICY = ("sync_interval_20", "sync_offset_10")


def _figure(project: str, script: str, about: str, profile: str, algorithms: Sequence[str], settings: Sequence[str],
            **fields) -> Grid:
    return Grid(project, labelled_points(algorithms, settings, settings_outer=False), about=about, profile=profile,
                script=script, **fields)


FIGURES: dict[str, Grid] = {
    grid.name: grid
    for grid in (
        _figure("gsm8k-figure2", "run_scripts/gsm8k/figure2_rec_oneside.sh",
                "REC paper, Figure 2: REINFORCE, GRPO and REC-OneSide at two clipping ranges on GSM8k",
                "gsm8k-qwen2.5-1.5b",
                ("rec_reinforce", "grpo", "rec_oneside_is", "rec_oneside_nois", "rec_oneside_is@0.6_2",
                 "rec_oneside_nois@0.6_2"),
                (*OFF_POLICY, "offline")),
        _figure("gsm8k-figure4", "run_scripts/gsm8k/figure4_red.sh",
                "REC paper, Figure 4: RED-Drop and RED-Weight against enlarged REC-OneSide on GSM8k",
                "gsm8k-qwen2.5-1.5b", ("red_drop", "red_weight", "rec_oneside_nois@0.6_2"),
                ("on_policy", "sync_interval_20")),
        _figure("gsm8k-figure8", "run_scripts/gsm8k/figure8_rec_variants.sh",
                "REC paper, Figure 8: REC-TwoSide and REC-Ring on GSM8k", "gsm8k-qwen2.5-1.5b",
                ("rec_reinforce", "grpo", "rec_twoside_is", "rec_twoside_nois", "rec_ring_nois"),
                (*OFF_POLICY, "offline")),
        _figure("gsm8k-figure9", "run_scripts/gsm8k/figure9_learning_rates.sh",
                "REC paper, Figure 9: GRPO at larger learning rates against enlarged REC-OneSide-NoIS",
                "gsm8k-qwen2.5-1.5b", ("grpo", "rec_oneside_nois@0.6_2"), ("sync_interval_20",),
                learning_rates=(2e-6, 5e-6, 1e-5)),
        _figure("gsm8k-figure10", "run_scripts/gsm8k/figure10_opmd_asymre.sh",
                "REC paper, Figure 10: OPMD and AsymRE on GSM8k", "gsm8k-qwen2.5-1.5b", ("opmd", "asymre"),
                (*OFF_POLICY, "offline")),
        _figure("gsm8k-offpolicy-grpo", "run_scripts/gsm8k/offpolicy_grpo.sh",
                "Revisiting GRPO (arXiv 2505.22257): off-policy GRPO with zero-variance masking, K = 16",
                "gsm8k-qwen2.5-1.5b", ("offpolicy_grpo",), ("on_policy", "sync_interval_10"),
                overrides=("actor_rollout_ref.rollout.n=16",), zero_variance_masking=True),
        _figure("gsm8k-high-staleness", "run_scripts/gsm8k/high_staleness.sh",
                "verl-ext's comparison (no paper figure): REC-OneSide-NoIS, TOPR (arXiv 2503.14286), M2PO (arXiv "
                "2510.01161) and GRPO at high staleness on GSM8k",
                "gsm8k-qwen2.5-1.5b", ("rec_oneside_nois", "topr", "m2po", "grpo"), ("sync_interval_64", "offline")),
        _figure("guru-figure5", "run_scripts/guru/figure5_red_weight.sh",
                "REC paper, Figure 5: RED-Weight against GRPO on Guru-Math, Qwen2.5-7B", "guru-qwen2.5-7b",
                ("red_weight", "grpo"), ("on_policy",)),
        _figure("guru-figure12", "run_scripts/guru/figure12_rec_gspo.sh",
                "REC paper, Figure 12: REC-GSPO on Guru-Math, Qwen3-30B-A3B", "guru-qwen3-30b-a3b",
                ("rec_gspo_is@0.0006_0.0008", "rec_gspo_nois@0.0006_0.0008"), ("sync_interval_8",)),
        _figure("math-figure11", "run_scripts/math/figure11_red_weight.sh",
                "REC paper, Figure 11: RED-Weight, enlarged REC-OneSide-NoIS and GRPO on MATH, Llama-3.1-8B",
                "math-llama3.1-8b", ("red_weight", "rec_oneside_nois@0.6_2", "grpo"), ("on_policy",)),
        _figure("toolace-figure3", "run_scripts/toolace/figure3_rec.sh",
                "REC paper, Figure 3: REC variants on ToolACE, Llama-3.2-3B", "toolace-llama3.2-3b",
                ("rec_reinforce", "grpo", "rec_oneside_is", "rec_oneside_nois", "rec_oneside_nois@0.6_2",
                 "rec_twoside_nois", "rec_ring_nois"),
                OFF_POLICY),
    )
}

SYNC_INTERVAL_20 = parse_setting("sync_interval_20")
SYNC_OFFSET_10 = parse_setting("sync_offset_10")


def _seeds(count: int) -> tuple[int, ...]:
    return tuple(range(count))


FINDINGS: dict[str, Grid] = {
    grid.name: grid
    for grid in (
        Grid(
            "headline",
            labelled_points(["rec_reinforce", "rec_oneside_nois"], ["sync_interval_20"]),
            steps=25,
            seeds=_seeds(1),
            prompts_per_step=8,
            about=("REINFORCE without clipping degrades under stale data, REC-OneSide does not (the lab's default: a short "
                   "'clipping', one seed, sync_interval_20, 8 prompts x 8 responses per step to fit in 5 minutes)"),
        ),
        Grid(
            "calibration",
            labelled_points(["rec_oneside_nois"], ["on_policy"]),
            steps=60,
            seeds=_seeds(2),
            about="the lab's task and defaults: on-policy REC-OneSide-NoIS reaches the target reward within a few minutes",
        ),
        Grid(
            "clipping",
            labelled_points(["rec_reinforce", "rec_oneside_nois"], OFF_POLICY),
            steps=50,
            seeds=_seeds(2),
            about="REINFORCE without clipping collapses under sync_interval_20 / sync_offset_10; clipped variants do not",
        ),
        Grid(
            "importance_sampling",
            labelled_points(["rec_oneside_is", "rec_oneside_nois", "grpo"], ["sync_interval_20"]),
            steps=50,
            seeds=_seeds(1),
            about="IS weighting is non-essential: REC-OneSide-IS, -NoIS and GRPO with epsilon = 0.2 track each other",
        ),
        Grid(
            "epsilon",
            labelled_points(["rec_oneside_nois", "rec_oneside_nois@0.6_2"], OFF_POLICY)
            + labelled_points(["grpo"], OFF_POLICY, factor=2.0),
            steps=50,
            seeds=_seeds(1),
            about=("epsilon = (0.6, 2.0) converges faster than 0.2 without losing stability, and a larger learning rate "
                   "(here 2x, GRPO) does not close the gap (B.4)"),
        ),
        Grid(
            "offline",
            labelled_points(["rec_oneside_nois", "rec_oneside_nois@0.6_2"], ["offline"]),
            steps=60,
            seeds=_seeds(1),
            about=("offline (every batch from the initial policy): enlarged clipping speeds early training but eventually "
                   "collapses. The lab measures only the drift here (KL to initial): offline batches all come from the "
                   "initial policy, so their reward does not follow the trained policy"),
        ),
        Grid(
            "twoside_ring",
            labelled_points(["rec_twoside_is", "rec_twoside_nois", "rec_ring_nois"], ["sync_interval_20"]),
            steps=50,
            seeds=_seeds(1),
            about="REC-TwoSide is fast early, then collapses; REC-Ring balances speed and stability",
        ),
        Grid(
            "red",
            labelled_points(["red_drop", "red_weight", "rec_oneside_nois@0.6_2", "grpo"], ["sync_interval_20"]),
            steps=50,
            seeds=_seeds(1),
            about=("RED-Drop and RED-Weight match enlarged REC-OneSide (GSM8k, Figure 4), and RED-Weight gets a higher reward "
                   "at a lower KL than GRPO (MATH, Guru); here off-policy (sync_interval_20)"),
        ),
        Grid(
            "stale_losses",
            labelled_points(["rec_reinforce", "rec_oneside_nois", "topr", "m2po", "grpo"], ["sync_interval_64"]),
            steps=72,
            seeds=_seeds(2),
            about=("the stale-data losses at high staleness (sync_interval_64: 64 updates on the initial policy's batches, "
                   "then one push): M2PO (arXiv 2510.01161) reports stable training on data 256 updates old, TOPR "
                   "(arXiv 2503.14286) stable off-policy training without a KL term, and REC-OneSide (arXiv 2509.24203) "
                   "stability under staleness where REINFORCE degrades. 72 steps: the last 10% (steps 65-72) are sampled "
                   "by the policy trained for 64 steps"),
        ),
    )
}

DEFAULT_FINDING = "headline"


def figure_named(project: str) -> Grid:
    if project not in FIGURES:
        raise ValueError(f"unknown figure {project!r}; allowed: {', '.join(FIGURES)}")
    return FIGURES[project]


def finding_named(name: str) -> Grid:
    if name not in FINDINGS:
        raise ValueError(f"unknown grid {name!r}; allowed: {', '.join(FINDINGS)}")
    return FINDINGS[name]
