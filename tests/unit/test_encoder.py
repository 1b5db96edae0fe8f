"""The encode/send seam: an encoder alone gives the wire bytes the exchange sends, and the channel profile's bytes go
through the Communicator.

Here: the in-process cases (no process started); the others are in `tests/integration/test_encoder.py`.
"""

from __future__ import annotations

import pytest
import torch

from gnnq.comm.codec import MessageQuantization, UniformCodec, stream_seed
from gnnq.comm.direction import Direction
from gnnq.comm.encoder import UniformEncoder
from gnnq.comm.kernels import philox, torch_codec
from gnnq.comm.kernels.backends import kernels_named
from gnnq.comm.kernels.philox import RowStreams

DIM, SEED, EPOCH, LAYER = 11, 7, 3, 1


def _reference_draws(sender: int, counts: list[int], direction: str, dim: int = DIM) -> torch.Tensor:
    """One Philox stream per receiver, keyed by the message's key; rows indexed from 0 in each receiver's block."""
    keys = [stream_seed(SEED, EPOCH, LAYER, direction, sender, peer) for peer in range(len(counts))]
    return philox.uniforms(RowStreams.of_blocks(keys, counts, "cpu"), dim)


def test_direction_names_and_accounting():
    assert [str(d) for d in Direction] == ["fwd", "bwd", "input"]
    assert [d.accounting for d in Direction] == ["fwd", "bwd", "input"]
    assert Direction("input") is Direction.INPUT and {(1, "bwd"): 0}[(1, Direction.BACKWARD)] == 0
    with pytest.raises(ValueError):
        Direction("backward")


@pytest.mark.parametrize("backend", ["torch", "c"])
@pytest.mark.parametrize("direction", list(Direction))
def test_encoder_alone_gives_the_kernels_bytes_on_the_keyed_draws(backend, direction):
    gen = torch.Generator().manual_seed(0)
    src = torch.randn(9, DIM, generator=gen) * 3
    rows, counts = torch.tensor([4, 0, 8, 8, 2, 5]), [2, 0, 4]
    codec = UniformCodec(4, torch.float16)
    quant = MessageQuantization(codec, codec, codec, SEED, rank=1)
    encoder = UniformEncoder(codec, kernels_named(backend))
    message = encoder.encode(src, rows, counts, quant.noise_key(EPOCH, LAYER, direction), "test")
    want = torch_codec.quantize_pack(src[rows], _reference_draws(1, counts, str(direction)), 4, torch.float16)
    assert torch.equal(message.wire, want.reshape(-1)), "the wire is the codec's rows, back to back"
    assert message.send_bytes == [c * codec.row_bytes(DIM) for c in counts] == encoder.recv_bytes(counts, DIM)
    assert torch.equal(encoder.decode(message.wire, DIM), torch_codec.unpack_dequantize(want, DIM, 4, torch.float16))
