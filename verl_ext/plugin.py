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

Every "when verl imports" goes through one mechanism (:func:`verl_ext.import_hooks.when_imported`), and
:func:`wiring` lists them all, the CPU patches that wait for an import included: ``verl-ext doctor`` prints that
table, docs/architecture.md shows it.

verl swallows an exception raised while it loads this module (it logs it at DEBUG level), so a broken plugin
shows up later as "unknown loss mode"; an error inside a deferred registration is raised by the import that
triggers it. ``verl-ext doctor`` imports verl's registries and prints the real error.
"""

from verl_ext import staleness
from verl_ext.cpu_runtime import registration
from verl_ext.driver_checks import install_driver_checks
from verl_ext.import_hooks import OnImport, install

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


ON_IMPORT = (
    OnImport(VERL_LOSS_REGISTRY_MODULE, "verl-ext's policy losses and advantage estimators, in verl's registries",
             _register_algorithms),
    OnImport(VERL_SINGLE_TURN_MODULE, "the seeded agent loops, in verl's agent-loop registry", _register_seeded_agent_loop),
    OnImport(VERL_TOOL_PARSER_MODULE, "the tiny counting task's tool parser, in ToolParser's registry",
             _register_tool_parsers),
)


def wiring() -> tuple[OnImport, ...]:
    """Every verl module whose import makes verl-ext register or patch something, with what and by whom: the
    plugin's own rows, the CPU backend's, the staleness trainer's, and the CPU patches that wait for an import
    (installed only where ``VERL_PLATFORM=cpu``)."""
    from verl_ext.cpu_runtime import patches  # imports torch: the doctor's, not every process's

    return (*registration.ON_IMPORT, *ON_IMPORT[:1], *staleness.ON_IMPORT, *ON_IMPORT[1:], *patches.ON_IMPORT)


registration.register_cpu_backend()
install(ON_IMPORT)
staleness.register_staleness()
install_driver_checks()
