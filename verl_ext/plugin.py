"""The ``verl.plugins`` entry point: verl imports this module on ``import verl`` in every process.

It imports only what registration needs. verl looks a name up only through the module that holds its
registry, so each registration runs when, and in whichever process, verl imports that module (a post-import
hook): a process that never builds a loss, a rollout or a trainer does not pay for importing them, and
``import verl`` with verl-ext costs about what it costs without (``benchmarks/bench_plugin_import.py``).
``VERL_USE_EXTERNAL_PLUGINS=none`` makes verl skip this module altogether (docs/cpu-backend.md).

- now: the ``cpu`` platform (its registry is already loaded), the CPU patches when ``VERL_PLATFORM=cpu``, and
  verl-ext's config checks joined to verl's ``validate_config``, which ``main_ppo``'s driver calls before Ray
  starts (:mod:`verl_ext.driver_checks`);
- when verl imports ``core_algos``: the losses and advantage estimators;
- when verl imports its rollout registries or ``CheckpointEngineRegistry``: the ``cpu`` rollout and the
  ``gloo`` checkpoint engine (:mod:`verl_ext.cpu_runtime.registration`);
- when verl imports its v1 trainer: ``trainer.v1.trainer_mode=delayed_sync`` (:mod:`verl_ext.staleness`);
- when verl imports its single-turn agent loop: the seeded agent loops (:mod:`verl_ext.seeded_agent_loop`);
- when verl imports its tool parsers: the tiny counting task's (:mod:`verl_ext.tools.count_parser`).

verl swallows an exception raised while it loads this module (it logs it at DEBUG level), so a broken plugin
shows up later as "unknown loss mode"; an error inside a deferred registration is raised by the import that
triggers it. ``verl-ext doctor`` imports verl's registries and prints the real error.
"""

import wrapt

from verl_ext.cpu_runtime.registration import register_cpu_backend
from verl_ext.driver_checks import install_driver_checks
from verl_ext.staleness import register_staleness

VERL_LOSS_REGISTRY_MODULE = "verl.trainer.ppo.core_algos"
VERL_SINGLE_TURN_MODULE = "verl.experimental.agent_loop.single_turn_agent_loop"
VERL_TOOL_PARSER_MODULE = "verl.experimental.agent_loop.tool_parser"


def _register_algorithms(_core_algos) -> None:
    from verl_ext.algorithms.verl_glue import register_algorithms

    register_algorithms()


def _register_seeded_agent_loop(_single_turn_module) -> None:
    # importing the module runs its @register(SEEDED_AGENT_LOOP) decorator
    import verl_ext.seeded_agent_loop  # noqa: F401


def _register_tool_parsers(_tool_parser_module) -> None:
    import verl_ext.tools.count_parser  # noqa: F401  (its @ToolParser.register)


register_cpu_backend()
wrapt.register_post_import_hook(_register_algorithms, VERL_LOSS_REGISTRY_MODULE)
register_staleness()
wrapt.register_post_import_hook(_register_seeded_agent_loop, VERL_SINGLE_TURN_MODULE)
wrapt.register_post_import_hook(_register_tool_parsers, VERL_TOOL_PARSER_MODULE)
install_driver_checks()
