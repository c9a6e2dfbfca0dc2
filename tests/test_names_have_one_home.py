"""Each data_source value and metric name is spelled once, in verl_ext/data_sources.py or verl_ext/metric_names.py:
no other module of the package, the preprocessors or the benchmarks holds it as a string literal (they import
the constant). The written values themselves are pinned: prepared parquet files and logged runs carry them."""

import ast
import functools
from pathlib import Path

import pytest

from verl_ext import data_sources, metric_names

REPO = Path(__file__).resolve().parents[1]
SCANNED = ("verl_ext", "data_prep", "benchmarks")


def string_constants(module, leave_out=()) -> dict[str, str]:
    return {name: value for name, value in vars(module).items()
            if name.isupper() and isinstance(value, str) and name not in leave_out}


DATA_SOURCES = string_constants(data_sources, leave_out=("GURU_MATH_PREFIX",))  # "math" is also an ability name
METRIC_NAMES = string_constants(metric_names)


@functools.lru_cache(maxsize=1)
def string_literals() -> tuple[tuple[Path, int, str], ...]:
    """(file, line, value) of every string literal in the scanned folders (docstrings hold more than a name)."""
    return tuple(
        (path, node.lineno, node.value)
        for folder in SCANNED
        for path in sorted((REPO / folder).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    )


def literals_outside(home: Path, values: set[str]) -> list[str]:
    return [f"{path.relative_to(REPO)}:{line}: {value!r}" for path, line, value in string_literals()
            if value in values and path != home]


@pytest.mark.parametrize("module, names", [(data_sources, DATA_SOURCES), (metric_names, METRIC_NAMES)],
                         ids=["data_sources", "metric_names"])
def test_no_other_module_spells_a_name(module, names):
    assert literals_outside(Path(module.__file__).resolve(), set(names.values())) == []


def test_the_written_data_source_values_do_not_change():
    assert DATA_SOURCES == {
        "GSM8K": "openai/gsm8k",
        "MATH_LIGHTEVAL": "DigitalLearningGmbH/MATH-lighteval",
        "MATH_500": "HuggingFaceH4/MATH-500",
        "MATH_LEGACY": "lighteval/MATH",
        "TOOLACE": "Team-ACE/ToolACE",
        "TINY_COUNT": "verl_ext/tiny_count",
        "TINY_LETTERS": "verl_ext/tiny_letters",
    }
    assert data_sources.GURU_MATH_PREFIX == "math"


def test_every_source_is_scored_by_the_reward_its_module_names():
    from verl_ext.rewards import UnknownDataSourceError, compute_score
    from verl_ext.tiny import task

    for source in (*data_sources.GSM8K_SOURCES, *data_sources.TOOLACE_SOURCES, *data_sources.MATH_SOURCES,
                   data_sources.GURU_MATH_PREFIX + "__x"):
        assert "score" in compute_score(source, "x", "1")
    assert data_sources.is_guru_math("math__x") and not data_sources.is_guru_math(data_sources.MATH_500)
    with pytest.raises(UnknownDataSourceError, match="known: 'openai/gsm8k'"):
        compute_score(data_sources.TINY_COUNT, "1", "1")
    assert task.compute_score(data_sources.TINY_COUNT, "1", "1")["score"] == 1.0
    assert task.compute_score(data_sources.TINY_LETTERS, "abc xyz", "a-c")["score"] == 0.5


def test_the_name_modules_import_nothing_heavy():
    import subprocess
    import sys

    code = ("import sys, verl_ext.data_sources, verl_ext.metric_names, verl_ext.metrics_file; "
            "print(sorted({'torch', 'verl', 'numpy'} & set(sys.modules)))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"
