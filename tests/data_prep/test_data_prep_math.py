"""MATH preprocessor end to end on both raw schemas (tests/fixtures/datasets/math_*)."""

from __future__ import annotations

import pytest

from data_prep.math import INSTRUCTION, ground_truth_from_solution, parse_level
from data_prep.split_report import MalformedRecord


def test_math_lighteval_schema_takes_the_last_balanced_box(run_command, fixtures):
    result = run_command("math", fixtures / "math_lighteval")
    assert result.status == 0, result.err
    train = result.rows("train")
    assert [row["reward_model"]["ground_truth"] for row in train] == ["\\frac{3}{4}", "4", "\\{1,2\\}", "1024"]
    assert [row["reward_model"]["ground_truth"] for row in result.rows("test")] == ["(-1, 1)", "4"]
    first = train[0]
    assert first["data_source"] == "DigitalLearningGmbH/MATH-lighteval"
    assert first["prompt"] == [
        {"role": "user", "content": f"Compute $\\frac{{1}}{{2}}+\\frac{{1}}{{4}}$. {INSTRUCTION}"}
    ]
    assert first["extra_info"]["level"] == 1 and first["extra_info"]["subject"] == "Prealgebra"
    assert first["extra_info"]["solution"].startswith("Add:")
    assert train[2]["extra_info"]["level"] is None  # "Level ?" in the raw data
    assert "solution schema" in result.out and "rows in 6, rows out 4, skipped 2" in result.out
    assert "skipped      1  solution: no \\boxed{} answer" in result.out
    assert "skipped      1  solution: the last \\boxed{} is not closed" in result.out
    assert "no math500.* file" in result.out and not (result.save_dir / "math500.parquet").exists()


def test_math_answer_schema_with_math500_file(run_command, fixtures):
    result = run_command("math", fixtures / "math_prm800k")
    assert result.status == 0, result.err
    train, test, math500 = result.rows("train"), result.rows("test"), result.rows("math500")
    assert [row["reward_model"]["ground_truth"] for row in train] == ["42", "\\frac{3}{4}"]
    assert test[0]["reward_model"]["ground_truth"] == "90^\\circ"
    assert train[0]["extra_info"]["source_id"] == "train/prealgebra/1.json"
    assert train[0]["extra_info"]["subject"] == "Prealgebra" and train[0]["extra_info"]["level"] == 1
    # MATH-500 has both `answer` and `solution`: the extracted `answer` is used, and the rows keep their source.
    assert [row["reward_model"]["ground_truth"] for row in math500] == ["6", "\\frac{1}{2}"]
    assert {row["data_source"] for row in math500} == {"HuggingFaceH4/MATH-500"}
    assert {row["extra_info"]["split"] for row in math500} == {"math500"}
    assert "skipped      1  answer: empty" in result.out


def test_math_no_math500_flag(run_command, fixtures):
    result = run_command("math", fixtures / "math_prm800k", "--no_math500")
    assert result.status == 0 and not (result.save_dir / "math500.parquet").exists()


@pytest.mark.parametrize(
    "solution, expected",
    [
        ("$\\boxed{\\frac{a}{b}}$", "\\frac{a}{b}"),
        ("\\boxed{1} then \\boxed{2}", "2"),
        ("\\boxed{\\text{(C)}}", "\\text{(C)}"),
        ("\\fbox{7}", "7"),
        ("\\boxed{ 5 }", "5"),
        ("\\boxed{\\left\\{1\\right\\}}", "\\left\\{1\\right\\}"),
    ],
)
def test_math_ground_truth_from_solution(solution, expected):
    assert ground_truth_from_solution(solution) == expected


@pytest.mark.parametrize("solution", ["no box", "\\boxed{1", "\\boxed{}", "\\boxed{  }"])
def test_math_ground_truth_from_solution_rejects(solution):
    with pytest.raises(MalformedRecord) as error:
        ground_truth_from_solution(solution)
    assert error.value.field == "solution"


@pytest.mark.parametrize("raw, level", [("Level 3", 3), ("Level ?", None), (5, 5), ("4", 4), (None, None)])
def test_math_parse_level(raw, level):
    assert parse_level(raw) == level


@pytest.mark.parametrize("raw", [True, "hard", 2.5, [3], 2**70, -1, "Level 99999999999999999999"])
def test_math_parse_level_rejects_what_is_not_a_level(raw):
    """Not silently stored as null (nor crashing the parquet writer): the row is skipped, naming `level`."""
    with pytest.raises(MalformedRecord) as error:
        parse_level(raw)
    assert error.value.field == "level"
