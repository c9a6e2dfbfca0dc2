"""LoRA settings verl 0.9.1 would ignore, or run into a failure only inside Ray: refused in the driver, naming the key.

verl spreads LoRA over two sets of keys: the FSDP actor reads ``actor_rollout_ref.model.lora_rank``,
``lora_alpha``, ``target_modules``, ``exclude_modules``, ``target_parameters`` and ``lora_adapter_path``; Megatron,
verl's trainer (``ref_in_actor``) and the vLLM server read ``model.lora.rank``, and everyone reads
``model.lora.merge``. What goes wrong silently, and is refused here (:func:`check_lora`, called by
:func:`verl_ext.driver_checks.check_run_config` before Ray starts, and by the dry run):

- **LoRA keys without LoRA.** With rank 0 every LoRA key is ignored: ``lora_alpha``, ``target_modules``,
  ``exclude_modules``, ``target_parameters``, ``lora.merge``, ``lora.fully_sharded_loras``,
  ``rollout.layered_summon`` set to other values than their defaults, and ``lora_adapter_path`` (the FSDP actor
  loads it only when ``lora_rank > 0``, while verl's trainer then drops the reference model, believing the actor
  holds it).
- **The other strategy's rank.** ``model.lora.rank`` with an FSDP actor (the actor trains no adapter, but vLLM
  enables LoRA and the trainer drops the reference model); ``model.lora_rank`` with Megatron (which reads
  ``lora.rank``).
- **An adapter that never reaches the engine** (verl issue #7495). With ``lora.merge=false`` only verl's colocated
  (``naive``) push sends the adapter; every checkpoint-engine push (``rollout.checkpoint_engine.backend`` other
  than ``naive``: the engine on its own pool, verl's ``separate_async``) streams ``get_per_tensor_param()`` with
  its defaults, the base weights alone, and vLLM then generates with the base model. Set ``lora.merge=true``
  there (the merged weights are pushed; verl casts them to bfloat16 on the way).
- **vLLM options verl overwrites.** In adapter mode verl sets vLLM's ``enable_lora``, ``max_loras`` (1: one slot,
  replaced at every push), ``max_lora_rank`` (from ``lora_rank``) and ``fully_sharded_loras`` (from
  ``model.lora.fully_sharded_loras``) itself: the same names under ``rollout.engine_kwargs.vllm`` are lost.
- **Options that fail inside Ray**: ``rollout.layered_summon=true`` with ``lora.merge=true`` (ignored) or with
  ``load_format=dummy`` (verl's actor raises at the first push: layered collection needs the base weights loaded
  by the engine).
- **A pre-trained adapter** (``lora_adapter_path``, a local folder): verl loads its own ``adapter_config.json`` and
  ignores ``lora_alpha``/``target_modules``/``exclude_modules``/``target_parameters`` (refused when set), while vLLM
  sizes its slot from ``lora_rank``, which must then be the adapter's ``r``.
- **vLLM's largest LoRA rank** (512): verl checks it only when vLLM imports; here it is checked on any machine, and the
  dry run of a GPU config on a machine without vLLM runs verl's own check with this rule
  (:func:`vllm_lora_rank_without_vllm`).
- **Values of the wrong type or range** (:func:`check_lora_values`, first): ``lora_rank`` and ``lora.rank`` integers
  >= 0 (not 1.5, ``abc`` or true) up to :data:`MAX_LORA_RANK`, and with a local model no larger than its
  ``hidden_size`` (a rank above it trains nothing more than full rank); ``lora_alpha`` a finite number > 0 (0 scales
  the adapter away, nan poisons every weight); ``target_modules`` ``all-linear``, a regular expression or a non-empty
  list of module names, ``exclude_modules`` null, a regular expression or a list of names.
- **Target modules the model does not have** (:func:`check_target_modules`): with a local model folder, the model is
  built on the meta device from its ``config.json`` (no weights read) and every name of ``target_modules`` and
  ``exclude_modules`` must name one of its modules as peft matches them (the name or a ``.name`` suffix; a regular
  expression: a full match). peft refuses only when no target matches at all (inside Ray, after a minute), and
  otherwise trains fewer modules than asked without a word.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from contextlib import contextmanager
from typing import Any, Iterator, Optional

from omegaconf import OmegaConf

from verl_ext.config_values import ConfigError, is_finite_number, is_int, reject
from verl_ext.files import read_json_file

MODEL = "actor_rollout_ref.model"
LORA_RANK = f"{MODEL}.lora_rank"
LORA_DICT_RANK = f"{MODEL}.lora.rank"
MERGE = f"{MODEL}.lora.merge"
ADAPTER_PATH = f"{MODEL}.lora_adapter_path"
LAYERED_SUMMON = "actor_rollout_ref.rollout.layered_summon"
LOAD_FORMAT = "actor_rollout_ref.rollout.load_format"
CHECKPOINT_BACKEND = "actor_rollout_ref.rollout.checkpoint_engine.backend"
HYBRID_ENGINE = "actor_rollout_ref.hybrid_engine"
STRATEGY = "actor_rollout_ref.actor.strategy"
VLLM_KWARGS = "actor_rollout_ref.rollout.engine_kwargs.vllm"
FULLY_SHARDED = f"{MODEL}.lora.fully_sharded_loras"
# the FSDP actor's LoRA keys and verl's defaults (verl/trainer/config/model/hf_model.yaml)
FSDP_LORA_DEFAULTS = {
    f"{MODEL}.lora_alpha": 16,
    f"{MODEL}.target_modules": "all-linear",
    f"{MODEL}.exclude_modules": None,
    f"{MODEL}.target_parameters": None,
}
# what verl's vLLM server sets itself in adapter mode (vllm_async_server.py: lora_args), overwriting engine_kwargs
VLLM_LORA_ARGS = ("enable_lora", "max_loras", "max_lora_rank", "fully_sharded_loras")
FSDP_STRATEGIES = ("fsdp", "fsdp2")
# vLLM's MaxLoRARanks, as verl 0.9.1 falls back to when vLLM does not say (vllm_rollout/utils.py: get_vllm_max_lora_rank)
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
VLLM_LORA_UTILS = "verl.workers.rollout.vllm_rollout.utils"
MAX_ADAPTER_CONFIG_BYTES = 1024 * 1024  # peft's adapter_config.json is about 1 KB
# beyond any model's hidden size (a rank above the layers' sizes trains nothing more than full rank)
MAX_LORA_RANK = 1 << 16
LORA_ALPHA = f"{MODEL}.lora_alpha"
TARGET_MODULES = f"{MODEL}.target_modules"
EXCLUDE_MODULES = f"{MODEL}.exclude_modules"
ALL_LINEAR = "all-linear"  # peft's name for every linear layer but the output layer
MODEL_PATH = f"{MODEL}.path"
MAX_MODEL_CONFIG_BYTES = 4 * 1024 * 1024  # a model's config.json is a few KB


def vllm_max_lora_rank(lora_rank: int) -> int:
    """vLLM's ``max_lora_rank`` for an adapter of rank ``lora_rank``: the smallest allowed rank >= it (verl's rule)."""
    fitting = [rank for rank in VLLM_LORA_RANKS if rank >= lora_rank]
    if lora_rank < 1 or not fitting:
        raise ValueError(f"lora_rank must be between 1 and {VLLM_LORA_RANKS[-1]} for vLLM, but got {lora_rank}")
    return fitting[0]


def _value(config: Any, key: str, default: Any = None) -> Any:
    value = OmegaConf.select(config, key, default=default)
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def lora_ranks(config: Any) -> tuple[int, int]:
    """(``model.lora_rank``, ``model.lora.rank``) as integers (0 when unset); :class:`ConfigError` naming the key for
    a value that is no rank (:func:`check_lora_values` says what is allowed)."""
    ranks = []
    for key in (LORA_RANK, LORA_DICT_RANK):
        value = _value(config, key, 0)
        if value is None:
            value = 0
        if not is_int(value) or value < 0:
            reject(key, value, f"an integer >= 0 (0: no LoRA; at most {MAX_LORA_RANK})", "The rank of the LoRA adapter.")
        ranks.append(value)
    return ranks[0], ranks[1]


def lora_adapter_pushes(config: Any) -> bool:
    """Whether verl pushes a LoRA adapter to the rollout (not merged weights): verl's rule in its trainer and vLLM
    server, a rank > 0 under either key and ``lora.merge`` false."""
    return max(lora_ranks(config)) > 0 and not bool(_value(config, MERGE, False))


def check_lora(config: Any) -> None:
    """Raise :class:`ConfigError` on the first LoRA setting verl would ignore or fail on inside Ray (module docstring)."""
    check_lora_values(config)
    rank, dict_rank = lora_ranks(config)
    strategy = _value(config, STRATEGY, "fsdp")
    merge = bool(_value(config, MERGE, False))
    if strategy in FSDP_STRATEGIES and dict_rank > 0 and rank == 0:
        reject(LORA_DICT_RANK, dict_rank, f"0 with {STRATEGY}={strategy}",
               f"The FSDP actor reads {LORA_RANK} (0 here) and trains no adapter, while verl's trainer and vLLM server "
               f"read {LORA_DICT_RANK} and would expect one: set {LORA_RANK}={dict_rank} instead.")
    if strategy == "megatron" and rank > 0 and dict_rank == 0:
        reject(LORA_RANK, rank, f"0 with {STRATEGY}=megatron",
               f"Megatron reads {LORA_DICT_RANK}: set {LORA_DICT_RANK}={rank} instead.")
    if max(rank, dict_rank) == 0:
        _refuse_lora_keys_without_lora(config)
        return
    if bool(_value(config, LAYERED_SUMMON, False)):
        if merge:
            reject(LAYERED_SUMMON, True, f"false with {MERGE}=true",
                   "Layered collection gathers the adapter alone; merged weights are pushed whole and ignore it.")
        if "dummy" in str(_value(config, LOAD_FORMAT, "dummy")):
            reject(LAYERED_SUMMON, True, f"false with {LOAD_FORMAT}=dummy (or set {LOAD_FORMAT}=auto/safetensors)",
                   "It pushes the adapter only, so the engine must load the base weights itself; verl's actor raises "
                   "at the first push otherwise, inside Ray.")
    if not merge:
        _refuse_adapter_through_a_checkpoint_engine(config)
        _refuse_overwritten_vllm_options(config)
        if _value(config, "actor_rollout_ref.rollout.name") == "vllm" and max(rank, dict_rank) > VLLM_LORA_RANKS[-1]:
            key = LORA_RANK if rank else LORA_DICT_RANK
            reject(key, max(rank, dict_rank), f"1..{VLLM_LORA_RANKS[-1]} with vLLM", "vLLM's largest LoRA slot.")
    elif _value(config, FULLY_SHARDED, False):
        reject(FULLY_SHARDED, True, f"false with {MERGE}=true", "Merged weights need no LoRA slot in vLLM.")
    _check_adapter_path(config, rank)
    if strategy in FSDP_STRATEGIES and rank > 0 and _value(config, ADAPTER_PATH) is None:
        check_target_modules(config)



def check_lora_values(config: Any) -> None:
    """The LoRA keys' types and ranges (module docstring), before anything reads them; :class:`ConfigError` naming the
    key and what it accepts."""
    rank, dict_rank = lora_ranks(config)
    for key, value in ((LORA_RANK, rank), (LORA_DICT_RANK, dict_rank)):
        if value > MAX_LORA_RANK:
            reject(key, value, f"an integer in 0..{MAX_LORA_RANK} (0: no LoRA)",
                   "A LoRA rank above a layer's size trains nothing more than full rank; this one would only use memory.")
    alpha = _value(config, LORA_ALPHA, 16)
    if not is_finite_number(alpha) or alpha <= 0:
        reject(LORA_ALPHA, alpha, "a finite number > 0", "peft scales the adapter's update by lora_alpha / lora_rank: "
               "0 trains an adapter that changes nothing, nan or inf makes every weight nan.")
    _check_module_names(TARGET_MODULES, _value(config, TARGET_MODULES, ALL_LINEAR), allow_null=True, allow_empty=False)
    _check_module_names(EXCLUDE_MODULES, _value(config, EXCLUDE_MODULES), allow_null=True, allow_empty=True)


def _check_module_names(key: str, value: Any, allow_null: bool, allow_empty: bool) -> None:
    import re

    allowed = (f"'{ALL_LINEAR}', a regular expression of module names or a{'' if allow_empty else ' non-empty'} list of "
               "module names (q_proj, v_proj, ...)" + (", or null" if allow_null else ""))
    if value is None and allow_null:
        return
    if isinstance(value, str):
        if not value.strip():
            reject(key, value, allowed, "An empty name matches no module.")
        if value == ALL_LINEAR:
            return
        try:
            re.compile(value)
        except re.error as error:
            reject(key, value, allowed, f"peft reads a string as a regular expression, and this one does not compile "
                   f"({error}).")
        return
    if not isinstance(value, list) or (not value and not allow_empty):
        reject(key, value, allowed, "An empty list adapts no module: peft fails on it inside Ray."
               if isinstance(value, list) else "")
    for name in value:
        if not isinstance(name, str) or not name.strip():
            reject(key, value, allowed, f"{name!r} is not a module name.")


def local_model(config: Any) -> Optional[tuple[list[str], Optional[int]]]:
    """(the names of its modules, its ``hidden_size``) of the model at ``actor_rollout_ref.model.path`` (a local
    folder), built on the meta device from its ``config.json`` (no weights read, nothing allocated); None when the
    path is not a local model folder or the model cannot be built here (a hub name: verl downloads it in the workers;
    custom code). A ``config.json`` that is not a regular file of bounded size is a :class:`ConfigError`."""
    from verl_ext.files import open_regular

    path = _value(config, MODEL_PATH)
    if not isinstance(path, str) or "://" in path:
        return None
    folder = os.path.expanduser(path)
    config_file = os.path.join(folder, "config.json")
    if not os.path.isdir(folder) or not os.path.lexists(config_file):
        return None
    try:  # a FIFO would block transformers' reader for ever, a link to /dev/zero never end
        open_regular(config_file, MAX_MODEL_CONFIG_BYTES, "model config (config.json)", ConfigError).close()
    except ConfigError as error:
        raise ConfigError(f"{MODEL_PATH}={path!r}: {error}") from None
    try:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM

        trust = bool(_value(config, f"{MODEL}.trust_remote_code", False))
        hf_config = AutoConfig.from_pretrained(folder, trust_remote_code=trust)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(hf_config, trust_remote_code=trust)
    except Exception:  # not a causal LM transformers builds here (a vision model, custom code): verl decides
        return None
    hidden = getattr(hf_config, "hidden_size", None)
    return [name for name, _ in model.named_modules() if name], hidden if is_int(hidden) else None


def _matches(module: str, names: list[str]) -> bool:
    """Whether peft's rule for a name in a list (the whole name, or its last dotted parts) matches one of ``names``."""
    return any(name == module or name.endswith(f".{module}") for name in names)


