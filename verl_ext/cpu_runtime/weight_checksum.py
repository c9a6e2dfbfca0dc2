"""A checksum of model weights: which weights a rollout engine holds, in one short string.

``tensor_digest(name, t) = sha256(name || dtype || shape || raw bytes of t)`` and
``checksum = sha256(concatenation of tensor_digest over the names in sorted order)``, first 16 hex digits.
Two weight sets have the same checksum exactly when they have the same names, dtypes, shapes and bit
patterns (up to hash collisions), so the checksum changes whenever a weight push changes any parameter by
any amount. Digests of single tensors can be computed as tensors arrive, in any order, and combined later.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

import torch

CHECKSUM_HEX_DIGITS = 16


def tensor_digest(name: str, tensor: torch.Tensor) -> bytes:
    """sha256 of one named tensor: its name, dtype, shape and raw bytes."""
    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    digest = hashlib.sha256()
    digest.update(name.encode())
    digest.update(str(tensor.dtype).encode())
    digest.update(str(tuple(tensor.shape)).encode())
    digest.update(flat.view(torch.uint8).numpy().tobytes())
    return digest.digest()


def combine_digests(digests: Mapping[str, bytes]) -> str:
    """Checksum of a weight set from the digests of its tensors, independent of arrival order."""
    combined = hashlib.sha256()
    for name in sorted(digests):
        combined.update(digests[name])
    return combined.hexdigest()[:CHECKSUM_HEX_DIGITS]


def weight_checksum(named_tensors: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]]) -> str:
    """Checksum of ``(name, tensor)`` pairs, independent of their order (see the module docstring)."""
    items = named_tensors.items() if isinstance(named_tensors, Mapping) else named_tensors
    return combine_digests({name: tensor_digest(name, tensor) for name, tensor in items})
