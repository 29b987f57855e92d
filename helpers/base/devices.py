"""Where models and batches live: the CPU on the course profile, a GPU on the paper profile.

``default_device()`` is ``$SIXTEEN_HEADS_DEVICE`` when set (``cpu``, ``cuda``, ``cuda:1``), else
the GPU of this process (``cuda:$LOCAL_RANK``, which torchrun sets for each of its processes)
when there is one, else the CPU. ``course.load_classifier`` and ``course.load_translation``
put their models there, and every helper that feeds a model moves its batch to the model's
device with ``to_device``, so a notebook never names a device.
"""

from __future__ import annotations

import os
from typing import Any

import torch
from torch import nn


def device_of(model: nn.Module) -> torch.device:
    """The device of ``model``'s parameters."""
    return next(model.parameters()).device


def default_device() -> torch.device:
    chosen = os.environ.get("SIXTEEN_HEADS_DEVICE")
    if chosen:
        return torch.device(chosen)
    if torch.cuda.is_available():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
    return torch.device("cpu")


def to_device(batch: Any, device: torch.device | nn.Module) -> Any:
    """``batch`` with every tensor in it (nested dicts, lists, tuples) on ``device`` (or on the
    device of the model given instead); anything else unchanged. A no-op on the CPU."""
    if isinstance(device, nn.Module):
        device = device_of(device)
    if isinstance(batch, torch.Tensor):
        return batch if batch.device == device else batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(v, device) for v in batch)
    return batch
