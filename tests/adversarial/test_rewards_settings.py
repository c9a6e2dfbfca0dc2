"""Every VERL_EXT_MATH_* value and every math_timeout_s is checked once, with an error that names it and
its allowed values; none can turn every reward into 0 or leak a worker per call."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from verl_ext.rewards import compute_score, equivalence_pool, math_settings
from verl_ext.rewards.math_settings import MathSettingsError, from_environment

REPO = Path(__file__).resolve().parents[2]
MATH = "HuggingFaceH4/MATH-500"
BAD_SECONDS = ["0", "-1", "nan", "inf", "-inf", "1e9", "601", "five", "5s", "", "0x10"]
BAD_VALUES = [
    *[(math_settings.TIMEOUT_ENV, value) for value in BAD_SECONDS],
    *[(math_settings.STARTUP_ENV, value) for value in BAD_SECONDS],
    *[(math_settings.WORKERS_ENV, value) for value in ["0", "-2", "2.5", "four", "65", "1e3", ""]],
    *[(math_settings.SANDBOX_ENV, value) for value in ["docker", "Process", "", "threads"]],
    *[(math_settings.MEMORY_ENV, value) for value in ["0", "100", "4096MB", "4.5", str(1 << 40), "nan"]],
]


@pytest.mark.parametrize("name, value", BAD_VALUES)
def test_a_bad_environment_value_is_named_with_its_allowed_values(name, value):
    with pytest.raises(MathSettingsError) as error:
        from_environment({name: value})
    message = str(error.value)
    assert message.startswith(f"{name}={value!r}: expected ")
    assert any(word in message for word in ("(0, 600]", "[1, 64]", "process, thread", "[512, 1048576]"))


def test_a_misspelt_variable_is_an_error_not_silently_ignored():
    with pytest.raises(MathSettingsError, match="VERL_EXT_MATH_TIMEOUT='2'.*reads only VERL_EXT_MATH_TIMEOUT_S"):
        from_environment({"VERL_EXT_MATH_TIMEOUT": "2"})


def test_good_values_and_defaults():
    settings = from_environment({math_settings.TIMEOUT_ENV: " 2.5 ", math_settings.WORKERS_ENV: "3",
                                 math_settings.SANDBOX_ENV: "thread", math_settings.MEMORY_ENV: "2048",
                                 math_settings.STARTUP_ENV: "600", "PATH": "/bin"})
    assert (settings.timeout_s, settings.workers, settings.sandbox, settings.memory_mb) == (2.5, 3, "thread", 2048)
    assert settings.startup_allowance_s == 600.0
    defaults = from_environment({})
    assert (defaults.timeout_s, defaults.startup_allowance_s, defaults.sandbox) == (5.0, 10.0, "process")


@pytest.mark.parametrize(
    "value", [math.inf, -math.inf, math.nan, 0, 0.0, -1, 601, 1e300, "inf", "nan", "abc", None.__class__, True, [1]]
)
def test_math_timeout_s_option_is_finite_and_positive_or_an_error_naming_it(value):
    for options in ({"math_timeout_s": value}, {}):
        extra_info = {} if options else {"math_timeout_s": value}
        with pytest.raises(ValueError, match=r"math_timeout_s=.*expected seconds, a number in \(0, 600\]"):
            compute_score(MATH, "\\boxed{(x+1)^2}", "x^2+2x+1", extra_info, **options)


@pytest.mark.parametrize("arguments", [{"timeout_s": math.inf}, {"startup_allowance_s": 0}, {"workers": 0},
                                       {"workers": 2.5}, {"sandbox": "docker"}])
def test_configure_rejects_what_the_environment_rejects(arguments):
    with pytest.raises(MathSettingsError, match=next(iter(arguments))):
        equivalence_pool.configure(**arguments)


def test_a_bad_variable_stops_the_first_math_call_with_its_name_instead_of_scoring_zero():
    """Run as verl would: a fresh process with VERL_EXT_MATH_TIMEOUT_S=0 (which once scored every correct
    answer 0). The first call raises, naming the variable; GSM8k, which does not use it, still scores."""
    script = (
        "from verl_ext.rewards import compute_score\n"
        "assert compute_score('openai/gsm8k', '#### 5', '5')['score'] == 1.0\n"
        "compute_score('HuggingFaceH4/MATH-500', '\\\\boxed{5}', '5')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), math_settings.TIMEOUT_ENV: "0"}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "MathSettingsError: VERL_EXT_MATH_TIMEOUT_S='0': expected seconds, a number in (0, 600]" in result.stderr


def test_reward_kwargs_can_be_checked_before_a_run():
    """A run's reward_kwargs (math_timeout_s=inf once passed and leaked a worker per call) fail before the
    first batch through check_reward_options; other keys verl passes are left alone."""
    from verl_ext.rewards import check_reward_options

    assert check_reward_options(
        {"math_timeout_s": "2.5", "toolace_mode": "partial", "toolace_strict_format": "true", "reward_router_address": 1}
    ) == {"math_timeout_s": 2.5, "toolace_mode": "partial", "toolace_strict_format": True}
    for bad, match in (({"math_timeout_s": "inf"}, "math_timeout_s='inf'"), ({"toolace_mode": "fuzzy"}, "toolace_mode"),
                       ({"toolace_strict_format": "yes"}, "toolace_strict_format")):
        with pytest.raises(ValueError, match=match):
            check_reward_options(bad)
