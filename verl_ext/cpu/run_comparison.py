"""Compare two runs step for step: their logged metrics and the checksums of the weights they pushed.

For the claims that two runs train identically -- a run and its rerun with the same seed, ``delayed_sync``
at (m, n) = (1, 0) and verl's ``sync``, a run with ``overlap`` and one without, a resumed run and the
uninterrupted one, world size 2 and world size 1 -- :func:`compare_runs` lists every difference:

- every metric of every compared step (verl's file logger, :mod:`verl_ext.metrics_file`) but the
  measurements of the machine (wall-clock times, throughput, memory: :func:`verl_ext.metric_names.is_measurement`)
  and the names in ``ignore`` (a name, or a prefix ending in ``/``): numbers within the tolerance, anything
  else equal; a metric or a step logged by one run only is a difference;
- the checksum of the weights each pushed version carried to the rollout (the CPU rollout's
  ``update_weights`` events, :mod:`verl_ext.rollout_events`): equal for every version both runs
  pushed (or those in ``versions``); a version one run pushed and the other did not is a difference only
  when ``versions`` names it.

Tolerances: ``|a - b| <= absolute + relative * max(|a|, |b|)``.

- :data:`EXACT` (the default) for runs on one machine with one software stack, the same seed and the same
  world size: with the CPU backend's seeding (docs/cpu-backend.md, "What a seed fixes") they agree to the
  bit -- metrics and checksums.
- A different world size (or thread count) changes the order of float32 reductions (FSDP's gradient
  all-reduce adds two half-batch gradients instead of one whole-batch sum, verl balances the batch over
  two ranks), so the actor's numbers differ in their last bits from step 1 and checksums never match
  (``compare_checksums=False``). :data:`REDUCTION_ORDER` (1e-6 absolute + 1e-5 relative) bounds what
  that does to the actor's metrics of step 1 with a wide margin: on the tiny model in float32, the
  gradient of a 32-response batch computed as two halves and added (what a second rank does) differed
  from the whole-batch gradient by at most 1.5e-7 of its largest entry, the loss by 1.5e-8
  (``tests/cpu/test_run_comparison.py`` measures it). It bounds neither the weights after the optimizer
  step (Adam divides each gradient entry by its own scale, so an entry near zero can move by up to the
  learning rate) nor later steps: once the weights differ, so do the logits, and a sampled token flips
  when its uniform falls within that difference of a CDF boundary (:mod:`verl_ext.cpu_runtime.generation`);
  from then on two runs are two samples, comparable only statistically. Step 1's batch is generated from
  the same initial weights with the same per-request seeds, so its rewards, lengths and scores stay exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional, Sequence

from verl_ext import metric_names

UPDATE_WEIGHTS = "update_weights"  # the CPU rollout's event of a weight push (verl_ext.cpu_runtime.rollout_server)


@dataclass(frozen=True)
class Tolerance:
    """``|a - b| <= absolute + relative * max(|a|, |b|)``."""

    absolute: float = 0.0
    relative: float = 0.0

    def allows(self, a: float, b: float) -> bool:
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        if a == b:
            return True
        return abs(a - b) <= self.absolute + self.relative * max(abs(a), abs(b))


EXACT = Tolerance()
REDUCTION_ORDER = Tolerance(absolute=1e-6, relative=1e-5)


@dataclass(frozen=True)
class Difference:
    """One disagreement: a metric at a step (``step`` set), a missing step, or a pushed version's checksum."""

    what: str  # the metric name, "step", or "weight_checksum"
    step: Optional[int]  # the global step of a metric; the weight version of a checksum
    a: Any
    b: Any
    tolerance: Optional[Tolerance] = None

    def __str__(self) -> str:
        where = f"version {self.step}" if self.what == "weight_checksum" else f"step {self.step}"
        within = f" (tolerance {self.tolerance})" if self.tolerance not in (None, EXACT) else ""
        return f"{self.what} at {where}: {self.a!r} vs {self.b!r}{within}"


@dataclass
class RunComparison:
    differences: list[Difference] = field(default_factory=list)
    compared_values: int = 0  # metric values compared (and found within tolerance or not)
    compared_checksums: int = 0  # pushed versions whose checksums were compared

    @property
    def equal(self) -> bool:
        return not self.differences

    def by_metric(self) -> dict[str, list[Difference]]:
        out: dict[str, list[Difference]] = {}
        for difference in self.differences:
            out.setdefault(difference.what, []).append(difference)
        return out

    def report(self, limit: int = 20) -> str:
        head = (
            f"{len(self.differences)} differences in {self.compared_values} metric values and "
            f"{self.compared_checksums} pushed checksums"
        )
        lines = [head] + [f"  {difference}" for difference in self.differences[:limit]]
        if len(self.differences) > limit:
            lines.append(f"  ... and {len(self.differences) - limit} more")
        return "\n".join(lines)


