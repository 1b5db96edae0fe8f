"""Adaptive message quantization (AdaQP): bit-width assignment per row group and channel."""

from gnnq.adaptive.solver import (
    SOLVERS,
    BitProblem,
    Channel,
    Solution,
    brute_force,
    objective,
    solve_greedy,
    solve_milp,
)

__all__ = ["SOLVERS", "BitProblem", "Channel", "Solution", "brute_force", "objective", "solve_greedy", "solve_milp"]
