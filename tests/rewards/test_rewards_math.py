"""MATH / Guru-Math scoring rules as tables, plus the time bound of the equivalence check."""

from __future__ import annotations

import concurrent.futures
import threading

import pytest

from verl_ext.rewards import compute_score, equivalence_pool, math_settings
from verl_ext.rewards.boxed_answer import last_boxed_content
from verl_ext.rewards.math_equivalence import normalize_answer, normalized_equal, safe_for_symbolic

MATH = "DigitalLearningGmbH/MATH-lighteval"
GURU = "math__deepscaler_preview"
# Pass the guard, yet sympy needs about 20 s (process test) and 2 s (thread test) to tell them apart.
SLOW_TRUTH, SLOW_ANSWER = "(a+b+c+d+e)^{9}", "\\boxed{(a+b+c+d+e)^{10}}"
SLOWISH_TRUTH, SLOWISH_ANSWER = "(x+y+z)^{14}", "\\boxed{(x+y+z)^{15}}"


@pytest.fixture
def fresh_checker():
    """Each test that changes the checker gets the default back afterwards."""
    yield
    equivalence_pool.configure()


@pytest.mark.parametrize(
    "truth, answer",
    [
        ("\\frac{1}{4}", "0.25"),
        ("0.25", "\\frac14"),
        ("\\frac{9}{7}", "\\dfrac{9}{7}"),
        ("\\frac{3}{4}", "\\tfrac34"),
        ("1000", "1,000"),
        ("1000", "1{,}000"),
        ("5", "5.0"),
        ("-2", "-2.00"),
        ("0.5", ".5"),
        ("\\frac{1}{2}", "1/2"),
        ("(1,2)", "(1, 2)"),
        ("(\\frac{1}{2}, 3)", "(0.5,3)"),
        ("[-2,7]", "\\left[ -2, 7 \\right]"),
        ("x^2+2x+1", "(x+1)^2"),
        ("3\\sqrt{2}", "\\sqrt{18}"),
        ("\\frac{\\sqrt{3}}{3}", "\\frac{1}{\\sqrt{3}}"),
        ("\\pi/2", "\\frac{\\pi}{2}"),
        ("90^\\circ", "90"),
        ("10\\%", "10"),
        ("\\$18.90", "18.9"),
        ("180\\text{ miles}", "180"),
        ("x=2", "2"),
        ("\\text{(C)}", "C"),
        ("\\{1,2\\}", "\\{2,1\\}"),
        ("i", "i"),
        ("\\boxed{7}", "7"),  # a boxed ground truth is unboxed
    ],
)
def test_math_equivalent_answers_score_one(truth, answer):
    result = compute_score(MATH, f"We find ... so the answer is $\\boxed{{{answer}}}$.", truth)
    assert result["score"] == 1.0 and result["acc"] == 1.0, result
    assert result["answer_found"] == 1.0 and result["format_ok"] == 1.0


@pytest.mark.parametrize(
    "truth, answer",
    [
        ("\\frac{1}{3}", "0.33"),
        ("(1,2)", "(2,1)"),
        ("[1,2]", "(1,2)"),
        ("5", "6"),
        ("x^2+1", "(x+1)^2"),
        ("1000", "100"),
        ("10", "10.5"),
        ("2", "\\sqrt{2}"),
        ("\\frac{1}{2}", "\\frac{2}{1}"),
        ("1", "2^{2^{2^{100}}}"),
    ],
)
def test_math_different_answers_score_zero(truth, answer):
    result = compute_score(MATH, f"\\boxed{{{answer}}}", truth)
    assert result["score"] == 0.0 and result["acc"] == 0.0 and result["answer_found"] == 1.0, result


@pytest.mark.parametrize(
    "response, score, answer_found",
    [
        ("The answer is 5.", 0.0, 0.0),  # no box scores 0 even when right
        ("\\boxed{5", 0.0, 0.0),  # unclosed
        ("\\boxed{}", 0.0, 0.0),
        ("\\boxed{4} no wait \\boxed{5}", 1.0, 1.0),  # the last box counts
        ("\\boxed{5} no wait \\boxed{4}", 0.0, 1.0),
        ("\\fbox{5}", 1.0, 1.0),
        ("\\boxed 5$.", 1.0, 1.0),
        ("\\boxed{\\frac{10}{2}}", 1.0, 1.0),
    ],
)
def test_math_box_rules(response, score, answer_found):
    result = compute_score(MATH, response, "5")
    assert (result["score"], result["answer_found"]) == (score, answer_found)


