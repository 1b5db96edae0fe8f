"""AdaQP bit-width assignment: one width per row group of every channel of an exchange round.

A channel is one directed rank pair (sender -> receiver). Its rows are grouped, and each group g
gets one width b_g from ``bit_choices``. With lam = ``variance_weight``, every solver minimizes

    V   = sum over channels and groups of w_g / (2^b_g - 1)^2
    t_c = a_c * sum_g rows_g * row_bytes[b_g] + c_c        (channels with at least one group)
    T   = the exchange time, by ``time_objective`` (see TIME_OBJECTIVES):
          max_channel    max_c t_c                          (gnnq's default)
          ring_rounds    sum over rounds k = 1..P-1 of max over the channels s -> (s + k) mod P of t_c
                         (AdaQP's published objective: P - 1 ring rounds, each as slow as its slowest channel)
          sender_uplink  max over senders s of sum over s's channels of t_c (a sender's channels share its uplink)
    S   = T + EPS * mean_c(t_c),   EPS = 1e-4
    J   = lam * (V - V_hi) / (V_lo - V_hi) + (1 - lam) * (S - S_lo) / (T_hi - T_lo)

where _hi means every group at the highest width and _lo every group at the lowest (a zero
denominator is replaced by 1). T_lo is T at every group's lowest width, the least T can be; AdaQP's
code takes, for ring_rounds, the per-round *minimum* channel at the lowest width instead (a point no
assignment reaches, so its time term never reaches 0 and weighs less than lam says); gnnq uses the
reachable minimum for all three objectives. Both terms are normalized to the range the widths can move them
over, so a fixed per-message latency c does not dilute the time term and lam keeps its meaning
on fast and slow links alike; each term runs from 0 (its best) to about 1 (its worst). The EPS
term is a tie-break: channels that are not the slowest still prefer fewer bytes; it vanishes at
lam = 1. Every solver sends a group of zero weight (its rows are constant or reach no output) at
the width of fewest bytes: that never raises J, and at lam = 1, where J does not see bytes, it
settles what would otherwise be a tie. Channels without groups are ignored, and a problem
without groups has J = 0 and empty assignments.

``solve_milp`` is exact up to a relative gap of MIP_REL_GAP (HiGHS through scipy.optimize.milp);
with a time limit it returns the incumbent and HiGHS's lower bound (``Solution.bound``).
``solve_greedy`` is a fast heuristic: a sweep over a common per-channel time cap along each
group's convex downgrade path, then a local fill. ``brute_force`` is an exhaustive reference for
problems of at most BRUTE_FORCE_LIMIT combinations.

Every objective is a sum over stages (ring rounds; one stage otherwise) of the slowest term of the
stage (a term: one channel, or a sender's channels), and every group's bytes count in one term, so
J is a sum of independent per-stage parts: the greedy solves each stage on its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

EPS = 1e-4
ALLOWED_BITS = (1, 2, 4, 8)
TIME_OBJECTIVES = ("max_channel", "ring_rounds", "sender_uplink")
BRUTE_FORCE_LIMIT = 2**18  # 262,144: nine groups at four widths
MIP_REL_GAP = 1e-6
# HiGHS also stops at an absolute gap of 1e-6; J is O(1), so the costs are scaled up until only MIP_REL_GAP binds.
_COST_SCALE = 1e4
_FILL_ROUNDS = 16
_DESCENT_ROUNDS = 256


@dataclass(frozen=True, eq=False)
class Channel:
    """One directed rank pair (sender src -> receiver dst) of one exchange round."""

    src: int
    dst: int
    group_weights: np.ndarray  # (G,) >= 0; variance of group g at b bits = group_weights[g] / (2**b - 1)**2
    group_rows: np.ndarray  # (G,) int64 > 0: rows in the group
    a: float  # seconds per byte (time model t = a * bytes + c)
    c: float  # seconds, fixed cost of a non-empty channel

    def __post_init__(self) -> None:
        name = f"Channel {self.src}->{self.dst}:"
        weights = _vector(self.group_weights, f"{name} group_weights")
        rows = _vector(self.group_rows, f"{name} group_rows")
        _require(
            bool(np.isfinite(weights).all() and (weights >= 0).all()),
            f"{name} group_weights",
            "must be finite and >= 0",
        )
        _require(
            bool((rows > 0).all() and (rows == np.round(rows)).all()), f"{name} group_rows", "must be integers > 0"
        )
        _require(
            len(weights) == len(rows),
            f"{name} group_weights/group_rows",
            f"lengths differ ({len(weights)} vs {len(rows)})",
        )
        for field in ("a", "c"):
            value = float(getattr(self, field))
            _require(
                bool(np.isfinite(value) and value >= 0), f"{name} {field}", f"must be finite and >= 0, got {value}"
            )
            object.__setattr__(self, field, value)
        object.__setattr__(self, "group_weights", _readonly(weights))
        object.__setattr__(self, "group_rows", _readonly(rows.astype(np.int64)))


@dataclass(frozen=True, eq=False)
class BitProblem:
    """One exchange round: its channels, the allowed widths, the wire bytes of a row and lam."""

    channels: tuple[Channel, ...]
    bit_choices: tuple[int, ...]  # allowed widths, ascending, subset of ALLOWED_BITS
    row_bytes: dict[int, int]  # wire bytes of one row at each width
    variance_weight: float  # lam in [0, 1]
    time_objective: str = "max_channel"  # one of TIME_OBJECTIVES
    world_size: int | None = (
        None  # ring_rounds: channel s -> d is in round (d - s) mod world_size; None: 1 + the highest rank
    )

    def __post_init__(self) -> None:
        channels = tuple(self.channels)
        _require(all(isinstance(ch, Channel) for ch in channels), "BitProblem.channels", "must hold Channel objects")
        bits = tuple(int(b) for b in self.bit_choices)
        _require(len(bits) > 0, "BitProblem.bit_choices", "must not be empty")
        _require(list(bits) == sorted(set(bits)), "BitProblem.bit_choices", f"must be strictly ascending, got {bits}")
        _require(
            set(bits) <= set(ALLOWED_BITS), "BitProblem.bit_choices", f"must be a subset of {ALLOWED_BITS}, got {bits}"
        )
        missing = [b for b in bits if b not in self.row_bytes]
        _require(not missing, "BitProblem.row_bytes", f"has no entry for widths {missing}")
        row_bytes = {int(b): int(n) for b, n in self.row_bytes.items()}
        _require(all(row_bytes[b] > 0 for b in bits), "BitProblem.row_bytes", f"must be > 0, got {row_bytes}")
        lam = float(self.variance_weight)
        _require(0.0 <= lam <= 1.0, "BitProblem.variance_weight", f"must be in [0, 1], got {self.variance_weight}")
        _require(
            self.time_objective in TIME_OBJECTIVES,
            "BitProblem.time_objective",
            f"must be one of {TIME_OBJECTIVES}, got {self.time_objective!r}",
        )
        highest = max((max(ch.src, ch.dst) for ch in channels), default=-1)
        world = highest + 1 if self.world_size is None else int(self.world_size)
        _require(world > highest, "BitProblem.world_size", f"must exceed every rank ({highest}), got {self.world_size}")
        object.__setattr__(self, "world_size", world)
        object.__setattr__(self, "channels", channels)
        object.__setattr__(self, "bit_choices", bits)
        object.__setattr__(self, "row_bytes", row_bytes)
        object.__setattr__(self, "variance_weight", lam)


@dataclass
class Solution:
    bits: list[np.ndarray]  # per channel (problem order), per group: the chosen width
    objective: float
    solve_time_s: float
    solver: str
    status: str = ""  # "optimal", "time_limit" (MILP incumbent, optimality not proven) or "heuristic"
    bound: float | None = None  # proven lower bound on J (MILP dual bound, brute force: the optimum)


def _require(ok: bool, field: str, message: str) -> None:
    if not ok:
        raise ValueError(f"{field} {message}")


def _vector(values: object, field: str) -> np.ndarray:
    arr = np.array(values, dtype=np.float64)
    _require(arr.ndim == 1, field, f"must be one-dimensional, got shape {arr.shape}")
    return arr


def _readonly(arr: np.ndarray) -> np.ndarray:
    arr.flags.writeable = False
    return arr


@dataclass
class _Model:
    """The problem flattened over the groups of all non-empty channels (contiguous per channel)."""

    lam: float
    widths: np.ndarray  # (B,) bit_choices
    unit_bytes: np.ndarray  # (B,) row_bytes per width
    unit_var: np.ndarray  # (B,) 1 / (2^b - 1)^2
    var: np.ndarray  # (G, B) variance of each group at each width
    nbytes: np.ndarray  # (G, B) bytes of each group at each width
    chan: np.ndarray  # (G,) index of the group's channel among the non-empty ones
    starts: np.ndarray  # (C,) first group of each non-empty channel
    a: np.ndarray  # (C,)
    c: np.ndarray  # (C,)
    sizes: np.ndarray  # group count of every channel of the problem, empty ones included
    term: np.ndarray  # (C,) the term (a sum of channel times) each channel counts in
    stage: np.ndarray  # (K,) the stage of each term: T = sum over stages of the stage's slowest term
    eps_den: int = 1  # the channel count the EPS mean divides by
    vn: float = 1.0  # V_lo - V_hi
    tn: float = 1.0  # T_hi - T_lo
    v0: float = 0.0  # V_hi
    s0: float = 0.0  # S_lo

    @property
    def num_groups(self) -> int:
        return len(self.chan)

    def channel_times(self, idx: np.ndarray) -> np.ndarray:
        """(N, C) channel times for (N, G) width indices."""
        return self.a * np.add.reduceat(self.nbytes[np.arange(self.num_groups), idx], self.starts, axis=-1) + self.c

    def evaluate(self, idx: np.ndarray) -> np.ndarray:
        """J of each row of ``idx`` (N, G), the width index of every group."""
        v = self.var[np.arange(self.num_groups), idx].sum(axis=-1)
        t = self.channel_times(idx)
        return self.lam * (v - self.v0) / self.vn + (1 - self.lam) * (self.spread(t) - self.s0) / self.tn

    def exchange_time(self, t: np.ndarray) -> np.ndarray:
        """T for (..., C) channel times."""
        terms = t @ (self.term[:, None] == np.arange(len(self.stage))).astype(np.float64)
        return sum(terms[..., self.stage == k].max(axis=-1) for k in np.unique(self.stage))

    def spread(self, t: np.ndarray) -> np.ndarray:
        """S: the exchange time plus the EPS tie-break on the mean channel time."""
        return self.exchange_time(t) + EPS * t.sum(axis=-1) / self.eps_den


def _structure(problem: BitProblem, used: list[Channel]) -> tuple[np.ndarray, np.ndarray]:
    """(term of each used channel, stage of each term) for the problem's time objective."""
    count = len(used)
    if problem.time_objective == "sender_uplink":
        _, term = np.unique([ch.src for ch in used], return_inverse=True)
        return term.astype(np.int64).reshape(-1), np.zeros(int(term.max(initial=-1)) + 1, dtype=np.int64)
    if problem.time_objective == "ring_rounds":
        _, stage = np.unique([(ch.dst - ch.src) % problem.world_size for ch in used], return_inverse=True)
        return np.arange(count), stage.astype(np.int64).reshape(-1)
    return np.arange(count), np.zeros(count, dtype=np.int64)


