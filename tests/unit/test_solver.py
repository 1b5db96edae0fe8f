"""AdaQP bit-width solvers: the MILP is exact, the greedy heuristic is close, extremes, shapes and validation."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

from benchmarks.solver_gap import gap_percent, realistic_problem, row_bytes
from gnnq.adaptive.solver import (
    BRUTE_FORCE_LIMIT,
    EPS,
    SOLVERS,
    BitProblem,
    Channel,
    brute_force,
    objective,
    solve_greedy,
    solve_milp,
)

BIT_SETS = ((2, 4, 8), (1, 2, 4, 8))
MILP_LIMIT_S = 5.0


def _small_problem(rng: np.random.Generator, bits: tuple[int, ...]) -> BitProblem:
    """2-3 channels with 1-3 groups each; fixed costs comparable to the byte costs."""
    channels = []
    for i in range(int(rng.integers(2, 4))):
        count = int(rng.integers(1, 4))
        rows = rng.integers(1, 50, count)
        channels.append(
            Channel(
                i, i + 1, rows * rng.lognormal(0, 2, count), rows, a=rng.uniform(0.5, 3) * 1e-9, c=rng.uniform(0, 5e-6)
            )
        )
    return BitProblem(tuple(channels), bits, row_bytes(), float(rng.uniform()))


def _by_definition(problem: BitProblem, bits: list[np.ndarray]) -> float:
    """J written out channel by channel, independently of the solver module's vectorized form."""
    used = [(ch, b) for ch, b in zip(problem.channels, bits) if len(ch.group_rows)]

    def variance_and_times(widths_of) -> tuple[float, list[float]]:
        v = sum(float(w) / (2 ** int(x) - 1) ** 2 for ch, b in used for w, x in zip(ch.group_weights, widths_of(b)))
        t = [
            ch.a * sum(int(r) * problem.row_bytes[int(x)] for r, x in zip(ch.group_rows, widths_of(b))) + ch.c
            for ch, b in used
        ]
        return v, t

    def spread(times: list[float]) -> float:
        return max(times) + EPS * sum(times) / len(times)

    lam, lo, hi = problem.variance_weight, problem.bit_choices[0], problem.bit_choices[-1]
    v, t = variance_and_times(lambda b: b)
    v_lo, t_lo = variance_and_times(lambda b: [lo] * len(b))
    v_hi, t_hi = variance_and_times(lambda b: [hi] * len(b))
    vn = (v_lo - v_hi) or 1.0
    tn = (max(t_hi) - max(t_lo)) or 1.0
    return lam * (v - v_hi) / vn + (1 - lam) * (spread(t) - spread(t_lo)) / tn


@pytest.mark.parametrize("bits", BIT_SETS)
def test_milp_equals_brute_force_and_greedy_never_beats_it(bits):
    for seed in range(60):
        problem = _small_problem(np.random.default_rng(seed), bits)
        best = brute_force(problem)
        exact = solve_milp(problem)
        greedy = solve_greedy(problem)
        assert exact.objective == pytest.approx(best.objective, rel=1e-9, abs=0), seed
        assert exact.bound <= best.objective * (1 + 1e-9), seed
        assert greedy.objective >= best.objective * (1 - 1e-12), seed
        assert objective(problem, best.bits) == pytest.approx(_by_definition(problem, best.bits), rel=1e-12)


def test_objective_matches_its_definition_with_an_empty_channel():
    rng = np.random.default_rng(3)
    problem = _small_problem(rng, (1, 2, 4, 8))
    problem = BitProblem(
        (*problem.channels, Channel(7, 8, [], [], a=1.0, c=5.0)), problem.bit_choices, problem.row_bytes, 0.4
    )
    for _ in range(5):
        bits = [rng.choice(problem.bit_choices, len(ch.group_rows)) for ch in problem.channels]
        assert objective(problem, bits) == pytest.approx(_by_definition(problem, bits), rel=1e-12)


