"""Reward functions for GSM8k, MATH, Guru-Math and ToolACE, behind verl's custom-reward signature.

Wire it into a run with::

    reward.custom_reward_function.path=pkg://verl_ext.rewards
    reward.custom_reward_function.name=compute_score        # verl's default name

verl imports ``verl_ext.rewards`` (``pkg://`` means "import this module") in every reward-loop worker and
calls :func:`compute_score` there, in a thread pool, once per response. It dispatches on
``data_source``; each scorer returns the dict described in :mod:`verl_ext.rewards.reward_result`.

===========================================================  =======================================
data_source (constants of :mod:`verl_ext.data_sources`)      scorer
===========================================================  =======================================
``GSM8K_SOURCES``                                            :mod:`verl_ext.rewards.gsm8k`
``MATH_SOURCES`` (MATH-lighteval, MATH-500, lighteval/MATH)  :mod:`verl_ext.rewards.math`
any other value starting with ``GURU_MATH_PREFIX``           :mod:`verl_ext.rewards.math`, reading the
(Guru-Math's ``math__...``)                                  text after the last ``</think>``
``TOOLACE_SOURCES``                                          :mod:`verl_ext.rewards.toolace`
===========================================================  =======================================

Options, as keyword arguments (set run-wide with ``+reward.custom_reward_function.reward_kwargs.KEY=V``)
or per sample under the same key in ``extra_info`` (which wins):

``math_timeout_s``          MATH/Guru: seconds allowed for one equivalence check, in (0, 600] (default 5)
``toolace_mode``            ToolACE: ``exact`` (default) or ``partial``
``toolace_strict_format``   ToolACE: require one think block then one tool-call block (default False)

Configuration mistakes raise and so stop the run at its first batch: an unknown ``data_source``
(:class:`UnknownDataSourceError`), an invalid option (``ValueError`` naming it) or ``VERL_EXT_MATH_*``
variable (:class:`~verl_ext.rewards.math_settings.MathSettingsError` naming it). Nothing else raises or
runs unbounded, whatever the response or ground truth: a scorer failure on some response is caught,
scored 0 and reported as ``scorer_error=1.0``.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from verl_ext.data_sources import GSM8K_SOURCES, MATH_SOURCES, TOOLACE_SOURCES, is_guru_math, reward_sources_text
from verl_ext.rewards import equivalence_pool, gsm8k, math, math_settings, toolace
from verl_ext.rewards.reward_result import reward_result

logger = logging.getLogger(__name__)

OPTION_KEYS = ("math_timeout_s", "toolace_mode", "toolace_strict_format")


class UnknownDataSourceError(ValueError):
    """compute_score got a data_source it has no scorer for."""


def _option(name: str, extra_info: Any, kwargs: dict[str, Any], default: Any) -> Any:
    if isinstance(extra_info, dict) and extra_info.get(name) is not None:
        return extra_info[name]
    value = kwargs.get(name)
    return default if value is None else value


def _as_flag(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
        return value.lower() in ("true", "1")
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise ValueError(f"{name}={value!r}: expected true or false")


def _toolace_mode(value: Any) -> str:
    mode = str(value)
    if mode not in toolace.MODES:
        raise ValueError(f"toolace_mode={mode!r}: expected one of {toolace.MODES}")
    return mode


_OPTION_CHECKS = {
    "math_timeout_s": lambda value: math_settings.seconds("math_timeout_s", value),
    "toolace_mode": _toolace_mode,
    "toolace_strict_format": lambda value: _as_flag("toolace_strict_format", value),
}


def check_reward_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The reward options among ``options`` (e.g. a run's ``reward_kwargs``), checked, and the
    ``VERL_EXT_MATH_*`` variables: what the first batch would otherwise fail on, for a check before a run
    starts. Raises ``ValueError`` naming the key (or variable) and its allowed values; other keys pass."""
    equivalence_pool.settings()
    return {key: _OPTION_CHECKS[key](value) for key, value in options.items() if key in _OPTION_CHECKS and value is not None}


def _scorer_for(data_source: str, extra_info: Any, kwargs: dict[str, Any]):
    """The scoring call for ``data_source`` with its options resolved (options are checked here)."""
    if data_source in GSM8K_SOURCES:
        return gsm8k.compute_score
    if data_source in TOOLACE_SOURCES:
        mode = _toolace_mode(_option("toolace_mode", extra_info, kwargs, "exact"))
        strict = _as_flag("toolace_strict_format", _option("toolace_strict_format", extra_info, kwargs, False))
        return lambda solution, truth: toolace.compute_score(solution, truth, mode=mode, strict_format=strict)
    is_guru = is_guru_math(data_source)
    if data_source in MATH_SOURCES or is_guru:
        equivalence_pool.settings()  # the VERL_EXT_MATH_* variables, checked on first use: a bad one stops the run
        timeout = _option("math_timeout_s", extra_info, kwargs, None)
        timeout = None if timeout is None else math_settings.seconds("math_timeout_s", timeout)
        return lambda solution, truth: math.compute_score(solution, truth, strip_thinking=is_guru, timeout_s=timeout)
    raise UnknownDataSourceError(
        f"verl_ext.rewards.compute_score has no reward function for data_source={data_source!r}; "
        f"known: {reward_sources_text()}"
    )


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> dict[str, float]:
    """verl's custom reward function: score one response; see the module docstring for the dispatch.

    ``kwargs`` takes verl's ``reward_kwargs`` and the extra arguments some reward managers pass
    (``reward_router_address``, ...); keys other than the options above are ignored.
    """
    scorer = _scorer_for(str(data_source), extra_info, kwargs)
    try:
        return scorer(solution_str, ground_truth)
    except Exception:  # never let one response stop a training run; make it visible instead
        logger.exception("verl_ext.rewards: scorer for %r failed; scoring 0", data_source)
        return reward_result(0.0, correct=False, answer_found=False, format_ok=False, scorer_error=True)
