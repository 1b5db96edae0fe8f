"""The model a config names (gnnq.config.registry.MODELS), built for one partition's feature width and class count."""

from __future__ import annotations

import torch
from omegaconf import DictConfig

from gnnq.config.registry import MODELS
from gnnq.data.part import Part


def build_model(cfg: DictConfig, part: Part) -> torch.nn.Module:
    return MODELS.target(cfg.model.name).from_config(cfg.model, part.x.shape[1], part.num_classes)


def count_trainable_parameters(model: torch.nn.Module) -> int:
    """Elements of the parameters the optimizer trains (one replica: every rank holds the same model)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
