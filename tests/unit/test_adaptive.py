"""Adaptive bit-widths on real gloo groups: layouts agree across ranks, bytes match widths, λ extremes, caching.

Here: the in-process cases (no process started); the others are in `tests/integration/test_adaptive.py`.
"""

from __future__ import annotations

import pytest
import torch

from gnnq.adaptive.influence import cache_path, cached_local_sums
from gnnq.comm.codec import NoiseKey, NonFiniteMessageError, UniformCodec
from gnnq.comm.encoder import MixedWidthEncoder
from gnnq.comm.kernels.backends import kernels_for
from gnnq.comm.kernels.torch_codec import row_bytes
from gnnq.comm.wire_layout import WireLayout
from gnnq.data.part import build_parts
from gnnq.data.partition import partition_nodes
from gnnq.models import local_graph_for
from tests.helpers import random_graph

HIDDEN, LAYERS, WIDTHS = 16, 3, (2, 4, 8)


def test_wire_layout_round_trip_and_sizes():
    """Mixed widths in one message: each row decodes within its own step, bytes are the sum of its rows."""
    gen = torch.Generator().manual_seed(0)
    counts = [5, 0, 9]
    rows = sum(counts)
    bits = torch.tensor(WIDTHS)[torch.randint(0, 3, (rows,), generator=gen)]
    layout = WireLayout(bits, counts, bits, counts)
    encoder = MixedWidthEncoder(UniformCodec(8, torch.float16), kernels_for("cpu"), layout)
    src = torch.randn(rows, 33, generator=gen)

    def encode(enc):
        return enc.encode(src, torch.arange(rows), counts, NoiseKey(0, 0, 1, "fwd", 0), "test")

    message = encode(encoder)
    flat, per_peer = message.wire, message.send_bytes
    assert message.nonfinite_zeroed == 0 and flat.numel() == sum(per_peer) == sum(
        row_bytes(33, int(b), torch.float16) for b in bits
    )
    assert per_peer[1] == 0 and encoder.recv_bytes(counts, 33) == per_peer
    out = encoder.decode(flat, 33)
    spread = (src.amax(1) - src.amin(1)) / (2.0 ** bits.double() - 1)
    assert ((out - src).abs().amax(1) <= spread.float() * 1.01 + 1e-3).all()
    assert layout.histogram() == {b: int((bits == b).sum()) for b in WIDTHS}
    # Non-finite values are handled once per message, whatever the number of widths in it.
    src[0, 0], src[3, 1] = float("nan"), float("inf")
    with pytest.raises(NonFiniteMessageError):
        encode(encoder)
    zeroing = MixedWidthEncoder(UniformCodec(8, torch.float16, nonfinite="zero"), kernels_for("cpu"), layout)
    message = encode(zeroing)
    assert message.nonfinite_zeroed == 2 and torch.isfinite(zeroing.decode(message.wire, 33)).all()


def test_influence_cache_is_keyed_by_model(tmp_path):
    graph = random_graph()
    part = build_parts(graph, partition_nodes(graph.edge_index, graph.num_nodes, 2, "metis", 1), 2)[0]
    gcn = cached_local_sums(local_graph_for("gcn", part), "gcn", 0, tmp_path)
    sage = cached_local_sums(local_graph_for("sage", part), "sage", 0, tmp_path)
    assert cache_path(tmp_path, "gcn", 0).is_file() and cache_path(tmp_path, "sage", 0).is_file()
    assert not torch.allclose(gcn["halo_col_sums"], sage["halo_col_sums"]), "SAGE must not reuse GCN's influence"
    again = cached_local_sums(local_graph_for("sage", part), "sage", 0, tmp_path)
    assert torch.equal(again["halo_col_sums"], sage["halo_col_sums"])
