"""LaTeX tables for papers: booktabs rules (``\\usepackage{booktabs}``), escaped text, and the best value
of each column in bold."""

from __future__ import annotations

import re

_LATEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}
# Which way is better, by the metric a column shows (a record key or the report's own).
HIGHER_IS_BETTER = {"test", "best_val", "throughput", "epochs_per_s", "speedup"}
LOWER_IS_BETTER = {
    "epoch_time_s",
    "comm_time_s",
    "comm_bytes_per_epoch",
    "overhead_time_s",
    "time_to_target_s",
    "training_time_s",
    "transfer_time_s",
}
PM = " $\\pm$ "


def escape(text: str) -> str:
    return re.sub(r"[\\&%$#_{}~^]", lambda m: _LATEX[m[0]], text)


def direction(metric: str | None) -> str | None:
    """'max' or 'min' where the metric has a better direction (its last dotted part decides), else None."""
    name = (metric or "").rsplit(".", 1)[-1]
    return "max" if name in HIGHER_IS_BETTER else "min" if name in LOWER_IS_BETTER else None


def best_rows(values: list[float | None], how: str | None) -> set[int]:
    """Indices of the best value (all of them on a tie); none without a direction, or where every value is the same."""
    present = [v for v in values if v is not None]
    if how is None or len(set(present)) < 2:
        return set()
    best = max(present) if how == "max" else min(present)
    return {i for i, v in enumerate(values) if v is not None and v == best}


def render(headers: list[str], rows: list[list[str]], caption: str, bold: list[set[int]] | None = None) -> str:
    """A ``table`` environment of text cells (escaped; ``mean ± std`` set as ``mean $\\pm$ std``);
    ``bold[j]``: the row indices whose cell in column j is set in bold."""
    bold = bold or [set() for _ in headers]

    def cell(i: int, j: int, text: str) -> str:
        tex = escape(text).replace(" ± ", PM)
        return f"\\textbf{{{tex}}}" if i in bold[j] and text != "-" else tex

    lines = [
        "\\begin{table}[t]",
        "\\centering",
        f"\\caption{{{escape(caption)}}}",
        "\\begin{tabular}{" + "l" + "r" * (len(headers) - 1) + "}",
        "\\toprule",
        " & ".join(escape(h) for h in headers) + " \\\\",
        "\\midrule",
    ]
    lines += [" & ".join(cell(i, j, t) for j, t in enumerate(row)) + " \\\\" for i, row in enumerate(rows)]
    lines += ["\\bottomrule", "\\end{tabular}", "\\end{table}"]
    return "\n".join(lines) + "\n"
