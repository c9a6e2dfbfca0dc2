"""The CPU rollout's LoRA adapter: what verl's vLLM server does with ``add_lora``, on ``transformers`` and ``peft``.

With ``actor_rollout_ref.model.lora_rank > 0`` (or ``model.lora.rank``) and ``model.lora.merge=false``, verl's FSDP
actor trains a peft LoRA adapter and its colocated weight push (``ActorRolloutRefWorker.update_weights``, the naive
checkpoint engine) sends, through the rollout's ``update_weights``:

1. once, when the engine started from dummy weights (``rollout.load_format=dummy``, verl's default): the base
   model's weights, the LoRA-wrapped layers under ``<module>.base_layer.<weight>``, with the adapter's
   ``peft_config`` and ``base_sync_done=False``;
2. at every push: the adapter's tensors only (peft's ``get_peft_model_state_dict`` names,
   ``base_model.model.<module>.lora_A.weight``), with ``peft_config`` and ``base_sync_done=True``.

verl's vLLM server then loads the base weights, and replaces its one LoRA slot with the adapter (``remove_lora`` +
``add_lora``); it sleeps at level 1 (the base weights survive a sleep) and generates with the adapter *if one is
loaded*, with the base model otherwise: verl issue #7495, a rollout that silently never received the adapter.

The CPU rollout does the same with peft's own layers: the first push with a ``peft_config`` injects LoRA layers of
that config into the server's model (``peft.inject_adapter_in_model``, the layers verl's actor trains with), so the
engine's forward pass is the actor's, and each adapter push copies the tensors into them. It is stricter than vLLM
where vLLM is silent: in adapter mode it **refuses to generate without an adapter pushed since the last sleep**
(:class:`verl_ext.cpu_runtime.rollout_server.RolloutWeightsUnavailable`), so a push path that sends only base weights (verl
0.9.1's checkpoint-engine path, :func:`verl_ext.checks.lora.lora_problems`) fails the run instead of training on.

``lora.merge=true`` needs nothing here: verl merges the adapter into the base weights before the push, which the
rollout takes as any full weight push (verl 0.9.1 casts the merged FSDP weights to bfloat16 on the way,
``FSDPEngine._merged_lora_per_tensor_param``).
"""

from __future__ import annotations

from typing import Any, Optional

import torch

ADAPTER_NAME = "default"  # peft's adapter name, which verl's actor uses and vLLM's one LoRA slot stands for
PEFT_PREFIX = "base_model.model."  # what peft's get_peft_model_state_dict puts before the model's own names
BASE_LAYER = ".base_layer"
# the tensor kinds of a LoRA adapter in peft's state dict (the adapter name removed): lora_A.weight, lora_B.weight,
# lora_embedding_A/B, lora_magnitude_vector (DoRA) ...
ADAPTER_MARK = ".lora_"


def lora_as_adapter(model_config: Any) -> bool:
    """Whether verl pushes a LoRA adapter (not merged weights): verl's own rule (``vLLMHttpServer.lora_as_adapter``):
    ``model.lora_rank > 0`` or ``model.lora.rank > 0``, and not ``model.lora.merge``."""
    lora = dict(getattr(model_config, "lora", None) or {})
    rank = int(getattr(model_config, "lora_rank", 0) or 0)
    return (rank > 0 or int(lora.get("rank", 0) or 0) > 0) and not bool(lora.get("merge", False))


def adapter_parameter_name(pushed_name: str) -> str:
    """The injected model's parameter of an adapter tensor as verl pushes it:
    ``base_model.model.<module>.lora_A.weight`` -> ``<module>.lora_A.default.weight``."""
    name = pushed_name[len(PEFT_PREFIX):] if pushed_name.startswith(PEFT_PREFIX) else pushed_name
    module, _, leaf = name.rpartition(".")
    if ADAPTER_MARK not in "." + name:
        raise KeyError(f"pushed adapter tensor {pushed_name!r} is not a LoRA tensor (no 'lora_' part)")
    if module.rpartition(".")[2].startswith("lora_") and leaf in ("weight", "bias"):
        return f"{module}.{ADAPTER_NAME}.{leaf}"  # lora_A.weight -> lora_A.default.weight
    return f"{name}.{ADAPTER_NAME}" if name.rpartition(".")[2].startswith("lora_") else name  # lora_embedding_A ...


def base_parameter_name(pushed_name: str, targets: set[str]) -> Optional[str]:
    """The model's name for a base weight as pushed: as it is, or with peft's ``.base_layer`` removed or added (a
    LoRA-wrapped layer keeps its weight under ``<module>.base_layer.weight``). None when none of them exists."""
    candidates = [pushed_name, pushed_name.replace(BASE_LAYER, "")]
    module, _, leaf = pushed_name.rpartition(".")
    if module:
        candidates.append(f"{module}{BASE_LAYER}.{leaf}")
    return next((name for name in candidates if name in targets), None)


