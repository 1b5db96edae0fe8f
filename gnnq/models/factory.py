"""The model a config names, built for one partition's feature width and class count."""

from __future__ import annotations

import torch
from omegaconf import DictConfig

from gnnq.data.halo import Part
from gnnq.models.gamlp import GAMLP
from gnnq.models.gnn import GNN


def build_model(cfg: DictConfig, part: Part) -> torch.nn.Module:
    m = cfg.model
    if m.name == "gamlp":
        return GAMLP(part.x.shape[1], m.hidden, part.num_classes, m.layers, m.dropout, m.norm)
    return GNN(m.name, part.x.shape[1], m.hidden, part.num_classes, m.layers, m.dropout, m.norm)
