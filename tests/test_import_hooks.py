"""verl-ext's one mechanism for acting on a module when it is imported (verl_ext/import_hooks.py)."""

import importlib
import re
import sys
from pathlib import Path

from verl_ext import import_hooks

REPO = Path(__file__).resolve().parents[1]


def _late_module(tmp_path, monkeypatch, name: str) -> str:
    (tmp_path / f"{name}.py").write_text("VALUE = 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_the_callback_runs_when_the_module_is_first_imported_and_at_once_after(tmp_path, monkeypatch):
    name = _late_module(tmp_path, monkeypatch, "late_module_for_import_hooks_a")
    seen = []
    try:
        import_hooks.when_imported(name, lambda module: seen.append(module.VALUE))
        assert seen == []
        importlib.import_module(name)
        assert seen == [7]
        import_hooks.when_imported(name, lambda module: seen.append(-module.VALUE))  # imported already: now
        assert seen == [7, -7]
    finally:
        sys.modules.pop(name, None)


def test_after_the_undo_an_import_calls_nothing(tmp_path, monkeypatch):
    name = _late_module(tmp_path, monkeypatch, "late_module_for_import_hooks_b")
    seen = []
    try:
        stop = import_hooks.when_imported(name, seen.append)
        stop()
        importlib.import_module(name)
        assert seen == []
    finally:
        sys.modules.pop(name, None)


def test_no_other_module_waits_for_an_import_its_own_way():
    """wrapt's post-import hooks and the import system's finders are used in verl_ext/import_hooks.py alone."""
    pattern = re.compile(r"\bwrapt\b|meta_path|register_post_import_hook|MetaPathFinder")
    users = sorted(str(path.relative_to(REPO)) for path in (REPO / "verl_ext").rglob("*.py")
                   if pattern.search(path.read_text(encoding="utf-8")))
    assert users == ["verl_ext/import_hooks.py"]


def test_the_architecture_doc_shows_the_wiring_table_of_the_code():
    """docs/architecture.md's wiring table has one row per verl module of verl_ext.plugin.wiring(), naming the file
    whose action runs there and where (every process, or the CPU platform only)."""
    from verl_ext import plugin

    expected = {}
    for row in plugin.wiring():
        module = row.action.__module__
        path = module.replace(".", "/") + ("/__init__.py" if module == "verl_ext.staleness" else ".py")
        expected.setdefault(row.module, set()).add((path.removeprefix("verl_ext/"), row.when))
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(verl\.[\w.]+)` \| [^|]+ \| `([\w/.]+)` \| `?([^|`]+?)`? \|$", text, flags=re.MULTILINE)
    shown = {}
    for module, path, when in rows:
        shown.setdefault(module, set()).add((path, when))
    assert shown == expected
