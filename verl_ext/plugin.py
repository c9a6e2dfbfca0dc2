"""The ``verl.plugins`` entry point: verl imports this module on ``import verl`` in every process.

verl swallows an exception raised here (it logs it at DEBUG level), so a broken plugin shows up later as
"unknown loss mode". ``verl-ext doctor`` imports this module directly and prints the real error.
Each subsystem registers itself with verl's own registries, and verl-ext's config checks join verl's
``validate_config``, which ``main_ppo``'s driver calls before Ray starts (:mod:`verl_ext.driver_checks`).
"""

from verl_ext.cpu.registration import register_cpu_backend
from verl_ext.algorithms.verl_glue import register_algorithms
from verl_ext.driver_checks import install_driver_checks
from verl_ext.seeding import register_seeded_agent_loop
from verl_ext.staleness import register_staleness

register_cpu_backend()
register_algorithms()
register_staleness()
register_seeded_agent_loop()
install_driver_checks()