def _model(problem: BitProblem) -> _Model:
    sizes = np.array([len(ch.group_rows) for ch in problem.channels], dtype=np.int64)
    used = [ch for ch in problem.channels if len(ch.group_rows)]
    widths = np.array(problem.bit_choices, dtype=np.int64)
    unit_bytes = np.array([problem.row_bytes[b] for b in problem.bit_choices], dtype=np.float64)
    unit_var = 1.0 / (2.0**widths - 1) ** 2
    weights = np.concatenate([ch.group_weights for ch in used]) if used else np.zeros(0)
    rows = np.concatenate([ch.group_rows for ch in used]).astype(np.float64) if used else np.zeros(0)
    counts = sizes[sizes > 0]
    term, stage = _structure(problem, used)
    m = _Model(
        lam=problem.variance_weight,
        widths=widths,
        unit_bytes=unit_bytes,
        unit_var=unit_var,
        var=weights[:, None] * unit_var,
        nbytes=rows[:, None] * unit_bytes,
        chan=np.repeat(np.arange(len(used)), counts),
        starts=np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64),
        a=np.array([ch.a for ch in used]),
        c=np.array([ch.c for ch in used]),
        sizes=sizes,
        term=term,
        stage=stage,
        eps_den=max(len(used), 1),
    )
    if m.num_groups:
        lowest = np.zeros(m.num_groups, dtype=np.int64)
        highest = lowest + len(widths) - 1
        m.v0 = float(m.var[:, -1].sum())
        m.vn = (float(m.var[:, 0].sum()) - m.v0) or 1.0
        t_lo, t_hi = m.channel_times(lowest), m.channel_times(highest)
        m.s0 = float(m.spread(t_lo))
        m.tn = (float(m.exchange_time(t_hi)) - float(m.exchange_time(t_lo))) or 1.0
    return m