def weight_pushes(events: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The ``update_weights`` events of a CPU rollout event log."""
    return [event for event in events if event.get("event") == UPDATE_WEIGHTS]


def compare_runs(
    steps_a: Sequence[Mapping[str, Any]],
    steps_b: Sequence[Mapping[str, Any]],
    pushes_a: Iterable[Mapping[str, Any]] = (),
    pushes_b: Iterable[Mapping[str, Any]] = (),
    *,
    tolerance: Tolerance = EXACT,
    tolerances: Optional[Mapping[str, Tolerance]] = None,
    steps: Optional[Iterable[int]] = None,
    ignore: Iterable[str] = (),
    versions: Optional[Iterable[int]] = None,
    compare_checksums: bool = True,
) -> RunComparison:
    """Every difference between two runs (see the module docstring).

    ``steps_a``/``steps_b``: logged records ``{"step": global step, metric: value}``; ``pushes_a``/``pushes_b``:
    ``update_weights`` events (others are skipped). ``tolerance`` applies to every number, ``tolerances``
    overrides it per metric name. ``steps``: the global steps to compare (default: every step either run
    logged). ``ignore``: metric names, or prefixes ending in ``/``, left out.
    """
    ignored = tuple(ignore)
    per_metric = dict(tolerances or {})
    by_step_a = {int(record["step"]): record for record in steps_a}
    by_step_b = {int(record["step"]): record for record in steps_b}
    wanted = sorted(set(by_step_a) | set(by_step_b)) if steps is None else sorted(set(steps))
    comparison = RunComparison()
    for step in wanted:
        record_a, record_b = by_step_a.get(step), by_step_b.get(step)
        if record_a is None or record_b is None:
            comparison.differences.append(
                Difference("step", step, "logged" if record_a else "missing", "logged" if record_b else "missing")
            )
            continue
        for name in sorted((set(record_a) | set(record_b)) - {"step"}):
            if metric_names.is_measurement(name) or _ignored(name, ignored):
                continue
            if name not in record_a or name not in record_b:
                comparison.differences.append(
                    Difference(name, step, record_a.get(name, "<not logged>"), record_b.get(name, "<not logged>"))
                )
                continue
            comparison.compared_values += 1
            limit = per_metric.get(name, tolerance)
            if not _agree(record_a[name], record_b[name], limit):
                comparison.differences.append(Difference(name, step, record_a[name], record_b[name], limit))
    if compare_checksums:
        checksums_a, checksums_b = _checksums_by_version(pushes_a), _checksums_by_version(pushes_b)
        wanted_versions = sorted(set(checksums_a) & set(checksums_b)) if versions is None else sorted(set(versions))
        for version in wanted_versions:
            a, b = checksums_a.get(version, "<not pushed>"), checksums_b.get(version, "<not pushed>")
            comparison.compared_checksums += 1
            if a != b:
                comparison.differences.append(Difference("weight_checksum", version, a, b))
    return comparison


def compare_results(a: Any, b: Any, **options: Any) -> RunComparison:
    """:func:`compare_runs` of two :class:`verl_ext.runs.launch.RunResult` (their steps and pushes)."""
    return compare_runs(a.steps, b.steps, weight_pushes(a.events), weight_pushes(b.events), **options)


def _ignored(name: str, ignored: tuple[str, ...]) -> bool:
    return any(name == entry or (entry.endswith("/") and name.startswith(entry)) for entry in ignored)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _agree(a: Any, b: Any, tolerance: Tolerance) -> bool:
    if _is_number(a) and _is_number(b):
        return tolerance.allows(float(a), float(b))
    return a == b


def _checksums_by_version(pushes: Iterable[Mapping[str, Any]]) -> dict[int, Any]:
    """``{version: checksum}``; a version pushed twice with different weights keeps both, as a tuple."""
    out: dict[int, list] = {}
    for event in pushes:
        if event.get("event", UPDATE_WEIGHTS) != UPDATE_WEIGHTS:
            continue
        checksums = out.setdefault(int(event["weight_version"]), [])
        if event["weight_checksum"] not in checksums:
            checksums.append(event["weight_checksum"])
    return {version: checksums[0] if len(checksums) == 1 else tuple(checksums) for version, checksums in out.items()}
