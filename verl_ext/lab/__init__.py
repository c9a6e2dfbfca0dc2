"""The CPU lab: the papers' off-policy comparisons through verl's ``main_ppo`` on the CPU backend.

``verl-ext lab`` (:mod:`verl_ext.lab.cli`). Modules: :mod:`~verl_ext.lab.algorithms` (names -> overrides),
:mod:`~verl_ext.lab.plan` (runs and settings), :mod:`~verl_ext.lab.grids` (one preset per finding),
:mod:`~verl_ext.lab.runner` and :mod:`~verl_ext.lab.session` (running them), :mod:`~verl_ext.lab.summary`
(figures of a run, across seeds), :mod:`~verl_ext.lab.report` (records and tables),
:mod:`~verl_ext.lab.figure` (the PNG).
"""