def check_target_modules(config: Any) -> None:
    """Every name of ``target_modules`` and ``exclude_modules`` names a module of the local model, and ``lora_rank``
    is at most its ``hidden_size`` (module docstring)."""
    import re

    model = local_model(config)
    if model is None:
        return
    names, hidden = model
    path = _value(config, MODEL_PATH)
    rank = lora_ranks(config)[0]
    if hidden is not None and rank > hidden:
        reject(LORA_RANK, rank, f"an integer in 1..{hidden} (the hidden_size of the model at {path})",
               "A rank above the layers' sizes trains nothing more than full rank, and costs memory for it.")
    for key, default in ((TARGET_MODULES, ALL_LINEAR), (EXCLUDE_MODULES, None)):
        value = _value(config, key, default)
        if value is None or value == ALL_LINEAR:
            continue
        if isinstance(value, str):
            if not any(re.fullmatch(value, name) for name in names):
                reject(key, value, f"a regular expression matching whole module names of the model at {path} (e.g. "
                       f"{_examples(names)})", "peft matches the whole name against it; this one matches none.")
            continue
        missing = [name for name in value if not _matches(name, names)]
        if missing:
            reject(key, value, f"names of modules of the model at {path} ({_examples(names)}, ...)",
                   f"The model has no module named {', '.join(map(repr, missing))}: "
                   + ("peft would fail inside Ray, or adapt fewer modules than asked without a word."
                      if key == TARGET_MODULES else "peft would ignore it without a word."))


