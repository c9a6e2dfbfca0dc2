"""What every launcher of a ``main_ppo`` run shares, below the backends and the presets that use it.

``overrides``: Hydra override lists (the key an override sets, merging so that a key set later wins, writing a
path or a name as a value Hydra reads back unchanged); ``names``: what a run or project name may be;
``main_ppo``: the one command line of ``python -m verl.trainer.main_ppo``.
Pure: nothing here imports verl, torch or another verl-ext package.
"""
