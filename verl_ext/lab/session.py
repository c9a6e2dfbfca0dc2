"""The lab's worker process: run a list of CPU runs of verl's ``main_ppo`` in one Ray session.

    python -m verl_ext.lab.session PLAN.json

``PLAN.json``: ``{"base_dir": ..., "assets_dir": ..., "runs": [{"name", "overrides", "steps"}, ...]}``.
The runs go through :class:`verl_ext.cpu.launch.CPURaySession` (one Ray start-up, each run through verl's
own ``main_ppo.main``), in order. For each run one line is appended to ``<base_dir>/lab_status.jsonl``:
``{"name", "event": "started"}`` before it, ``{"name", "event": "finished", "ok", "error", "wall_seconds"}``
after it. A failed run does not stop the others.

The lab command (:mod:`verl_ext.lab.runner`) starts this in a child process with its output sent to a log
file: Ray and verl print a lot, and the lab's own terminal shows only a progress bar and the results.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

STATUS_FILE = "lab_status.jsonl"


def _append(path: Path, record: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


def run_plan(plan: dict[str, Any]) -> int:
    from verl_ext.cpu.launch import CPURaySession, CPURun

    base_dir = Path(plan["base_dir"])
    status = base_dir / STATUS_FILE
    failures = 0
    with CPURaySession(base_dir, Path(plan["assets_dir"])) as session:
        for entry in plan["runs"]:
            run = CPURun(name=entry["name"], overrides=tuple(entry["overrides"]), steps=int(entry["steps"]))
            _append(status, {"name": run.name, "event": "started"})
            result = session.run(run)
            failures += not result.ok
            _append(status, {"name": run.name, "event": "finished", "ok": result.ok, "error": result.error,
                             "wall_seconds": result.wall_seconds})
            print(f"[verl-ext lab] {run.name}: {'ok' if result.ok else result.error} "
                  f"({result.wall_seconds:.0f} s)", flush=True)
    return 1 if failures else 0


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m verl_ext.lab.session PLAN.json", file=sys.stderr)
        return 2
    return run_plan(json.loads(Path(argv[0]).read_text(encoding="utf-8")))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
