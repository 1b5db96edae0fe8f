"""The optimizer ``trainer.optimizer`` names."""

from __future__ import annotations

import torch
from omegaconf import DictConfig

OPTIMIZERS = {"adam": torch.optim.Adam, "sgd": torch.optim.SGD, "adagrad": torch.optim.Adagrad, "adadelta": torch.optim.Adadelta}


def make_optimizer(cfg: DictConfig, params) -> torch.optim.Optimizer:
    t = cfg.trainer
    return OPTIMIZERS[t.optimizer](params, lr=t.lr, weight_decay=t.weight_decay)
