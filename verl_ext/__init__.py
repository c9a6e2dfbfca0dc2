"""verl-ext: off-policy REINFORCE-family algorithms for verl 0.9.1.

Importing this package is cheap; verl's registries are filled by :mod:`verl_ext.plugin`, which verl
loads through the ``verl.plugins`` entry point on ``import verl`` in every process.
"""

__version__ = "0.1.0"
