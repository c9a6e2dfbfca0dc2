"""The lab's grids: one per finding of the REC paper (``/work/shared/docs/algorithms.md``, "Findings
the paper reports"; arXiv 2509.24203 Section 4 and Appendix B), and the short default comparison.

Each is a :class:`~verl_ext.runs.grid.Grid`, the model the run scripts' figures use too: points (algorithm
preset, staleness setting, learning-rate factor) run for every seed, with the grid's steps, prompts per step and
default number of seeds; what the paper reports is its ``about``. Algorithms and settings are named as in the
run scripts (:mod:`verl_ext.algorithms.presets`, :mod:`verl_ext.staleness.setting`). The paper's off-policy
settings (Appendix B.2, Figure 2) are ``sync_interval_20`` and ``sync_offset_10``; the stress test is
``offline``. Learning rates are the lab's ``--lr`` times the point's factor (the paper's B.4 sweep multiplies
its rate by 2 and 5).
"""

from __future__ import annotations

from verl_ext.algorithms.presets import parse_algorithm
from verl_ext.runs.grid import Grid, Point, points
from verl_ext.staleness.setting import OFFLINE, ON_POLICY, Setting, parse_setting

SYNC_INTERVAL_20 = parse_setting("sync_interval_20")
SYNC_OFFSET_10 = parse_setting("sync_offset_10")
SYNC_INTERVAL_64 = parse_setting("sync_interval_64")


def _points(algorithms: list[str], settings: list[Setting], factor: float = 1.0) -> tuple[Point, ...]:
    return points([parse_algorithm(name) for name in algorithms], settings, factor)


def _seeds(count: int) -> tuple[int, ...]:
    return tuple(range(count))


OFF_POLICY = [SYNC_INTERVAL_20, SYNC_OFFSET_10]

GRIDS: dict[str, Grid] = {
    grid.name: grid
    for grid in (
        Grid(
            "headline",
            _points(["rec_reinforce", "rec_oneside_nois"], [SYNC_INTERVAL_20]),
            steps=25,
            seeds=_seeds(1),
            prompts_per_step=8,
            about=("REINFORCE without clipping degrades under stale data, REC-OneSide does not (the lab's default: a short "
                   "'clipping', one seed, sync_interval_20, 8 prompts x 8 responses per step to fit in 5 minutes)"),
        ),
        Grid(
            "calibration",
            _points(["rec_oneside_nois"], [ON_POLICY]),
            steps=60,
            seeds=_seeds(2),
            about="the lab's task and defaults: on-policy REC-OneSide-NoIS reaches the target reward within a few minutes",
        ),
        Grid(
            "clipping",
            _points(["rec_reinforce", "rec_oneside_nois"], OFF_POLICY),
            steps=50,
            seeds=_seeds(2),
            about="REINFORCE without clipping collapses under sync_interval_20 / sync_offset_10; clipped variants do not",
        ),
        Grid(
            "importance_sampling",
            _points(["rec_oneside_is", "rec_oneside_nois", "grpo"], [SYNC_INTERVAL_20]),
            steps=50,
            seeds=_seeds(1),
            about="IS weighting is non-essential: REC-OneSide-IS, -NoIS and GRPO with epsilon = 0.2 track each other",
        ),
        Grid(
            "epsilon",
            _points(["rec_oneside_nois", "rec_oneside_nois@0.6_2"], OFF_POLICY)
            + _points(["grpo"], OFF_POLICY, factor=2.0),
            steps=50,
            seeds=_seeds(1),
            about=("epsilon = (0.6, 2.0) converges faster than 0.2 without losing stability, and a larger learning rate "
                   "(here 2x, GRPO) does not close the gap (B.4)"),
        ),
        Grid(
            "offline",
            _points(["rec_oneside_nois", "rec_oneside_nois@0.6_2"], [OFFLINE]),
            steps=60,
            seeds=_seeds(1),
            about=("offline (every batch from the initial policy): enlarged clipping speeds early training but eventually "
                   "collapses. The lab measures only the drift here (KL to initial): offline batches all come from the "
                   "initial policy, so their reward does not follow the trained policy"),
        ),
        Grid(
            "twoside_ring",
            _points(["rec_twoside_is", "rec_twoside_nois", "rec_ring_nois"], [SYNC_INTERVAL_20]),
            steps=50,
            seeds=_seeds(1),
            about="REC-TwoSide is fast early, then collapses; REC-Ring balances speed and stability",
        ),
        Grid(
            "red",
            _points(["red_drop", "red_weight", "rec_oneside_nois@0.6_2", "grpo"], [SYNC_INTERVAL_20]),
            steps=50,
            seeds=_seeds(1),
            about=("RED-Drop and RED-Weight match enlarged REC-OneSide (GSM8k, Figure 4), and RED-Weight gets a higher reward "
                   "at a lower KL than GRPO (MATH, Guru); here off-policy (sync_interval_20)"),
        ),
        Grid(
            "stale_losses",
            _points(["rec_reinforce", "rec_oneside_nois", "topr", "m2po", "grpo"], [SYNC_INTERVAL_64]),
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

DEFAULT_GRID = "headline"


def grid_named(name: str) -> Grid:
    if name not in GRIDS:
        raise ValueError(f"unknown grid {name!r}; allowed: {', '.join(GRIDS)}")
    return GRIDS[name]