def _stages(m: _Model):
    """(model, groups) per stage: a max_channel model over the stage's terms and the groups (in m) it holds.

    A term of several channels becomes one channel with a = 1 and its groups' bytes in seconds; vn, tn
    and eps_den stay m's, so the stage models' J parts add up to m's J (up to constants)."""
    if len(m.stage) == len(m.a) and not m.stage.any():
        yield m, np.arange(m.num_groups)  # max_channel: one stage, one channel per term
        return
    counts = np.diff(np.append(m.starts, m.num_groups))
    for k in np.unique(m.stage):
        members = [np.flatnonzero(m.term == t) for t in np.flatnonzero(m.stage == k)]
        groups = np.concatenate([np.arange(m.starts[c], m.starts[c] + counts[c]) for chans in members for c in chans])
        per_term = np.array([counts[chans].sum() for chans in members])
        merged = any(len(chans) > 1 for chans in members)
        nbytes = m.nbytes[groups] * (m.a[m.chan[groups]][:, None] if merged else 1.0)
        first = np.array([chans[0] for chans in members])
        sub = _Model(
            lam=m.lam,
            widths=m.widths,
            unit_bytes=m.unit_bytes,
            unit_var=m.unit_var,
            var=m.var[groups],
            nbytes=nbytes,
            chan=np.repeat(np.arange(len(members)), per_term),
            starts=np.concatenate([[0], np.cumsum(per_term)[:-1]]),
            a=np.ones(len(members)) if merged else m.a[first],
            c=np.array([m.c[chans].sum() for chans in members]),
            sizes=per_term,
            term=np.arange(len(members)),
            stage=np.zeros(len(members), dtype=np.int64),
            eps_den=m.eps_den,
            vn=m.vn,
            tn=m.tn,
        )
        yield sub, groups