@pytest.mark.parametrize(
    "data_source, response, score",
    [
        (GURU, "<think>maybe \\boxed{4}</think> The answer is \\boxed{5}.", 1.0),
        (GURU, "<think>it is \\boxed{5}</think> so the answer is 5.", 0.0),  # box only inside the thinking
        (GURU, "no thinking, \\boxed{5}", 1.0),
        (MATH, "<think>it is \\boxed{5}</think> so the answer is 5.", 1.0),  # MATH reads the whole response
        ("math__merged_deduped_dapo_or1_dataset", "</think>\\boxed{5}", 1.0),
        ("HuggingFaceH4/MATH-500", "\\boxed{5}", 1.0),
    ],
)
def test_guru_reads_after_think(data_source, response, score):
    assert compute_score(data_source, response, "5")["score"] == score


def test_unclosed_think_is_a_format_problem():
    result = compute_score(GURU, "<think>long reasoning ... \\boxed{5}", "5")
    assert result["score"] == 1.0 and result["format_ok"] == 0.0


@pytest.mark.parametrize(
    "text, expected",
    [
        ("\\boxed{a}\\boxed{b}", "b"),
        ("\\boxed{\\frac{1}{\\sqrt{2}}}", "\\frac{1}{\\sqrt{2}}"),
        ("\\boxed{\\{1\\}}", "\\{1\\}"),
        ("\\boxed{ {a} }", " {a} "),
        ("\\fbox{x} then \\boxed{y}", "y"),
        ("\\boxed{y} then \\fbox{x}", "x"),
        ("\\boxed{", None),
        ("\\boxed", None),
        ("\\boxedx{1}", None),
        ("", None),
    ],
)
def test_last_boxed_content(text, expected):
    assert last_boxed_content(text) == expected


@pytest.mark.parametrize(
    "raw, normal",
    [
        ("\\dfrac{1}{2}", "\\frac{1}{2}"),
        ("1,000", "1000"),
        ("5.0", "5"),
        ("x = 3", "3"),
        ("\\left( 1,2 \\right)", "(1,2)"),
        ("45^{\\circ}", "45"),
        ("3/4", "\\frac{3}{4}"),
        ("\\text{Monday}", "Monday"),
        ("(1,234)", "(1,234)"),
    ],
)
def test_normalize_answer(raw, normal):
    assert normalize_answer(raw) == normal


def test_normalized_equal_is_symmetric_and_keeps_tuples_apart_from_numbers():
    assert normalized_equal("(3,100)", "(3, 100)") and not normalized_equal("(3,100)", "3100")
    assert normalized_equal("0.25", "\\frac{1}{4}") and normalized_equal("\\frac{1}{4}", "0.25")
    assert not normalized_equal("", "")


@pytest.mark.parametrize(
    "text, safe",
    [
        ("x^2+1", True),
        ("2^{100}", True),
        ("2^{2^{100}}", False),
        ("10^{10^{10}}", False),
        ("2^{9}^{9}", False),
        ("2^{1000000}", False),
        ("(x+1)^{100}", False),
        ("100000!", False),
        ("(10^5)!", False),
        ("5!", True),
        ("1e999999", False),  # sympy takes seconds on it
        ("2.5e-3", True),
        ("1" * 300, False),
        ("x" * 2000, False),
    ],
)
def test_safe_for_symbolic(text, safe):
    assert safe_for_symbolic(text) is safe


def test_pathological_answers_return_fast_without_timing_out():
    """Refused before any symbolic work: not cut by the budget (timed_out 0; computing any of them would be)."""
    for answer in ("2^{2^{2^{100}}}", "10^{10^{10}}", "100000000!", "(x+y+z)^{300}", "9^{9^{9^{9}}}"):
        result = compute_score(MATH, f"\\boxed{{{answer}}}", "1")
        assert result["score"] == 0.0 and result["timed_out"] == 0.0, answer


