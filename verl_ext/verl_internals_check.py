"""Check :data:`verl_ext.verl_internals.VERL_INTERNALS` against the installed verl (``verl-ext doctor``).

For each entry: its module imports; the object exists (unless it lives on instances); a callable's parameter
names are the listed ones, in order (``inspect.signature``, which looks through verl-ext's own patch wrappers
to verl's function); and every piece of verl code named in ``read_in`` still contains the entry's token, read
from verl's source file (so that checking does not import, say, verl's FSDP engine). Each failure is one line
naming the entry, the verl file and what changed.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
from pathlib import Path
from typing import Iterable, Optional

from verl_ext.verl_internals import VERL_INTERNALS, VerlInternal


def module_file(module: str) -> Path:
    """The source file of ``module`` (``pkg/mod.py`` or ``pkg/mod/__init__.py``), found without importing it."""
    top, _, rest = module.partition(".")
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {top} is not installed")
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*rest.split(".")) if rest else None
    candidates = [path.parent / f"{path.name}.py", path / "__init__.py"] if path else [Path(spec.origin)]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"no source file for module {module}")


def source_of(location: str) -> str:
    """The source text of ``"module:Qualified.name"`` (a class, function or method), or of a whole module."""
    module, _, qualified = location.partition(":")
    text = module_file(module).read_text(encoding="utf-8")
    if not qualified:
        return text
    body = ast.parse(text).body
    node = None
    for part in qualified.split("."):
        node = next(
            (child for child in body
             if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and child.name == part),
            None,
        )
        if node is None:
            raise LookupError(f"{module} has no {qualified}")
        body = node.body
    return ast.get_source_segment(text, node) or ""


def _resolve(entry: VerlInternal):
    target = importlib.import_module(entry.module)
    for part in entry.name.split("."):
        target = getattr(target, part)
    return target


def problem_with(entry: VerlInternal) -> Optional[str]:
    """What no longer holds for ``entry`` in the installed verl (None when everything does)."""
    try:
        importlib.import_module(entry.module)
    except Exception as error:  # noqa: BLE001 -- any import failure is the finding
        return f"module {entry.module} does not import ({type(error).__name__}: {error})"
    if not entry.instance_attribute:
        try:
            target = _resolve(entry)
        except AttributeError:
            return f"{entry.name} no longer exists in {entry.module}"
        if entry.parameters is not None:
            try:
                found = tuple(inspect.signature(target).parameters)
            except (TypeError, ValueError) as error:
                return f"{entry.name} has no readable signature ({error})"
            if found != tuple(entry.parameters):
                return f"parameters changed: expected ({', '.join(entry.parameters)}), found ({', '.join(found)})"
    for location in entry.read_in:
        try:
            source = source_of(location)
        except (LookupError, FileNotFoundError, SyntaxError) as error:
            return f"cannot read {location}: {error}"
        if entry.searched_token not in source:
            return f"{location} no longer contains {entry.searched_token!r}: verl may not use it any more"
    return None


def mismatches(entries: Iterable[VerlInternal] = VERL_INTERNALS) -> list[str]:
    """One line per entry that does not hold: ``what (kind, verl file): what changed``."""
    lines = []
    for entry in entries:
        problem = problem_with(entry)
        if problem is not None:
            lines.append(f"{entry.what} ({entry.kind}, {entry.verl_file}; used by {entry.used_by}): {problem}")
    return lines
