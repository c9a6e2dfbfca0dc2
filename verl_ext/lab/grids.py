"""The lab's grids: one per finding of the REC paper (``/work/shared/docs/algorithms.md``, "Findings
the paper reports"; arXiv 2509.24203 Section 4 and Appendix B), and the short default comparison.

A grid is a list of cells (algorithm preset, staleness setting, learning-rate factor), each run for every
seed; algorithms and settings are named as in the run scripts (:mod:`verl_ext.experiments`). The paper's
off-policy settings (Appendix B.2, Figure 2) are ``sync_interval_20`` and ``sync_offset_10``; the stress
test is ``offline``. Learning rates are the lab's ``--lr`` times the cell's factor (the paper's B.4 sweep
multiplies its rate by 2 and 5).
"""

from __future__ import annotations

from dataclasses import dataclass

from verl_ext.experiments.algorithms import AlgorithmChoice, parse_algorithm
from verl_ext.staleness.setting import OFFLINE, ON_POLICY, Setting, parse_setting
from verl_ext.lab.plan import PROMPTS_PER_STEP, LabRun, reject_repeated_names

SYNC_INTERVAL_20 = parse_setting("sync_interval_20")
SYNC_OFFSET_10 = parse_setting("sync_offset_10")
SYNC_INTERVAL_64 = parse_setting("sync_interval_64")


@dataclass(frozen=True)
class Cell:
    algorithm: str  # a preset of verl_ext.experiments.algorithms (NAME or NAME@EPS_LOW_EPS_HIGH)
    setting: Setting
    learning_rate_factor: float = 1.0


@dataclass(frozen=True)
class Grid:
    name: str
    finding: str  # what the paper reports (the claim the grid tests)
    cells: tuple[Cell, ...]
    steps: int
    seeds: int
    prompts_per_step: int = PROMPTS_PER_STEP

    def runs(self, seeds: list[int], steps: int, learning_rate: float, extra_overrides: tuple[str, ...] = ()) -> list[LabRun]:
        runs = [
            LabRun(parse_algorithm(cell.algorithm), cell.setting, seed, steps, learning_rate * cell.learning_rate_factor,
                   tuple(extra_overrides), self.prompts_per_step)
            for cell in self.cells
            for seed in seeds
        ]
        reject_repeated_names(runs, f"grid {self.name}")
        return runs


def _cells(algorithms: list[str], settings: list[Setting], factor: float = 1.0) -> tuple[Cell, ...]:
    return tuple(Cell(algorithm, setting, factor) for setting in settings for algorithm in algorithms)


OFF_POLICY = [SYNC_INTERVAL_20, SYNC_OFFSET_10]

GRIDS: dict[str, Grid] = {
    grid.name: grid
    for grid in (
        Grid(
            "headline",
            "REINFORCE without clipping degrades under stale data, REC-OneSide does not (the lab's default: a short "
            "'clipping', one seed, sync_interval_20, 8 prompts x 8 responses per step to fit in 5 minutes)",
            _cells(["rec_reinforce", "rec_oneside_nois"], [SYNC_INTERVAL_20]),
            steps=25,
            seeds=1,
            prompts_per_step=8,
        ),
        Grid(
            "calibration",
            "the lab's task and defaults: on-policy REC-OneSide-NoIS reaches the target reward within a few minutes",
            _cells(["rec_oneside_nois"], [ON_POLICY]),
            steps=60,
            seeds=2,
        ),
        Grid(
            "clipping",
            "REINFORCE without clipping collapses under sync_interval_20 / sync_offset_10; clipped variants do not",
            _cells(["rec_reinforce", "rec_oneside_nois"], OFF_POLICY),
            steps=50,
            seeds=2,
        ),
        Grid(
            "importance_sampling",
            "IS weighting is non-essential: REC-OneSide-IS, -NoIS and GRPO with epsilon = 0.2 track each other",
            _cells(["rec_oneside_is", "rec_oneside_nois", "grpo"], [SYNC_INTERVAL_20]),
            steps=50,
            seeds=1,
        ),
        Grid(
            "epsilon",
            "epsilon = (0.6, 2.0) converges faster than 0.2 without losing stability, and a larger learning rate "
            "(here 2x, GRPO) does not close the gap (B.4)",
            _cells(["rec_oneside_nois", "rec_oneside_nois@0.6_2"], OFF_POLICY)
            + _cells(["grpo"], OFF_POLICY, factor=2.0),
            steps=50,
            seeds=1,
        ),
        Grid(
            "offline",
            "offline (every batch from the initial policy): enlarged clipping speeds early training but eventually "
            "collapses. The lab measures only the drift here (KL to initial): offline batches all come from the "
            "initial policy, so their reward does not follow the trained policy",
            _cells(["rec_oneside_nois", "rec_oneside_nois@0.6_2"], [OFFLINE]),
            steps=60,
            seeds=1,
        ),
        Grid(
            "twoside_ring",
            "REC-TwoSide is fast early, then collapses; REC-Ring balances speed and stability",
            _cells(["rec_twoside_is", "rec_twoside_nois", "rec_ring_nois"], [SYNC_INTERVAL_20]),
            steps=50,
            seeds=1,
        ),
        Grid(
            "red",
            "RED-Drop and RED-Weight match enlarged REC-OneSide (GSM8k, Figure 4), and RED-Weight gets a higher reward "
            "at a lower KL than GRPO (MATH, Guru); here off-policy (sync_interval_20)",
            _cells(["red_drop", "red_weight", "rec_oneside_nois@0.6_2", "grpo"], [SYNC_INTERVAL_20]),
            steps=50,
            seeds=1,
        ),
        Grid(
            "stale_losses",
            "the stale-data losses at high staleness (sync_interval_64: 64 updates on the initial policy's batches, "
            "then one push): M2PO (arXiv 2510.01161) reports stable training on data 256 updates old, TOPR "
            "(arXiv 2503.14286) stable off-policy training without a KL term, and REC-OneSide (arXiv 2509.24203) "
            "stability under staleness where REINFORCE degrades. 72 steps: the last 10% (steps 65-72) are sampled "
            "by the policy trained for 64 steps",
            _cells(["rec_reinforce", "rec_oneside_nois", "topr", "m2po", "grpo"], [SYNC_INTERVAL_64]),
            steps=72,
            seeds=2,
        ),
    )
}

DEFAULT_GRID = "headline"


def grid_named(name: str) -> Grid:
    if name not in GRIDS:
        raise ValueError(f"unknown grid {name!r}; allowed: {', '.join(GRIDS)}")
    return GRIDS[name]


def algorithms_of(grid: Grid) -> list[AlgorithmChoice]:
    return list(dict.fromkeys(parse_algorithm(cell.algorithm) for cell in grid.cells))