@pytest.mark.parametrize(("ranks", "groups"), [(4, (20, 300)), (8, (20, 300))])
def test_greedy_within_two_percent_of_milp(ranks, groups):
    for lam in (0.3, 0.7):
        problem = realistic_problem(np.random.default_rng(ranks), ranks, groups, lam)
        exact = solve_milp(problem, time_limit_s=MILP_LIMIT_S)
        greedy = solve_greedy(problem)
        gap, gap_to_bound = gap_percent(greedy.objective, exact.objective), gap_percent(greedy.objective, exact.bound)
        print(
            f"{ranks} ranks, lam {lam}: greedy {gap:+.4f}% vs MILP ({exact.status}), {gap_to_bound:.4f}% vs its bound; "
            f"MILP {exact.solve_time_s:.2f} s, greedy {greedy.solve_time_s * 1e3:.2f} ms"
        )
        assert gap <= 2.0
        assert gap_to_bound <= 2.0  # the bound is below the optimum, so this holds against the optimum


def test_greedy_is_fast_on_ten_thousand_groups():
    problem = realistic_problem(np.random.default_rng(0), 8, (150, 210), 0.5)
    solve_greedy(problem)
    started = time.perf_counter()
    solution = solve_greedy(problem)
    assert time.perf_counter() - started < 0.5
    assert sum(len(b) for b in solution.bits) > 9000


@pytest.mark.parametrize("bits", BIT_SETS)
@pytest.mark.parametrize("solver", sorted(SOLVERS))
def test_extreme_lambdas_pick_extreme_widths(solver, bits):
    for lam, expected in ((1.0, bits[-1]), (0.0, bits[0])):
        problem = realistic_problem(np.random.default_rng(1), 4, (20, 60), lam, bits)
        solution = SOLVERS[solver](problem)
        assert all((b == expected).all() for b in solution.bits), (lam, [np.unique(b) for b in solution.bits])


@pytest.mark.parametrize("lam", [1.0, 0.5, 0.0])
@pytest.mark.parametrize("solver", [*sorted(SOLVERS), "brute_force"])
def test_zero_weight_groups_get_the_fewest_bytes(solver, lam):
    """A group whose rows are constant (or reach no output) costs no variance at any width; at lam = 1 that is a tie."""
    channels = (
        Channel(0, 1, [3.0, 0.0, 1.0, 0.0], [7, 7, 7, 2], a=1e-9, c=1e-4),
        Channel(1, 0, [0.0, 2.0], [7, 7], a=2e-9, c=0.0),
    )
    problem = BitProblem(channels, (2, 4, 8), row_bytes(), lam)
    solution = {"brute_force": brute_force, **SOLVERS}[solver](problem)
    for ch, b in zip(channels, solution.bits):
        assert (b[ch.group_weights == 0] == 2).all(), (lam, solution.bits)
        if lam == 1.0:
            assert (b[ch.group_weights > 0] == 8).all(), solution.bits
    assert solution.objective == pytest.approx(brute_force(problem).objective, abs=1e-9)


@pytest.mark.parametrize("solver", [*sorted(SOLVERS), "brute_force"])
def test_assignments_have_the_problem_shape_and_allowed_widths(solver):
    rng = np.random.default_rng(5)
    problem = _small_problem(rng, (2, 4, 8))
    problem = BitProblem((Channel(0, 1, [], [], a=1e-9, c=0.0), *problem.channels), (2, 4, 8), row_bytes(), 0.5)
    solution = {"brute_force": brute_force, **SOLVERS}[solver](problem)
    assert len(solution.bits) == len(problem.channels)
    for ch, b in zip(problem.channels, solution.bits):
        assert b.shape == ch.group_rows.shape and b.dtype == np.int64 and np.isin(b, (2, 4, 8)).all()
    assert solution.objective == pytest.approx(objective(problem, solution.bits), rel=1e-12)


@pytest.mark.parametrize("solver", [*sorted(SOLVERS), "brute_force"])
def test_problem_without_groups(solver):
    problem = BitProblem(
        (Channel(0, 1, [], [], a=1.0, c=1.0), Channel(1, 0, [], [], a=1.0, c=1.0)), (2, 8), row_bytes(), 0.5
    )
    solution = {"brute_force": brute_force, **SOLVERS}[solver](problem)
    assert solution.objective == 0.0 and [len(b) for b in solution.bits] == [0, 0]
    assert objective(BitProblem((), (2, 8), row_bytes(), 0.5), []) == 0.0


