"""What a registered method declares to the layers above it: the facts the launcher and the ranks read.

A method (a model, a quantizer's codec family, a parallel strategy or trainer) is one registry line in
``gnnq.config.registry``: its name, its config dataclass (``gnnq.config.schema``), its implementation as a
"module:attribute" string, the choices of other groups it works with (``Needs``, checked by
``gnnq.config.validate`` while composing), its ``Resources`` (what a rank of it holds and what the launcher
prepares for it: data, so that the launcher plans a run without importing the implementation and torch)
and, for parallel choices, its trainer. The implementation class itself, in the method's own file, owns
its construction from its config node (``from_config(...)``; no if-chain on names elsewhere).

Why this split (and not method modules that register themselves): config/ is the bottom layer and
imports nothing above it, yet composition and validation need every choice's dataclass and rules before
anything else is imported. So the registry names implementations by string, and only the ranks (the rank entry,
train/) resolve them, where they import torch anyway; the launcher reads only the registry's data. This
module is pure data: importing it costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

KEPT_LAYERS = ("all", "block", "one")


@dataclass(frozen=True)
class Resources:
    """What one rank of a method holds (the memory estimate's inputs) and what the launcher prepares for it.

    Read by ``gnnq.launch.resources`` (memory), ``gnnq.launch.job`` (parts, data checks) and the rank entry
    (which part it loads); a method's facts combine with those of the run's other choices there."""

    # every rank reads the same single part, the whole graph (layer-parallel): the launcher prepares one part
    shared_part: bool = False
    # layers whose activations a rank keeps: all | block (its own block, ceil(layers / ranks)) | one
    kept_layers: str = "all"
    # copies per kept inner node, layer and hidden unit when the method fixes them; None: the launcher's
    # full-graph default plus the extras below
    inner_copies: int | None = None
    # halo buffers kept across epochs or in flight (a strategy's stale or cached rows, a codec's traced rows)
    halo_buffers: bool = False
    weight_paths: int = 1  # a model's weight paths per layer (GraphSAGE: self and neighbours)
    # a model's inputs are [X, AX, ..., A^hops X] (``model.hops``), which the launcher computes and caches (GA-MLP)
    propagated_inputs: bool = False
    single_label: bool = False  # trains single-label classification only: the launcher refuses multi-label data
    # the trainer steps trainer.optimizer, which keeps its state beside every parameter (Adam: 2 tensors of its size);
    # False: its own updates (parallel=admm), weights and one update-sized copy only
    optimizer_state: bool = True

    def __post_init__(self):
        if self.kept_layers not in KEPT_LAYERS:
            raise ValueError(f"kept_layers={self.kept_layers!r}; allowed: {', '.join(KEPT_LAYERS)}")
        if self.weight_paths < 1 or (self.inner_copies is not None and self.inner_copies < 1):
            raise ValueError(f"weight_paths and inner_copies must be >= 1: {self}")

    def layers_kept(self, layers: int, ranks: int) -> int:
        return {"all": layers, "block": -(-layers // max(1, ranks)), "one": 1}[self.kept_layers]