def _indices(problem: BitProblem, m: _Model, bits: list[np.ndarray]) -> np.ndarray:
    """Width indices (G,) of an assignment given per channel, validated against the problem."""
    _require(
        len(bits) == len(problem.channels), "bits", f"has {len(bits)} entries for {len(problem.channels)} channels"
    )
    for i, (b, n) in enumerate(zip(bits, m.sizes)):
        _require(np.shape(b) == (n,), f"bits[{i}]", f"has shape {np.shape(b)}, expected ({n},)")
        _require(
            bool(np.isin(b, m.widths).all()), f"bits[{i}]", f"holds widths outside bit_choices {problem.bit_choices}"
        )
    flat = np.concatenate([np.asarray(b, dtype=np.int64) for b in bits]) if bits else np.zeros(0, dtype=np.int64)
    return np.searchsorted(m.widths, flat)


def _solution(
    m: _Model, idx: np.ndarray, solver: str, started: float, status: str, bound: float | None = None
) -> Solution:
    if m.num_groups:
        idx = np.where(m.var[:, -1] == 0, int(np.argmin(m.unit_bytes)), idx)  # zero-weight groups: fewest bytes
    widths = m.widths[idx] if m.num_groups else np.zeros(0, dtype=np.int64)
    bits = np.split(widths, np.cumsum(m.sizes)[:-1]) if len(m.sizes) else []
    value = float(m.evaluate(idx)) if m.num_groups else 0.0
    if bound is not None or status == "optimal":
        bound = value if bound is None else min(bound, value)
    return Solution(bits, value, time.perf_counter() - started, solver, status, bound)