def _problem(**changes) -> BitProblem:
    fields = {
        "channels": (Channel(0, 1, [1.0, 2.0], [3, 4], a=1e-9, c=0.0),),
        "bit_choices": (2, 4, 8),
        "row_bytes": row_bytes(),
        "variance_weight": 0.5,
        **changes,
    }
    return BitProblem(**fields)


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: _problem(variance_weight=1.5), "variance_weight"),
        (lambda: _problem(variance_weight=-0.1), "variance_weight"),
        (lambda: _problem(bit_choices=()), "bit_choices"),
        (lambda: _problem(bit_choices=(4, 2)), "bit_choices"),
        (lambda: _problem(bit_choices=(2, 3)), "bit_choices"),
        (lambda: _problem(row_bytes={2: 68, 4: 132}), "row_bytes"),
        (lambda: Channel(0, 1, [-1.0], [3], a=1e-9, c=0.0), "group_weights"),
        (lambda: Channel(0, 1, [1.0], [0], a=1e-9, c=0.0), "group_rows"),
        (lambda: Channel(0, 1, [1.0, 2.0], [3], a=1e-9, c=0.0), "group_weights/group_rows"),
        (lambda: Channel(0, 1, [1.0], [3], a=-1e-9, c=0.0), "a"),
        (lambda: Channel(0, 1, [1.0], [3], a=1e-9, c=-1.0), "c"),
        (lambda: objective(_problem(), [np.array([2, 3])]), "bits[0]"),
        (lambda: objective(_problem(), [np.array([2])]), "bits[0]"),
        (lambda: objective(_problem(), []), "bits"),
    ],
)
def test_validation_names_the_field(build, field):
    with pytest.raises(ValueError, match=rf"(^|[\s.]){re.escape(field)} "):
        build()


def test_brute_force_refuses_large_problems():
    rows = np.full(12, 10)
    problem = _problem(channels=(Channel(0, 1, np.ones(12), rows, a=1e-9, c=0.0),), bit_choices=(1, 2, 4, 8))
    assert 4**12 > BRUTE_FORCE_LIMIT
    with pytest.raises(ValueError, match="brute_force"):
        brute_force(problem)


def _ring_problem(rng: np.random.Generator, bits: tuple[int, ...], objective_name: str, ranks: int = 3) -> BitProblem:
    """Channels between ``ranks`` ranks (some pairs absent), 1-2 groups each, at most 7 groups in all."""
    pairs = [(s, d) for s in range(ranks) for d in range(ranks) if s != d]
    chosen = rng.permutation(len(pairs))[: int(rng.integers(2, min(len(pairs), 5) + 1))]
    channels, left = [], 7
    for k in sorted(chosen):
        count = int(min(rng.integers(1, 3), left))
        left -= count
        rows = rng.integers(1, 50, count)
        weights = rows * rng.lognormal(0, 2, count)
        channels.append(Channel(*pairs[k], weights, rows, a=rng.uniform(0.5, 3) * 1e-9, c=rng.uniform(0, 5e-6)))
    return BitProblem(tuple(channels), bits, row_bytes(), float(rng.uniform()), objective_name, world_size=ranks)


def _time_by_definition(problem: BitProblem, times: dict[tuple[int, int], float]) -> float:
    """T of channel times written out per objective (AdaQP's ring rounds: sum over rounds of the slowest channel)."""
    if problem.time_objective == "ring_rounds":
        rounds = [
            [t for (s, d), t in times.items() if (d - s) % problem.world_size == k]
            for k in range(1, problem.world_size)
        ]
        return sum(max(r) for r in rounds if r)
    if problem.time_objective == "sender_uplink":
        return max(sum(t for (s, _), t in times.items() if s == src) for src in {s for s, _ in times})
    return max(times.values())


