"""``torch``, imported at its first use.

The algorithm modules register their names and keys when imported, and the launcher, ``verl-ext list`` and the
presets read them without paying for torch (tests/adversarial/test_launcher_variables.py refuses a bad argument
before torch is imported). They write ``from verl_ext.algorithms.lazy_torch import torch`` and use it as torch;
the first attribute read (``torch.exp``) imports the real module, and each attribute is kept after its first read.
"""

import importlib


class _Torch:
    def __getattr__(self, name: str):
        value = getattr(importlib.import_module("torch"), name)
        setattr(self, name, value)
        return value


torch = _Torch()