def objective(problem: BitProblem, bits: list[np.ndarray]) -> float:
    """J of an assignment (see the module docstring)."""
    m = _model(problem)
    idx = _indices(problem, m, bits)
    return float(m.evaluate(idx)) if m.num_groups else 0.0


def brute_force(problem: BitProblem) -> Solution:
    """Exhaustive minimum; raises ValueError above BRUTE_FORCE_LIMIT combinations."""
    started = time.perf_counter()
    m = _model(problem)
    num_widths = len(m.widths)
    combos = num_widths**m.num_groups
    _require(
        combos <= BRUTE_FORCE_LIMIT, "brute_force:", f"{combos} combinations exceed the limit of {BRUTE_FORCE_LIMIT}"
    )
    if not m.num_groups:
        return _solution(m, np.zeros(0, dtype=np.int64), "brute_force", started, "optimal")
    idx = np.indices((num_widths,) * m.num_groups).reshape(m.num_groups, -1).T
    return _solution(m, idx[np.argmin(m.evaluate(idx))], "brute_force", started, "optimal")


def solve_milp(problem: BitProblem, time_limit_s: float | None = None) -> Solution:
    """Exact minimum of J: binaries x[g, b] (one width per group) and Z >= t_c / Tn for every channel."""
    started = time.perf_counter()
    m = _model(problem)
    if not m.num_groups:
        return _solution(m, np.zeros(0, dtype=np.int64), "milp", started, "optimal")
    num_groups, num_widths = m.var.shape
    num_x, num_terms, num_z = num_groups * num_widths, len(m.stage), int(m.stage.max()) + 1
    # Time in units of Tn keeps the coefficients O(1 / groups per channel).
    norm_time = (m.a[m.chan] / m.tn)[:, None] * m.nbytes
    cost = np.append(m.lam / m.vn * m.var + (1 - m.lam) * EPS / m.eps_den * norm_time, np.full(num_z, 1 - m.lam))
    one_hot = sparse.csr_array(
        (np.ones(num_x), (np.repeat(np.arange(num_groups), num_widths), np.arange(num_x))),
        shape=(num_groups, num_x + num_z),
    )
    # One row per term: its channels' times <= Z of its stage.
    time_rows = np.concatenate([np.repeat(m.term[m.chan], num_widths), np.arange(num_terms)])
    time_cols = np.concatenate([np.arange(num_x), num_x + m.stage])
    time_vals = np.concatenate([norm_time.ravel(), -np.ones(num_terms)])
    timing = sparse.csr_array((time_vals, (time_rows, time_cols)), shape=(num_terms, num_x + num_z))
    fixed = np.bincount(m.term, m.c, minlength=num_terms)
    constraints = [LinearConstraint(one_hot, 1, 1), LinearConstraint(timing, -np.inf, -fixed / m.tn)]
    integrality = np.append(np.ones(num_x), np.zeros(num_z))
    bounds = Bounds(np.zeros(num_x + num_z), np.append(np.ones(num_x), np.full(num_z, np.inf)))
    options: dict[str, float] = {"mip_rel_gap": MIP_REL_GAP}
    if time_limit_s is not None:
        options["time_limit"] = float(time_limit_s)
    res = milp(_COST_SCALE * cost, integrality=integrality, bounds=bounds, constraints=constraints, options=options)
    if res.x is None:
        # No incumbent within the time limit; any assignment is feasible, so fall back to the heuristic.
        fallback = solve_greedy(problem)
        return Solution(
            fallback.bits, fallback.objective, time.perf_counter() - started, "milp", f"no incumbent ({res.message})"
        )
    idx = res.x[:num_x].reshape(num_groups, num_widths).argmax(axis=1)
    status = {0: "optimal", 1: "time_limit"}.get(res.status, res.message)
    bound = None
    if res.mip_dual_bound is not None:
        # The MILP objective leaves out the constant part of the mean term and the normalization offsets.
        constant = (1 - m.lam) * (EPS * m.c.sum() / m.eps_den - m.s0) / m.tn - m.lam * m.v0 / m.vn
        bound = float(res.mip_dual_bound / _COST_SCALE + constant)
    return _solution(m, idx, "milp", started, status, bound)


