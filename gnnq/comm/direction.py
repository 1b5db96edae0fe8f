"""Which way a halo message goes, and what that means for its rows and its byte account."""

from __future__ import annotations

from enum import StrEnum


class Direction(StrEnum):
    """``FORWARD``: inner rows to the peers that hold them as halo rows. ``BACKWARD``: the halo rows'
    gradients back to their owners. ``INPUT``: the layer-0 features, fetched once like a forward
    message but with a codec of their own (``quantizer.quantize_input``).

    Members are strings ("fwd", "bwd", "input"), so they key the same dicts as the plain strings
    that checkpoints and per-layer byte tables hold.
    """

    FORWARD = "fwd"
    BACKWARD = "bwd"
    INPUT = "input"

    @property
    def returns_gradients(self) -> bool:
        return self is Direction.BACKWARD

    @property
    def accounting(self) -> str:
        """The direction bytes are counted under: the member's own string ("fwd", "bwd", "input"),
        so per-direction byte tables add up to what was sent, layer-0 inputs apart from embeddings."""
        return self.value

    @property
    def label(self) -> str:
        """How an error message names the message's way."""
        return "backward" if self is Direction.BACKWARD else "forward"