def _examples(names: list[str]) -> str:
    """The distinct last parts of the model's module names, in order (q_proj, k_proj, ...), a few of them."""
    leaves = list(dict.fromkeys(name.rpartition(".")[2] for name in names if not name.rpartition(".")[2].isdigit()))
    return ", ".join(leaves[:12])


def _refuse_lora_keys_without_lora(config: Any) -> None:
    why = f"{LORA_RANK} and {LORA_DICT_RANK} are 0: no LoRA is trained, and verl ignores this key."
    for key, default in FSDP_LORA_DEFAULTS.items():
        value = _value(config, key, default)
        if value != default:
            reject(key, value, f"{default!r} (its default) without LoRA", why)
    for key in (MERGE, FULLY_SHARDED, LAYERED_SUMMON):
        if bool(_value(config, key, False)):
            reject(key, True, "false without LoRA", why)
    path = _value(config, ADAPTER_PATH)
    if path is not None:
        reject(ADAPTER_PATH, path, f"null with {LORA_RANK}=0",
               f"The FSDP actor loads the adapter only with {LORA_RANK} > 0 (set it to the adapter's r), while verl's "
               "trainer drops the reference model whenever this path is set.")


def _refuse_adapter_through_a_checkpoint_engine(config: Any) -> None:
    backend = _value(config, CHECKPOINT_BACKEND, "naive")
    if backend != "naive":
        where = ("the engine on its own pool" if _value(config, HYBRID_ENGINE, True) is False
                 else "a checkpoint-engine push")
        reject(MERGE, False, f"true with {CHECKPOINT_BACKEND}={backend} ({where})",
               "verl 0.9.1's checkpoint-engine push streams the LoRA actor's base weights only, never the adapter "
               "(verl issue #7495: the engine would generate with the base model); with lora.merge=true it pushes "
               "the merged weights (cast to bfloat16 by verl).")