def _downgrade_path(unit_bytes: np.ndarray, unit_var: np.ndarray) -> np.ndarray:
    """Width indices along the lower convex hull in (bytes, variance), from the highest width to the fewest bytes.

    Every group's points are the same points scaled by (rows, weight), so one path serves all groups."""
    top = len(unit_bytes) - 1  # the highest width has the least variance
    points = [i for i in range(len(unit_bytes)) if unit_bytes[i] < unit_bytes[top]] + [top]
    points.sort(key=lambda i: (unit_bytes[i], unit_var[i]))
    hull: list[int] = []
    for p in points:
        if hull and unit_bytes[hull[-1]] == unit_bytes[p]:
            continue  # same bytes, more variance
        while len(hull) >= 2 and _cross(unit_bytes, unit_var, hull[-2], hull[-1], p) < 0:
            hull.pop()
        hull.append(p)
    return np.array(hull[::-1], dtype=np.int64)


def _cross(x: np.ndarray, y: np.ndarray, o: int, p: int, q: int) -> float:
    return float((x[p] - x[o]) * (y[q] - y[o]) - (y[p] - y[o]) * (x[q] - x[o]))


@dataclass
class _Steps:
    """Every group's downgrade steps, per channel in order of increasing variance added per byte saved."""

    group: np.ndarray  # (S,) group of each step
    saved: np.ndarray  # (S,) bytes saved
    added: np.ndarray  # (S,) variance added
    chan: np.ndarray  # (S,) channel
    before: np.ndarray  # (S,) channel time before the step, given all earlier steps of the channel
    after: np.ndarray  # (S,) channel time after it
    top_bytes: np.ndarray  # (C,) channel bytes with every group at the start of the path
    top_var: float  # V with every group at the start of the path
    end_time: np.ndarray  # (C,) channel time with every group at the end of the path


def _steps(m: _Model, path: np.ndarray) -> _Steps:
    num_steps = len(path) - 1
    saved = (m.nbytes[:, path[:-1]] - m.nbytes[:, path[1:]]).ravel()
    added = (m.var[:, path[1:]] - m.var[:, path[:-1]]).ravel()
    group = np.repeat(np.arange(m.num_groups), num_steps)
    chan = m.chan[group]
    rank = np.tile(np.arange(num_steps), m.num_groups)  # keeps a group's steps in path order on ties
    order = np.lexsort((rank, added / saved, chan))
    group, saved, added, chan = group[order], saved[order], added[order], chan[order]
    done = np.cumsum(saved)  # bytes are integers, so the running sums are exact
    first = m.starts * num_steps
    saved_in_chan = done - (done[first] - saved[first])[chan]
    top_bytes = np.add.reduceat(m.nbytes[:, path[0]], m.starts)
    after = m.a[chan] * (top_bytes[chan] - saved_in_chan) + m.c[chan]
    before = after + m.a[chan] * saved
    end_time = m.a * np.add.reduceat(m.nbytes[:, path[-1]], m.starts) + m.c
    top_var = float(m.var[:, path[0]].sum())
    return _Steps(group, saved, added, chan, before, after, top_bytes, top_var, end_time)


def _cap_sweep(m: _Model, st: _Steps) -> np.ndarray:
    """Mask of the steps taken under the best common time cap tau.

    Each channel takes the steps that pay for themselves through the EPS term, then the shortest
    prefix whose time is <= tau. J is evaluated for every breakpoint tau at once: with the steps
    sorted by the channel time they start from, V and sum(t_c) at a cap are prefix sums."""
    num_chan = len(m.a)
    free = m.lam * st.added / m.vn < (1 - m.lam) * EPS * m.a[st.chan] * st.saved / (m.eps_den * m.tn)
    capped = ~free
    free_time = m.a * (st.top_bytes - np.bincount(st.chan[free], st.saved[free], minlength=num_chan)) + m.c
    base_var = st.top_var + st.added[free].sum()
    order = np.argsort(-st.before[capped], kind="stable")
    starts = -st.before[capped][order]
    cum_var = np.concatenate([[0.0], np.cumsum(st.added[capped][order])])
    cum_time = np.concatenate([[0.0], np.cumsum((st.after - st.before)[capped][order])])
    caps = np.concatenate([st.before[capped], free_time])
    caps = caps[caps >= st.end_time.max()]
    taken = np.searchsorted(starts, -caps, side="left")  # steps starting above the cap
    value = m.lam * (base_var + cum_var[taken]) / m.vn
    value += (1 - m.lam) * (caps + EPS * (free_time.sum() + cum_time[taken]) / m.eps_den) / m.tn
    return free | (st.before > caps[np.argmin(value)])


