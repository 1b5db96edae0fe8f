"""Row influence α with real gloo ranks: the backward_influence option reaches the assigner, and every backward row
carries the weight its owner computed for its holder (AdaQP's per-holder rule).

Here: the cases with real processes; the others are in `tests/unit/test_influence.py`.
"""

from __future__ import annotations

import torch
from omegaconf import OmegaConf

from gnnq.adaptive.assigner import AdaptiveAssigner
from gnnq.adaptive.influence import adaqp_backward_sums
from gnnq.comm import Communicator, HaloExchange
from gnnq.comm.codec import message_quantization
from gnnq.config.schema import AdaptiveQuantizerConfig
from gnnq.models import local_graph_for
from tests.helpers import run_distributed
from tests.unit.test_influence import _parts, _sent_rows


def _bwd_influence(backward_influence: str):
    comm = Communicator()
    graph, parts = _parts(2)
    part = parts[comm.rank]
    qcfg = OmegaConf.merge(
        OmegaConf.structured(AdaptiveQuantizerConfig),
        {"backward_influence": backward_influence, "time_model": "fixed", "assign_cycle": 1},
    )
    quant = message_quantization(qcfg, 0, comm.rank)
    exchange = HaloExchange(comm, part.send_idx, part.send_counts, part.halo_counts, quant)
    assigner = AdaptiveAssigner(qcfg, comm, exchange, local_graph_for("sage", part), "sage", 8, 2, part=part)
    published = dict(zip(_sent_rows(part), adaqp_backward_sums("sage", part).tolist()))
    return assigner.influence, part.halo_ids, published, comm.rank


def test_backward_influence_option_reaches_the_assigner():
    returned = run_distributed(2, _bwd_influence, "returned")
    adaqp = run_distributed(2, _bwd_influence, "adaqp")
    published = {}  # (node, holder) -> the weight the node's owner computed for that holder
    for _, _, sums, _ in adaqp:
        published.update(sums)
    for (r_alpha, _, _, _), (a_alpha, halo, _, rank) in zip(returned, adaqp):
        torch.testing.assert_close(r_alpha["fwd"], a_alpha["fwd"])  # forward weights do not depend on the option
        # Backward rows go in halo order to the owner; each carries the weight its owner computed for this holder.
        torch.testing.assert_close(a_alpha["bwd"], torch.tensor([published[(int(u), rank)] for u in halo]))
        assert not torch.allclose(r_alpha["bwd"], a_alpha["bwd"])
