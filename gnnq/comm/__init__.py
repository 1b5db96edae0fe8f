"""The one place messages cross ranks. Everything sent is timed and its bytes counted."""

from gnnq.comm.accounting import CommStats
from gnnq.comm.communicator import Communicator
from gnnq.comm.direction import Direction
from gnnq.comm.halo import HaloExchange, Traffic

__all__ = ["CommStats", "Communicator", "Direction", "HaloExchange", "Traffic"]