def _fill(m: _Model, path: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Undo downgrades while they lower J and fit in their channel's slack below the slowest channel."""
    pos = pos.copy()
    for _ in range(_FILL_ROUNDS):
        times = m.channel_times(path[pos])
        g = np.flatnonzero(pos > 0)
        up, cur, chan = path[pos[g] - 1], path[pos[g]], m.chan[g]
        extra = m.nbytes[g, up] - m.nbytes[g, cur]
        dt = m.a[chan] * extra
        gain = m.lam * (m.var[g, cur] - m.var[g, up]) / m.vn - (1 - m.lam) * EPS * dt / (m.eps_den * m.tn)
        slack = times.max() - times
        ok = (gain > 0) & (dt <= slack[chan])
        if not ok.any():
            break
        g, dt, chan = g[ok], dt[ok], chan[ok]
        order = np.lexsort((-gain[ok] / extra[ok], chan))  # per channel, most variance saved per byte first
        g, dt, chan = g[order], dt[order], chan[order]
        pos[g[_segment_cumsum(dt, chan) <= slack[chan]]] -= 1
    return pos


def _descend(m: _Model, idx: np.ndarray) -> np.ndarray:
    """Steepest descent over single-group width changes (all evaluated at once) until none lowers J."""
    idx = idx.copy()
    num_chan, groups = len(m.a), np.arange(m.num_groups)
    for _ in range(_DESCENT_ROUNDS):
        times = m.channel_times(idx)
        order = np.argsort(times)
        top, second = times[order[-1]], times[order[-2]] if num_chan > 1 else -np.inf
        others_max = np.where(np.arange(num_chan) == order[-1], second, top)  # slowest channel but this one
        dt = m.a[m.chan][:, None] * (m.nbytes - m.nbytes[groups, idx][:, None])  # (G, B)
        new_max = np.maximum(times[m.chan][:, None] + dt, others_max[m.chan][:, None])
        delta = m.lam * (m.var - m.var[groups, idx][:, None]) / m.vn
        delta += (1 - m.lam) * (new_max - top + EPS * dt / m.eps_den) / m.tn
        best = np.unravel_index(np.argmin(delta), delta.shape)
        if delta[best] >= -1e-15:
            break
        idx[best[0]] = best[1]
    return idx


def _segment_cumsum(values: np.ndarray, segment: np.ndarray) -> np.ndarray:
    """Inclusive running sums restarting where the (sorted) segment id changes."""
    total = np.cumsum(values)
    first = np.flatnonzero(np.diff(segment, prepend=-1))
    offset = total[first] - values[first]
    return total - np.repeat(offset, np.diff(np.append(first, len(values))))


def solve_greedy(problem: BitProblem) -> Solution:
    """Fast heuristic, per stage: common time-cap sweep along convex downgrade paths, a local fill, then descent."""
    started = time.perf_counter()
    m = _model(problem)
    if not m.num_groups:
        return _solution(m, np.zeros(0, dtype=np.int64), "greedy", started, "heuristic")
    path = _downgrade_path(m.unit_bytes, m.unit_var)
    idx = np.zeros(m.num_groups, dtype=np.int64)
    for stage, groups in _stages(m):
        pos = np.zeros(stage.num_groups, dtype=np.int64)
        if len(path) > 1:
            st = _steps(stage, path)
            pos = np.bincount(st.group[_cap_sweep(stage, st)], minlength=stage.num_groups)
            pos = _fill(stage, path, pos)
        idx[groups] = _descend(stage, path[pos])
    return _solution(m, idx, "greedy", started, "heuristic")


SOLVERS: dict[str, Callable[[BitProblem], Solution]] = {"milp": solve_milp, "greedy": solve_greedy}
