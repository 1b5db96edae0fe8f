"""The encode/send seam: an encoder alone gives the wire bytes the exchange sends, and the channel profile's bytes go
through the Communicator.

Here: the cases with real processes (gloo ranks, torchrun or gnnq); the others are in `tests/unit/test_encoder.py`.
"""

from __future__ import annotations

import torch

from gnnq.comm import Communicator
from gnnq.comm.accounting import HALO_SETUP, HALO_TRAIN, OVERHEAD
from gnnq.comm.channel_profile import PROFILE_DIRECTION, profile_channels
from gnnq.comm.codec import MessageQuantization, UniformCodec, stream_seed
from gnnq.comm.direction import Direction
from gnnq.comm.halo import EVALUATION, HaloExchange, Traffic
from gnnq.comm.kernels import philox, torch_codec
from gnnq.comm.kernels.philox import RowStreams
from gnnq.data.part import build_parts
from gnnq.data.partition import partition_nodes
from tests.helpers import random_graph, run_distributed

DIM, SEED, EPOCH, LAYER = 11, 7, 3, 1


def _reference_draws(sender: int, counts: list[int], direction: str, dim: int = DIM) -> torch.Tensor:
    """One Philox stream per receiver, keyed by the message's key; rows indexed from 0 in each receiver's block."""
    keys = [stream_seed(SEED, EPOCH, LAYER, direction, sender, peer) for peer in range(len(counts))]
    return philox.uniforms(RowStreams.of_blocks(keys, counts, "cpu"), dim)


def _exchange_once(world_size: int):
    """Every rank sends its rows (a function of their global ids) through a 4-bit exchange."""
    comm = Communicator()
    graph = random_graph(num_nodes=120, num_edges=700, seed=6)
    parts = build_parts(graph, partition_nodes(graph.edge_index, graph.num_nodes, world_size, "metis", 1), world_size)
    part = parts[comm.rank]
    codec = UniformCodec(4, torch.float16)
    exchange = HaloExchange(
        comm, part.send_idx, part.send_counts, part.halo_counts, MessageQuantization(codec, None, None, SEED, comm.rank)
    )

    def rows_of(ids: torch.Tensor) -> torch.Tensor:
        return torch.sin(ids.double()[:, None] * torch.arange(1, DIM + 1, dtype=torch.float64)).float() * ids[:, None]

    comm.stats.reset()
    got = exchange.start(rows_of(part.inner_ids), LAYER, Direction.FORWARD, Traffic.training(EPOCH)).wait()
    # What each peer's encoder alone makes of its rows to this rank, decoded here.
    want = []
    for peer, p in enumerate(parts):
        counts = [int(c) for c in p.send_counts]
        start = sum(counts[: comm.rank])
        mine = p.send_idx[start : start + counts[comm.rank]]
        draws = _reference_draws(peer, counts, "fwd")[start : start + counts[comm.rank]]
        wire = torch_codec.quantize_pack(rows_of(p.inner_ids)[mine], draws, 4, torch.float16)
        want.append(torch_codec.unpack_dequantize(wire, DIM, 4, torch.float16))
    sent = sum(int(c) for q, c in enumerate(part.send_counts) if q != comm.rank) * codec.row_bytes(DIM)
    exchange.fetch_static(rows_of(part.inner_ids))  # layer-0 inputs: exact fp32 rows (no input codec here)
    inputs = sum(int(c) for q, c in enumerate(part.send_counts) if q != comm.rank) * DIM * 4
    counted = comm.stats.bytes[(HALO_TRAIN, LAYER, "fwd")]
    # Into place: [inner; halo] in one reused buffer, the halo rows decoded (training) or received (evaluation, fp32)
    # there.
    inner, full = rows_of(part.inner_ids), torch.full((part.num_inner + part.num_halo, DIM), 7.0)
    into = {
        name: exchange.fetch_into(inner, LAYER, traffic, full).clone()
        for name, traffic in (("train", Traffic.training(EPOCH)), ("eval", EVALUATION))
    }
    exact = exchange.start(inner, LAYER, Direction.FORWARD, EVALUATION).wait()
    return {
        "got": got,
        "want": torch.cat(want),
        "counted": counted,
        "sent": sent,
        "into": into,
        "exact": exact,
        "inner": inner,
        "full_ptr": full.data_ptr(),
        "into_ptr": exchange.fetch_into(inner, 2, EVALUATION, full).data_ptr(),
        "backend": exchange.codec_backend,
        "input_bytes": inputs,
        "by_direction": {k: v for k, v in comm.stats.bytes.items() if k[0] == HALO_SETUP},
    }


def test_exchange_sends_what_the_encoder_alone_makes():
    for res in run_distributed(3, _exchange_once, 3):
        assert res["got"].numel() > 0 and torch.equal(res["got"], res["want"])
        n = res["inner"].shape[0]
        assert torch.equal(res["into"]["train"], torch.cat([res["inner"], res["want"]])), "decoded into the halo rows"
        assert torch.equal(res["into"]["eval"], torch.cat([res["inner"], res["exact"]])), "fp32 rows received there"
        assert not torch.equal(res["into"]["train"][n:], res["into"]["eval"][n:]) and res["into_ptr"] == res["full_ptr"]
        assert res["counted"] == res["sent"] > 0
        assert res["backend"] in ("c", "torch")
        assert res["by_direction"] == {(HALO_SETUP, 0, "input"): res["input_bytes"]}, (
            "inputs are counted as inputs, not fwd"
        )


class _SendLog(Communicator):
    """A real Communicator that also notes each point-to-point send it posts."""

    def __init__(self):
        super().__init__()
        self.sent: list[int] = []

    def send_start(self, tensor, dst, **kw):
        self.sent.append(tensor.numel() * tensor.element_size())
        return super().send_start(tensor, dst, **kw)


def _profile(world_size: int, repeats: int):
    comm = _SendLog()
    rounds = [[0 if q == comm.rank else n for q in range(world_size)] for n in (1000, 5000)]
    samples = profile_channels(comm, rounds, repeats=repeats)
    return comm.sent, comm.stats.bytes[(OVERHEAD, -1, PROFILE_DIRECTION)], samples


def test_channel_profile_bytes_are_counted_by_the_communicator():
    repeats = 2
    for sent, counted, samples in run_distributed(2, _profile, 2, repeats):
        assert sorted(sent) == sorted([1000, 5000] * (repeats + 1)), "every profile message is a Communicator send"
        assert counted == sum(sent) == (repeats + 1) * 6000
        assert len(next(iter(samples.values()))) == 2 * repeats