def adapter_checksum(named_tensors: dict[str, torch.Tensor]) -> str:
    """The checksum of the LoRA tensors among ``named_tensors``, by the engine's names: its injected parameters
    (``<module>.lora_A.default.weight``), the actor's parameters or checkpoint (``base_model.model.<module>
    .lora_A.default.weight``) and a saved adapter file (``base_model.model.<module>.lora_A.weight``) give the same
    for the same adapter."""
    from verl_ext.cpu_runtime.weight_checksum import weight_checksum

    return weight_checksum({adapter_parameter_name(name): tensor
                            for name, tensor in named_tensors.items() if ADAPTER_MARK in "." + name})


class RolloutLoRA:
    """The LoRA side of one CPU rollout server (adapter mode only; see the module docstring)."""

    def __init__(self, model: torch.nn.Module, enabled: bool):
        self.model = model
        self.enabled = enabled
        self.config: Optional[dict[str, Any]] = None  # the peft_config the layers were injected with
        self.adapter_version: Optional[int] = None  # the push whose adapter the layers hold
        self.loaded = False  # an adapter was pushed since the engine last slept (or since the base changed)

    def prepare(self, peft_config: dict[str, Any]) -> bool:
        """Make the model's layers those of ``peft_config`` (injected at the first adapter push); True when the
        model's parameters changed (new layers). Refused unless the engine is in adapter mode, and when a later
        push names another adapter structure (vLLM's one slot is sized once, from ``lora_rank``)."""
        if not self.enabled:
            raise ValueError(
                "CPU rollout: a LoRA adapter push (peft_config) reached an engine not set up for adapters: "
                "actor_rollout_ref.model.lora_rank is 0 or actor_rollout_ref.model.lora.merge is true")
        config = _comparable(peft_config)
        if self.config is not None:
            if config != self.config:
                changed = sorted(key for key in set(config) | set(self.config) if config.get(key) != self.config.get(key))
                raise ValueError(f"CPU rollout: the pushed LoRA adapter's config differs from the first one's: {changed}")
            return False
        from peft import inject_adapter_in_model
        from peft.mapping import get_peft_config

        inject_adapter_in_model(get_peft_config(dict(peft_config)), self.model, adapter_name=ADAPTER_NAME)
        for name, parameter in self.model.named_parameters():
            parameter.requires_grad_(False)
            if ADAPTER_MARK in "." + name:
                parameter.data = parameter.data.to(next(self.model.parameters()).dtype)
        self.config = config
        return True

    def adapter_parameters(self) -> dict[str, torch.Tensor]:
        return {name: parameter for name, parameter in self.model.named_parameters() if ADAPTER_MARK in "." + name}

    def target(self, pushed_name: str, adapter: bool, parameters: dict[str, torch.Tensor]) -> str:
        """The parameter a pushed tensor fills (KeyError naming it when the model has none)."""
        if adapter:
            name = adapter_parameter_name(pushed_name)
            if name not in parameters:
                raise KeyError(f"pushed adapter tensor {pushed_name!r} has no LoRA layer in the rollout model ({name!r})")
            return name
        name = base_parameter_name(pushed_name, set(parameters))
        if name is None:
            raise KeyError(f"pushed weight {pushed_name!r} is not a weight of {type(self.model).__name__}")
        return name

    def missing_adapter_problem(self) -> Optional[str]:
        """Why the engine must not generate (adapter mode without a current adapter), or None."""
        if not self.enabled or self.loaded:
            return None
        if self.config is None:
            return ("actor_rollout_ref.model.lora_rank > 0 with lora.merge=false (a LoRA adapter) but no adapter was "
                    "pushed yet: a weight push without peft_config carries only the base weights (verl 0.9.1's "
                    "checkpoint-engine path; verl issue #7495), and vLLM would generate with the base model")
        if self.adapter_version is None:
            return ("the base weights arrived but no adapter was pushed yet (verl pushes it right after them); "
                    "vLLM would generate with the base model")
        return ("no LoRA adapter was pushed since the engine slept or its base weights changed (version "
                f"{self.adapter_version} is not current); vLLM would generate with a stale adapter")


def _comparable(peft_config: dict[str, Any]) -> dict[str, Any]:
    """The structure-defining part of a peft config dict (sets as sorted lists; the version stamp left out)."""
    skip = {"peft_version", "base_model_name_or_path", "revision", "inference_mode", "auto_mapping"}
    return {key: sorted(value) if isinstance(value, (set, frozenset)) else value
            for key, value in dict(peft_config).items() if key not in skip}
