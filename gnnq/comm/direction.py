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
        """The direction bytes are counted under: "bwd" for gradients, "fwd" for rows (inputs included)."""
        return "bwd" if self is Direction.BACKWARD else "fwd"

    @property
    def label(self) -> str:
        """How an error message names the message's way."""
        return "backward" if self is Direction.BACKWARD else "forward"
