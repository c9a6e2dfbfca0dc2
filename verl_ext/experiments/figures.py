"""Each figure script's grid: the profile, algorithms, settings and learning rates it runs.

``bash run_scripts/<dataset>/<figure>.sh`` runs :data:`FIGURES` [its project name]; ``ALGORITHMS=``,
``SETTINGS=`` and ``LEARNING_RATES=`` replace a part of the grid. The project name is the metrics folder
(``outputs/metrics/<project>``) and verl's ``trainer.project_name``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    project: str
    script: str  # the bash entry point, relative to the repository
    paper: str  # what it reproduces
    profile: str
    algorithms: tuple[str, ...]
    settings: tuple[str, ...]
    learning_rates: tuple[float, ...] = ()  # empty: the profile's
    overrides: tuple[str, ...] = ()  # for every run of the figure (the user's own come after and win)
    zero_variance_masking: bool = False  # the default of ZERO_VARIANCE_MASKING for this figure


OFF_POLICY = ("sync_interval_20", "sync_offset_10")

FIGURES: dict[str, Figure] = {
    figure.project: figure
    for figure in (
        Figure("gsm8k-figure2", "run_scripts/gsm8k/figure2_rec_oneside.sh",
               "REC paper, Figure 2: REINFORCE, GRPO and REC-OneSide at two clipping ranges on GSM8k",
               "gsm8k-qwen2.5-1.5b",
               ("rec_reinforce", "grpo", "rec_oneside_is", "rec_oneside_nois", "rec_oneside_is@0.6_2",
                "rec_oneside_nois@0.6_2"),
               OFF_POLICY + ("offline",)),
        Figure("gsm8k-figure4", "run_scripts/gsm8k/figure4_red.sh",
               "REC paper, Figure 4: RED-Drop and RED-Weight against enlarged REC-OneSide on GSM8k",
               "gsm8k-qwen2.5-1.5b", ("red_drop", "red_weight", "rec_oneside_nois@0.6_2"),
               ("on_policy", "sync_interval_20")),
        Figure("gsm8k-figure8", "run_scripts/gsm8k/figure8_rec_variants.sh",
               "REC paper, Figure 8: REC-TwoSide and REC-Ring on GSM8k", "gsm8k-qwen2.5-1.5b",
               ("rec_reinforce", "grpo", "rec_twoside_is", "rec_twoside_nois", "rec_ring_nois"),
               OFF_POLICY + ("offline",)),
        Figure("gsm8k-figure9", "run_scripts/gsm8k/figure9_learning_rates.sh",
               "REC paper, Figure 9: GRPO at larger learning rates against enlarged REC-OneSide-NoIS",
               "gsm8k-qwen2.5-1.5b", ("grpo", "rec_oneside_nois@0.6_2"), ("sync_interval_20",),
               learning_rates=(2e-6, 5e-6, 1e-5)),
        Figure("gsm8k-figure10", "run_scripts/gsm8k/figure10_opmd_asymre.sh",
               "REC paper, Figure 10: OPMD and AsymRE on GSM8k", "gsm8k-qwen2.5-1.5b", ("opmd", "asymre"),
               OFF_POLICY + ("offline",)),
        Figure("gsm8k-offpolicy-grpo", "run_scripts/gsm8k/offpolicy_grpo.sh",
               "Revisiting GRPO (arXiv 2505.22257): off-policy GRPO with zero-variance masking, K = 16",
               "gsm8k-qwen2.5-1.5b", ("offpolicy_grpo",), ("on_policy", "sync_interval_10"),
               overrides=("actor_rollout_ref.rollout.n=16",), zero_variance_masking=True),
        Figure("gsm8k-high-staleness", "run_scripts/gsm8k/high_staleness.sh",
               "verl-ext's comparison (no paper figure): REC-OneSide-NoIS, TOPR (arXiv 2503.14286), M2PO (arXiv "
               "2510.01161) and GRPO at high staleness on GSM8k",
               "gsm8k-qwen2.5-1.5b", ("rec_oneside_nois", "topr", "m2po", "grpo"), ("sync_interval_64", "offline")),
        Figure("guru-figure5", "run_scripts/guru/figure5_red_weight.sh",
               "REC paper, Figure 5: RED-Weight against GRPO on Guru-Math, Qwen2.5-7B", "guru-qwen2.5-7b",
               ("red_weight", "grpo"), ("on_policy",)),
        Figure("guru-figure12", "run_scripts/guru/figure12_rec_gspo.sh",
               "REC paper, Figure 12: REC-GSPO on Guru-Math, Qwen3-30B-A3B", "guru-qwen3-30b-a3b",
               ("rec_gspo_is@0.0006_0.0008", "rec_gspo_nois@0.0006_0.0008"), ("sync_interval_8",)),
        Figure("math-figure11", "run_scripts/math/figure11_red_weight.sh",
               "REC paper, Figure 11: RED-Weight, enlarged REC-OneSide-NoIS and GRPO on MATH, Llama-3.1-8B",
               "math-llama3.1-8b", ("red_weight", "rec_oneside_nois@0.6_2", "grpo"), ("on_policy",)),
        Figure("toolace-figure3", "run_scripts/toolace/figure3_rec.sh",
               "REC paper, Figure 3: REC variants on ToolACE, Llama-3.2-3B", "toolace-llama3.2-3b",
               ("rec_reinforce", "grpo", "rec_oneside_is", "rec_oneside_nois", "rec_oneside_nois@0.6_2",
                "rec_twoside_nois", "rec_ring_nois"),
               OFF_POLICY),
    )
}


def figure_named(project: str) -> Figure:
    if project not in FIGURES:
        raise ValueError(f"unknown figure {project!r}; allowed: {', '.join(FIGURES)}")
    return FIGURES[project]
