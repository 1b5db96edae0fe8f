"""The optimizer ``trainer.optimizer`` names (gnnq.config.registry.OPTIMIZERS)."""

from __future__ import annotations

import torch
from omegaconf import DictConfig

from gnnq.config.registry import OPTIMIZERS


def make_optimizer(cfg: DictConfig, params) -> torch.optim.Optimizer:
    t = cfg.trainer
    return OPTIMIZERS.target(t.optimizer)(params, lr=t.lr, weight_decay=t.weight_decay)