def _objective_by_definition(problem: BitProblem, bits: list[np.ndarray]) -> float:
    used = [(ch, b) for ch, b in zip(problem.channels, bits) if len(ch.group_rows)]

    def parts(widths_of) -> tuple[float, float, float]:
        v = sum(float(w) / (2 ** int(x) - 1) ** 2 for ch, b in used for w, x in zip(ch.group_weights, widths_of(b)))
        t = {
            (ch.src, ch.dst): ch.a
            * sum(int(r) * problem.row_bytes[int(x)] for r, x in zip(ch.group_rows, widths_of(b)))
            + ch.c
            for ch, b in used
        }
        return v, _time_by_definition(problem, t), EPS * sum(t.values()) / len(t)

    lam, lo, hi = problem.variance_weight, problem.bit_choices[0], problem.bit_choices[-1]
    (v, t, e), (v_lo, t_lo, e_lo), (v_hi, t_hi, _) = (
        parts(lambda b: b),
        parts(lambda b: [lo] * len(b)),
        parts(lambda b: [hi] * len(b)),
    )
    return lam * (v - v_hi) / ((v_lo - v_hi) or 1.0) + (1 - lam) * (t + e - t_lo - e_lo) / ((t_hi - t_lo) or 1.0)


@pytest.mark.parametrize("time_objective", ["max_channel", "ring_rounds", "sender_uplink"])
def test_every_time_objective_milp_exact_greedy_close(time_objective):
    """Per objective: J as written out, the MILP equals brute force, the greedy never beats it and is near it."""
    for seed in range(30):
        problem = _ring_problem(np.random.default_rng(seed), (2, 4, 8), time_objective)
        best = brute_force(problem)
        exact = solve_milp(problem)
        greedy = solve_greedy(problem)
        assert objective(problem, best.bits) == pytest.approx(
            _objective_by_definition(problem, best.bits), rel=1e-9, abs=1e-12
        )
        assert exact.objective == pytest.approx(best.objective, rel=1e-9, abs=1e-12), seed
        assert exact.bound <= best.objective + 1e-9, seed
        assert best.objective - 1e-12 <= greedy.objective <= best.objective + 0.05, seed


def _three_rank_problem(time_objective: str) -> BitProblem:
    """3 ranks at lam = 0.5 where the three objectives choose three different assignments.

    Rank 0 sends to both peers (its uplink carries both channels); 0 -> 1 and 1 -> 2 share ring
    round 1, 0 -> 2 and 2 -> 0 round 2, so the slowest channel, the sum of the two rounds' slowest
    channels and the busiest sender each weigh the channels differently."""
    pairs, scales, a = ((0, 1), (0, 2), (1, 2), (2, 0)), (2.0, 1.0, 0.3, 0.25), (1.7e-9, 1.9e-9, 1.4e-9, 1.6e-9)
    rows, weights = np.array([200, 200]), np.array([40.0, 4.0])
    channels = tuple(Channel(s, d, weights * w, rows, a=x, c=2e-6) for (s, d), w, x in zip(pairs, scales, a))
    return BitProblem(channels, (2, 4, 8), row_bytes(), 0.5, time_objective, world_size=3)


def test_time_objectives_choose_differently_milp_and_greedy():
    chosen = {}
    for name in ("max_channel", "ring_rounds", "sender_uplink"):
        problem = _three_rank_problem(name)
        best = brute_force(problem)
        for solve in (solve_milp, solve_greedy):
            solution = solve(problem)
            assert solution.objective == pytest.approx(best.objective, rel=1e-9), (name, solve.__name__)
            chosen[(name, solve.__name__)] = tuple(int(b) for bits in solution.bits for b in bits)
    for solve in ("solve_milp", "solve_greedy"):
        picks = {name: chosen[(name, solve)] for name in ("max_channel", "ring_rounds", "sender_uplink")}
        assert len(set(picks.values())) == 3, (solve, picks)
    # The objective is no dead key: each objective's optimum is worse than its own under the others.
    for name in ("ring_rounds", "sender_uplink"):
        problem = _three_rank_problem(name)
        other = [np.array(chosen[("max_channel", "solve_milp")][i * 2 : i * 2 + 2]) for i in range(4)]
        assert objective(problem, other) > brute_force(problem).objective + 1e-6


def test_time_objective_is_validated():
    with pytest.raises(ValueError, match=r"BitProblem.time_objective must be one of"):
        BitProblem((), (2, 4, 8), row_bytes(), 0.5, "fastest")
    with pytest.raises(ValueError, match=r"BitProblem.world_size must exceed every rank \(2\)"):
        BitProblem(
            (Channel(0, 2, [1.0], [1], a=1e-9, c=0.0),), (2, 4, 8), row_bytes(), 0.5, "ring_rounds", world_size=2
        )
