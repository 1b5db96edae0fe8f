"""Row influence α: gnnq's backward weight is exact for its returned gradients (checked against the
whole graph's operator), and AdaQP's published SAGE weight (quantizer.backward_influence=adaqp) differs.

Here: the cases with real processes (gloo ranks, torchrun or gnnq); the others are in `tests/unit/test_influence.py`.
"""

from __future__ import annotations

import torch
from omegaconf import OmegaConf

from gnnq.adaptive.assigner import AdaptiveAssigner
from gnnq.adaptive.influence import adaqp_backward_sums
from gnnq.comm import Communicator, HaloExchange
from gnnq.comm.codec import message_quantization
from gnnq.config.schema import AdaptiveQuantizerConfig
from gnnq.data.part import build_parts
from gnnq.data.partition import partition_nodes
from gnnq.models import local_graph_for
from tests.helpers import random_graph, run_distributed


def _parts(nparts: int):
    graph = random_graph(num_nodes=150, num_edges=1200, seed=5)
    return graph, build_parts(graph, partition_nodes(graph.edge_index, graph.num_nodes, nparts, "metis", 1), nparts)


def _bwd_influence(backward_influence: str):
    comm = Communicator()
    graph, parts = _parts(2)
    part = parts[comm.rank]
    qcfg = OmegaConf.merge(OmegaConf.structured(AdaptiveQuantizerConfig),
                           {"backward_influence": backward_influence, "time_model": "fixed", "assign_cycle": 1})  # fmt: skip
    exchange = HaloExchange(comm, part.send_idx, part.send_counts, part.halo_counts, message_quantization(qcfg, 0, comm.rank))
    assigner = AdaptiveAssigner(qcfg, comm, exchange, local_graph_for("sage", part), "sage", 8, 2, part=part)
    return assigner.influence, part.halo_ids, adaqp_backward_sums("sage", part), part.inner_ids


def test_backward_influence_option_reaches_the_assigner():
    returned = run_distributed(2, _bwd_influence, "returned")
    adaqp = run_distributed(2, _bwd_influence, "adaqp")
    published = {}
    for _, _, sums, inner in adaqp:
        published.update(zip(inner.tolist(), sums.tolist()))
    for (r_alpha, halo, _, _), (a_alpha, _, _, _) in zip(returned, adaqp):
        torch.testing.assert_close(r_alpha["fwd"], a_alpha["fwd"])  # forward weights do not depend on the option
        # Backward rows go in halo order to the owner; each carries its owner's published weight.
        torch.testing.assert_close(a_alpha["bwd"], torch.tensor([published[int(u)] for u in halo]))
        assert not torch.allclose(r_alpha["bwd"], a_alpha["bwd"])
