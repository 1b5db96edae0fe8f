"""The model a config names (gnnq.config.registry.MODELS), built for one partition's feature width and class count."""

from __future__ import annotations

import torch
from omegaconf import DictConfig

from gnnq.config.registry import MODELS
from gnnq.data.part import Part


def build_model(cfg: DictConfig, part: Part) -> torch.nn.Module:
    m = cfg.model
    model_cls = MODELS.target(m.name)
    if m.name == "gamlp":
        return model_cls(part.x.shape[1], m.hidden, part.num_classes, m.layers, m.dropout, m.norm)
    return model_cls(m.name, part.x.shape[1], m.hidden, part.num_classes, m.layers, m.dropout, m.norm, m.layer_order)


def count_trainable_parameters(model: torch.nn.Module) -> int:
    """Elements of the parameters the optimizer trains (one replica: every rank holds the same model)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