def test_slow_check_is_cut_at_its_budget_off_the_main_thread_and_the_next_check_works():
    """verl scores in a thread pool; the budget must hold there (math-verify's own signal timeout does not)."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        # the check itself takes seconds: only the 0.3 s budget (+ kill) makes it report timed_out
        slow = pool.submit(compute_score, MATH, SLOW_ANSWER, SLOW_TRUTH, None, math_timeout_s=0.3).result()
        assert slow["timed_out"] == 1.0 and slow["score"] == 0.0
        after = pool.submit(compute_score, MATH, "\\boxed{(x+1)^2}", "x^2+2x+1").result()
        assert after["score"] == 1.0 and after["timed_out"] == 0.0


def spy_on_budgets(checker, monkeypatch) -> list[float]:
    """The budget of every check the checker is given (the checks themselves run as they would)."""
    budgets: list[float] = []
    check = checker.check

    def recorded(gold, predicted, timeout_s, arrived=None):
        budgets.append(timeout_s)
        return check(gold, predicted, timeout_s, arrived)

    monkeypatch.setattr(checker, "check", recorded)
    return budgets


def test_budget_from_extra_info_and_environment_default(fresh_checker, monkeypatch):
    """Which budget a check gets is recorded, not inferred from how long it took: a fast check under a 0.3 s budget
    (a child's start-up and sympy's first call included) timed out on a loaded machine."""
    budgets = spy_on_budgets(equivalence_pool.get_checker(), monkeypatch)
    assert compute_score(MATH, "\\boxed{(x+1)^2}", "x^2+2x+1")["score"] == 1.0  # a child is up
    result = compute_score(MATH, SLOW_ANSWER, SLOW_TRUTH, {"math_timeout_s": 0.3})
    assert result["timed_out"] == 1.0  # sympy needs seconds: only the budget ends it
    assert budgets == [math_settings.DEFAULT_TIMEOUT_S, 0.3]
    # The environment is read once, on first use (a bad value must fail once, not on every call);
    # configure() reads it again.
    monkeypatch.setenv(math_settings.TIMEOUT_ENV, "0.3")
    assert equivalence_pool.default_timeout_s() == math_settings.DEFAULT_TIMEOUT_S
    budgets = spy_on_budgets(equivalence_pool.configure(), monkeypatch)
    assert equivalence_pool.default_timeout_s() == 0.3
    assert compute_score(MATH, SLOW_ANSWER, SLOW_TRUTH)["timed_out"] == 1.0  # a new child, the environment's budget
    assert compute_score(MATH, "\\boxed{\\sqrt{18}}", "3\\sqrt{2}", {"math_timeout_s": 60})["score"] == 1.0
    assert budgets == [0.3, 60.0]  # extra_info's budget wins over the environment's


def test_concurrent_scoring_from_many_threads():
    cases = [
        ("\\boxed{(x+1)^2}", "x^2+2x+1", 1.0),
        ("\\boxed{\\sqrt{18}}", "3\\sqrt{2}", 1.0),
        ("\\boxed{7}", "8", 0.0),
    ] * 8
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        scores = list(pool.map(lambda c: compute_score(MATH, c[0], c[1])["score"], cases))
    assert scores == [expected for _, _, expected in cases]


def test_invalid_checker_settings_are_rejected():
    with pytest.raises(ValueError, match="expected one of"):
        equivalence_pool.configure(sandbox="docker")
    with pytest.raises(ValueError, match="math_timeout_s"):
        compute_score(MATH, "\\boxed{1}", "1", math_timeout_s=-1)


# Last: it replaces the process-wide checker (the fixture restores a default one).
def test_thread_sandbox_bounds_the_wait(fresh_checker):
    equivalence_pool.configure(sandbox="thread", workers=2, timeout_s=0.2)
    results = []

    def score():
        results.append(compute_score(MATH, SLOWISH_ANSWER, SLOWISH_TRUTH))

    worker = threading.Thread(target=score)
    worker.start()
    worker.join()  # a wait the sandbox does not bound fails at the test's limit (pytest.ini)
    assert results and results[0]["timed_out"] == 1.0
    assert compute_score(MATH, "\\boxed{0.25}", "\\frac{1}{4}")["score"] == 1.0


def test_environment_snapshot_retries_while_another_thread_changes_the_environment(monkeypatch):
    class ChangingEnviron(dict):
        """Fails the first two reads, as os.environ does when a variable is set during the copy."""

        failures = 2

        def keys(self):
            if ChangingEnviron.failures:
                ChangingEnviron.failures -= 1
                raise RuntimeError("dictionary changed size during iteration")
            return super().keys()

        def __iter__(self):
            return iter(self.keys())

    monkeypatch.setattr(equivalence_pool.os, "environ", ChangingEnviron(PATH="/bin", HOME="/root"))
    assert equivalence_pool.environment_snapshot() == {"PATH": "/bin", "HOME": "/root"}
    assert ChangingEnviron.failures == 0

