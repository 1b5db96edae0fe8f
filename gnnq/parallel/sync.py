"""Synchronous halo exchange: every layer waits for exact, current halo rows."""

from __future__ import annotations

import inspect
from typing import ClassVar

import torch

from gnnq.comm.halo import EVALUATION, HaloExchange, Traffic
from gnnq.comm.row_buffers import RowBuffers
from gnnq.data.sparse_rows import stack_csr
from gnnq.models.gnn import BeforeDropout
from gnnq.models.graph_ops import LocalGraph

INPUTS = ("once", "every_epoch")


class SyncStrategy:
    """Supplies the model's aggregates A @ [h_inner; h_halo]. Layer-0 inputs never change: with ``inputs="once"``
    (gnnq's default) their halo rows are fetched once, at setup; with ``inputs="every_epoch"`` (AdaQP's code) layer 0
    goes the way of every hidden layer instead (``aggregate_hidden``): its halo rows are exchanged in every forward
    pass, quantized in training when a quantizer is set, and counted as layer 0's forward bytes.

    ``traffic`` says what the messages of the current step are (training of an epoch, or evaluation);
    it goes with every message, so the exchange holds no epoch of its own. Each hidden layer's
    [h_inner; h_halo] lives in a buffer kept across epochs (``buffers``): the halo rows are received
    or decoded straight into it. So do the input rows: [x_inner; x_halo] is one buffer (``x_full``), fetched into
    once, whose inner rows layer 0 refreshes from its input (a copy of the inner rows, not a new
    [inner; halo] array every step: at products scale that is a GB per rank and step).
    """

    # a strategy's own keys: its __init__ parameter -> its key of parallel.* (every strategy also takes ``inputs``)
    config_keys: ClassVar[dict[str, str]] = {}
    takes_seed: ClassVar[bool] = False  # its __init__ takes the run's seed (``seed``)

    @classmethod
    def from_config(cls, pcfg, exchange: HaloExchange, graph: LocalGraph, x_inner: torch.Tensor, seed: int):
        """The strategy with its own keys from ``parallel.*`` (``config_keys``; a key the node lacks: the default)."""
        defaults = inspect.signature(cls.__init__).parameters
        own = {arg: pcfg.get(key, defaults[arg].default) for arg, key in cls.config_keys.items()}
        if cls.takes_seed:
            own["seed"] = seed
        return cls(exchange, graph, x_inner, inputs=pcfg.get("inputs", "once"), **own)

    def __init__(self, exchange: HaloExchange, graph: LocalGraph, x_inner: torch.Tensor, inputs: str = "once"):
        if inputs not in INPUTS:
            raise ValueError(f"parallel.inputs={inputs!r}: allowed {', '.join(INPUTS)}")
        self.exchange = exchange
        self.graph = graph
        self.inputs_every_epoch = inputs == "every_epoch"
        self.x_aggregated = None  # sparse features: A @ [x_inner; x_halo], computed once (it never changes)
        if x_inner.layout == torch.sparse_csr:
            self._sparse_inputs(x_inner)
            return
        n = x_inner.shape[0]
        self.x_full = x_inner.new_empty((n + exchange.num_halo,) + tuple(x_inner.shape[1:]))
        self.x_full[:n] = x_inner
        self.x_inner = x_inner  # the model's layer-0 input on every step: its rows are in x_full already
        self.x_halo = self.x_full[n:]  # a view of x_full: the halo inputs, fetched once unless every epoch
        if not self.inputs_every_epoch:
            exchange.fetch_static(x_inner, out=self.x_halo)
        self.traffic = Traffic.training(0)
        self.buffers = RowBuffers()

    def _sparse_inputs(self, x_inner: torch.Tensor) -> None:
        """Sparse CSR features: the halo rows fetched once as non-zeros, [x_inner; x_halo] kept sparse."""
        if self.inputs_every_epoch:
            raise ValueError(
                "parallel.inputs=every_epoch needs dense input features (their halo rows then travel as a hidden "
                "layer's do); with features.npz use parallel.inputs=once"
            )
        self.x_inner = x_inner
        self.x_halo = self.exchange.fetch_static_sparse(x_inner)
        self.x_full = stack_csr(x_inner, self.x_halo)
        self.traffic = Traffic.training(0)
        self.buffers = RowBuffers()

    def begin_training_epoch(self, epoch: int) -> None:
        """The following messages are training messages of ``epoch`` (which seeds their quantization draws)."""
        self.traffic = Traffic.training(epoch)

    def end_training_epoch(self, epoch: int, loss: float) -> None:
        """Epoch ``epoch`` is over and its loss (the run's, alike on every rank) is known (strategies that adapt)."""

    def epoch_fields(self) -> dict:
        """What the strategy chose in the epoch just trained, for its metrics row (alike on every rank)."""
        return {}

    def describe(self) -> dict | None:
        """What the strategy chose during the run, for the run record (None: nothing)."""
        return None

    def begin_evaluation(self) -> None:
        """The following messages are evaluation messages (exact, counted apart)."""
        self.traffic = EVALUATION

    def settle(self) -> None:
        """Wait for this epoch's training messages still in flight (strategies that post ahead; the
        driver calls it before an evaluation, inside the epoch's timer)."""

    def close(self) -> None:
        """Finish whatever is still in flight (strategies that post ahead)."""

    def state_dict(self) -> dict:
        """What a resumed run needs to go on exactly as an uninterrupted one (nothing for sync)."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass

    def __call__(self, layer: int, h_inner: torch.Tensor, before_dropout: BeforeDropout | None = None) -> torch.Tensor:
        """The model's ``propagate`` (gnnq.models.gnn)."""
        if layer == 0 and self.x_full.layout == torch.sparse_csr:
            if self.x_aggregated is None:  # inputs need no gradient: the sparse product once, for every epoch
                self.x_aggregated = self.graph.aggregate(self.x_full)
            return self.x_aggregated
        if layer == 0 and not self.inputs_every_epoch:
            return self.graph.aggregate(self.input_rows(h_inner))
        return self.aggregate_hidden(layer, h_inner, before_dropout)

    def input_rows(self, h_inner: torch.Tensor) -> torch.Tensor:
        """[h_inner; x_halo]: the held ``x_full``, with ``h_inner`` copied into its inner rows unless it is the
        input ``x_full`` was built from (inputs need no gradient); a new concatenation only for an input
        that does, or of another size."""
        n = h_inner.shape[0]
        if h_inner.requires_grad or n + self.exchange.num_halo != self.x_full.shape[0]:
            return torch.cat([h_inner, self.x_halo])
        if h_inner is not self.x_inner:
            self.x_full[:n].copy_(h_inner)
        return self.x_full

    def aggregate_hidden(
        self, layer: int, h_inner: torch.Tensor, before_dropout: BeforeDropout | None = None
    ) -> torch.Tensor:
        """A @ [h_inner; current halo rows] (the rows as sent: ``before_dropout`` is only for strategies that keep
        rows across epochs)."""
        return self.graph.aggregate(
            self.exchange.fetch_into(h_inner, layer, self.traffic, self.full_rows(layer, h_inner))
        )

    def full_rows(self, layer: int, h_inner: torch.Tensor) -> torch.Tensor:
        """The reused [inner; halo] buffer of ``layer`` (its contents: the last message's)."""
        return self.buffers.get(layer, h_inner.shape[0] + self.exchange.num_halo, h_inner)