def _refuse_overwritten_vllm_options(config: Any) -> None:
    if _value(config, "actor_rollout_ref.rollout.name") != "vllm":
        return
    kwargs = _value(config, VLLM_KWARGS) or {}
    for name in VLLM_LORA_ARGS:
        if name in kwargs:
            reject(f"{VLLM_KWARGS}.{name}", kwargs[name], "unset with LoRA adapter pushes",
                   "verl's vLLM server sets enable_lora, max_loras=1, max_lora_rank (from lora_rank) and "
                   f"fully_sharded_loras (from {FULLY_SHARDED}) itself and overwrites these.")


def _check_adapter_path(config: Any, rank: int) -> None:
    path = _value(config, ADAPTER_PATH)
    if path is None:
        return
    for key, default in FSDP_LORA_DEFAULTS.items():
        value = _value(config, key, default)
        if value != default:
            reject(key, value, f"{default!r} (its default) with {ADAPTER_PATH}",
                   "verl builds the adapter from its own adapter_config.json and ignores this key.")
    path = str(path)
    if "://" in path:  # a remote folder (hdfs://...): verl copies it in the worker; nothing to read here
        return
    config_file = os.path.join(os.path.expanduser(path), "adapter_config.json")
    try:
        adapter = read_json_file(config_file, MAX_ADAPTER_CONFIG_BYTES, "peft adapter config (adapter_config.json)",
                                 ConfigError)
    except ConfigError as error:
        raise ConfigError(f"{ADAPTER_PATH}={path!r}: {error}; a peft adapter folder holds adapter_config.json") from None
    adapter_rank = adapter.get("r") if isinstance(adapter, dict) else None
    if adapter_rank != rank:
        reject(LORA_RANK, rank, f"the adapter's r ({adapter_rank!r}, {config_file})",
               "verl trains the adapter's own rank, while vLLM sizes its LoRA slot from lora_rank.")


