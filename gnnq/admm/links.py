"""pdADMM-G's messages between neighbouring blocks, all through the ``Communicator``.

Per iteration a rank sends p of its first layer to the rank below and q of its last layer to
the rank above (fp32, or grid codes under pdADMM-G-Q: the receiver decodes the very tensor
the sender holds). The dual u of a boundary is never sent: both ends start it at 0 and update
it with the same p and q by the same fp32 operations, so each recomputes it exactly; sending
it would double the forward bytes for nothing.

The training messages (p, q) may go on a process group of their own (``train_comm``), so that a q
left in flight into the next iteration (``parallel.overlap_q``) never queues behind, or is matched
with, the evaluation pipeline's messages and the collectives on the main group.
"""

from __future__ import annotations

import torch

from gnnq.comm import Communicator
from gnnq.comm.accounting import ADMM_EVAL, ADMM_TRAIN
from gnnq.comm.grid_codec import Grid


class NeighbourLinks:
    def __init__(
        self,
        comm: Communicator,
        first: int,
        last: int,
        num_layers: int,
        rows: int,
        below_width: int,
        above_width: int,
        p_grid: Grid | None,
        q_grid: Grid | None,
        train_comm: Communicator | None = None,
    ):
        self.comm, self.first, self.last = comm, first, last
        self.train_comm = comm if train_comm is None else train_comm
        self.below = comm.rank - 1 if first > 1 else None
        self.above = comm.rank + 1 if last < num_layers else None
        self.below_shape, self.above_shape = (rows, below_width), (rows, above_width)
        self.p_grid, self.q_grid = p_grid, q_grid

    @staticmethod
    def _wire(t: torch.Tensor, grid: Grid | None) -> torch.Tensor:
        return t.contiguous() if grid is None else grid.encode(t)

    @staticmethod
    def _empty_wire(shape: tuple[int, int], grid: Grid | None, device) -> torch.Tensor:
        if grid is None:
            return torch.empty(shape, device=device)
        return torch.empty(grid.wire_bytes(shape[0] * shape[1]), dtype=torch.uint8, device=device)

    def exchange_p_start(self, p_first: torch.Tensor | None, device):
        """Send p_first down, start receiving p_{last+1} from above; returns a handle for ``finish``."""
        sent = None
        if self.below is not None:
            sent = self.train_comm.send_start(
                self._wire(p_first, self.p_grid), self.below, category=ADMM_TRAIN, layer=self.first, direction="bwd"
            )
        recv = None
        if self.above is not None:
            out = self._empty_wire(self.above_shape, self.p_grid, device)
            recv = self.train_comm.recv_start(
                out, self.above, category=ADMM_TRAIN, layer=self.last + 1, direction="bwd"
            )
        return sent, recv, self.p_grid, self.above_shape

    def exchange_q_start(self, q_last: torch.Tensor | None, device):
        """Send q_last up, start receiving q_{first-1} from below."""
        sent = None
        if self.above is not None:
            sent = self.train_comm.send_start(
                self._wire(q_last, self.q_grid), self.above, category=ADMM_TRAIN, layer=self.last, direction="fwd"
            )
        recv = None
        if self.below is not None:
            out = self._empty_wire(self.below_shape, self.q_grid, device)
            recv = self.train_comm.recv_start(
                out, self.below, category=ADMM_TRAIN, layer=self.first - 1, direction="fwd"
            )
        return sent, recv, self.q_grid, self.below_shape

    def finish(self, handle) -> torch.Tensor | None:
        """Wait for both ends of an exchange; the received tensor (None at the network's edge)."""
        sent, recv, grid, shape = handle
        if sent is not None:
            sent.wait()
        if recv is None:
            return None
        wire = recv.wait()
        return wire if grid is None else grid.decode(wire, shape)

    def forward_eval(self, h: torch.Tensor, compute) -> torch.Tensor | None:
        """Evaluation pipeline: ``h`` is the data (first block) or a buffer that receives the
        activations from below; apply ``compute`` and pass the result up. Returns the top
        block's output, None elsewhere."""
        if self.below is not None:
            self.comm.recv_start(h, self.below, category=ADMM_EVAL, layer=self.first - 1, direction="fwd").wait()
        h = compute(h)
        if self.above is not None:
            self.comm.send_start(h, self.above, category=ADMM_EVAL, layer=self.last, direction="fwd").wait()
            return None
        return h


def fp32_baselines(dims: list[int], blocks: list[range], rows: int) -> dict[str, int]:
    """Bytes per iteration of the fp32 ways of crossing the same block boundaries: gnnq's pdADMM-G
    (2 messages per boundary: p down, q up; u recomputed at both ends) and the public code's
    (3 messages: q and u up, p down), each an fp32 (rows x width) tensor, width = dims[last layer
    of the lower block]."""
    per_message = sum(rows * dims[block.stop - 1] * 4 for block in blocks[:-1])
    return {"gnnq_fp32": 2 * per_message, "public_code_fp32": 3 * per_message}