@contextmanager
def vllm_lora_rank_without_vllm(config: Any) -> Iterator[list[str]]:
    """For the dry run of a GPU config on a machine without vLLM: verl's ``validate_config`` imports
    ``verl.workers.rollout.vllm_rollout.utils`` (which needs vLLM) to look up vLLM's LoRA rank for a vLLM rollout
    with LoRA adapter pushes. While this context is open, that module is a stand-in whose
    ``get_vllm_max_lora_rank`` is :func:`vllm_max_lora_rank` (verl's own fallback rule); nothing changes where vLLM
    imports or the run needs no lookup. Yields the notes the dry run prints."""
    rank = max(lora_ranks(config))
    needed = (_value(config, "actor_rollout_ref.rollout.name") == "vllm" and lora_adapter_pushes(config)
              and VLLM_LORA_UTILS not in sys.modules and importlib.util.find_spec("vllm") is None)
    notes: list[str] = []
    if not needed:
        yield notes
        return
    stand_in = types.ModuleType(VLLM_LORA_UTILS)
    stand_in.get_vllm_max_lora_rank = vllm_max_lora_rank
    sys.modules[VLLM_LORA_UTILS] = stand_in
    try:
        yield notes
        notes.append(f"vLLM is not installed here: verl's LoRA rank lookup ran with verl's rule (lora_rank {rank} -> "
                     f"vLLM max_lora_rank {vllm_max_lora_rank(rank)})")
    finally:
        if sys.modules.get(VLLM_LORA_UTILS) is stand_in:
            del sys.modules[VLLM_LORA_UTILS]


def lora_summary(resolved: dict) -> Optional[str]:
    """The dry run's LoRA line (None without LoRA): what is trained and what reaches the rollout engine."""
    model = resolved["actor_rollout_ref"]["model"]
    rollout = resolved["actor_rollout_ref"]["rollout"]
    lora = model.get("lora") or {}
    rank = int(model.get("lora_rank") or 0) or int(lora.get("rank") or 0)
    if rank <= 0:
        return None
    adapter = model.get("lora_adapter_path")
    trained = (f"rank {rank}, from adapter {adapter}" if adapter else
               f"rank {rank} alpha={model.get('lora_alpha')} target_modules={model.get('target_modules')}")
    if lora.get("merge"):
        push = "merged into the base weights before each push (bfloat16), a full weight push"
    else:
        push = (f"adapter pushes (base weights {'loaded by the engine' if 'dummy' not in str(rollout.get('load_format')) else 'pushed once'}"
                f"{', layered' if rollout.get('layered_summon') else ''}; the engine sleeps at level 1)")
        if rollout.get("name") == "vllm":
            push += f"; vLLM enable_lora max_loras=1 max_lora_rank={vllm_max_lora_rank(rank)}"
    return f"{trained}; {push}"
