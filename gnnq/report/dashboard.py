"""One self-contained HTML dashboard: the leaderboards as a sortable, filterable table, the plots,
and each configuration on click: its command, its config's differences from gnnq's defaults (the
whole resolved config one click further), its runs. No server and no network: data, script, style
and images (PNG data URIs) are all inside the file.

For tests and links the page reads commands from its URL fragment, carried out as real clicks
and input events: ``#sort=<column>[,desc]``, ``#filter=<text>``, ``#open=<row>``, ``#full`` (the opened row's full
config).
"""

from __future__ import annotations

import base64
import html
import json
import math
import shlex
from pathlib import Path

from gnnq.config.compose import compose_config
from gnnq.report.aggregate import Group, Leaderboard
from gnnq.report.output import write_text
from gnnq.report.overrides import IGNORED_GROUPS, IGNORED_KEYS

COLUMNS = [  # key, header, numeric
    ("dataset", "dataset", False),
    ("rank", "rank", True),
    ("method", "method", False),
    ("runs", "runs", True),
    ("test", "test", True),
    ("test_std", "± std", True),
    ("val", "val", True),
    ("val_std", "± std", True),
    ("num_params", "#params", True),
    ("epochs_per_s", "epochs/s", True),
    ("epoch_ms", "epoch ms", True),
    ("overhead_s", "overhead s", True),
    ("comm_ms", "exposed comm ms", True),
    ("halo_mb", "halo MB/epoch", True),
    ("wire_mb", "wire MB/epoch (halo + grad)", True),
    ("time_to_target_s", "time to target s", True),
    ("ranks", "ranks", False),
    ("hosts", "hosts", False),
    ("hardware", "hardware", False),
    ("commit", "commit", False),
    ("torch", "torch", False),
    ("date", "date", False),
    ("command", "command", False),
]


def _scaled(stat, scale: float) -> float | None:
    return None if stat is None or stat.mean is None else stat.mean * scale


def _differences(config: dict, defaults: dict, prefix: str = "") -> dict:
    """Dotted key -> value where ``config`` differs from ``defaults`` (keys defaults lack included)."""
    out = {}
    for k, v in config.items():
        key, d = f"{prefix}{k}", defaults.get(k) if isinstance(defaults, dict) else None
        if isinstance(v, dict) and isinstance(d, dict):
            out.update(_differences(v, d, key + "."))
        elif v != d or not isinstance(defaults, dict) or k not in defaults:
            out[key] = v
    return out


def _config_diff(config: dict, defaults: dict) -> dict:
    """The differences that change what a run computes (not where data and runs live, nor logging)."""
    return {
        k: v
        for k, v in _differences(config, defaults).items()
        if k != "runs_root" and k not in IGNORED_KEYS and k.split(".")[0] not in IGNORED_GROUPS
    }


def _default_config() -> dict:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(compose_config([]), resolve=True)


def dashboard_rows(boards: list[Leaderboard], defaults: dict | None = None) -> list[dict]:
    """One row per configuration and leaderboard: numbers as numbers, and what the config pane shows."""
    defaults = _default_config() if defaults is None else defaults
    rows = []
    for board in boards:
        numbers = board.rank_numbers or range(1, len(board.ranked) + 1)  # ties share a rank
        ranked = [(n, g, None) for n, g in zip(numbers, board.ranked)] + list(
            zip([None] * len(board.others), board.others, board.reasons)
        )
        for rank, g, why in ranked:
            s = g.stats
            config = g.runs[0][1]["config"]
            rows.append(
                {
                    "dataset": g.dataset,
                    "rank": rank,
                    "method": g.label or g.config,
                    "config": g.config,
                    "runs": len(g.runs),
                    "seeds": g.seeds,
                    "test": s["test"].mean,
                    "test_std": s["test"].std,
                    "val": s["best_val"].mean,
                    "val_std": s["best_val"].std,
                    "num_params": s["num_params"].mean,
                    "epochs_per_s": s["throughput"].mean,
                    "throughput_measured": g.throughput_measured,
                    "epoch_ms": _scaled(s["epoch_time_s"], 1e3),
                    "overhead_s": s["overhead_time_s"].mean,
                    "comm_ms": _scaled(s["comm_time_s"], 1e3),
                    "halo_mb": _scaled(s["comm_bytes_per_epoch"], 1e-6),
                    "wire_mb": _scaled(s["wire_bytes_per_epoch"], 1e-6),
                    "time_to_target_s": _scaled(g.time_to_target, 1.0),
                    "ranks": g.ranks,
                    "hosts": g.hosts,
                    "hardware": g.hardware,
                    "commit": g.commit,
                    "torch": g.torch,
                    "date": g.date,
                    "command": g.command,
                    "command_words": [shlex.quote(w) for w in ["gnnq", *g.overrides]],  # wrapped between words only
                    "why_unranked": why,
                    "run_dirs": [str(d) for d, _ in g.runs],
                    "config_diff": _config_diff(config, defaults),
                    "run_config": config,
                }
            )
    return rows


def _criterion_text(boards: list[Leaderboard]) -> str:
    if not boards:
        return ""
    b = boards[0]
    if b.criterion == "time":
        return f"ranked by time to the target validation metric (best mean best-val minus {b.tolerance * 100:g} points)"
    if b.criterion in ("test", "val"):
        return f"ranked by mean {'test' if b.criterion == 'test' else 'best validation'} metric over seeds"
    what = "wall-clock throughput" if b.criterion == "throughput" else "halo bytes per epoch"
    return f"ranked by {what} among configurations within {b.tolerance * 100:g} points of the best mean test metric"


def _finite(value):
    """JSON.parse rejects NaN and Infinity: they become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def write_dashboard(
    path: Path,
    groups: list[Group],
    boards: list[Leaderboard],
    plots: list[Path],
    failed: int = 0,
    title: str = "gnnq leaderboard",
) -> Path:
    """Write the HTML file; ``plots`` (PNG files) are embedded; ``failed``: runs left out because they failed."""
    rows = dashboard_rows(boards)
    images = [(p.stem, base64.b64encode(p.read_bytes()).decode()) for p in plots if p.suffix == ".png"]
    # "<" escaped: no string from a config can end the script element or open a comment in it.
    data = json.dumps(_finite({"columns": COLUMNS, "rows": rows}), default=str, allow_nan=False).replace("<", "\\u003c")
    figures = "\n".join(
        f'<figure><img alt="{html.escape(stem)}" '
        f'src="data:image/png;base64,{b64}"><figcaption>{html.escape(stem)}</figcaption></figure>'
        for stem, b64 in images
    )
    notes = "".join(f"<li>{html.escape(b.dataset)}: {html.escape(line)}</li>" for b in boards for line in b.noise)
    page = _TEMPLATE.format(
        notes=f'<p>Orders within the noise:</p><ul id="noise">{notes}</ul>' if notes else "",
        title=html.escape(title),
        criterion=html.escape(_criterion_text(boards)),
        data=data,
        figures=figures,
        summary=html.escape(
            f"{len(rows)} configurations, {sum(len(g.runs) for g in groups)} runs"
            + (f", {failed} failed" if failed else "")
        ),
    )
    write_text(path, page)
    return path


_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }}
table {{ border-collapse: collapse; font-size: 13px; }}
th, td {{ border-bottom: 1px solid #ddd; padding: 4px 8px; text-align: right; }}
th {{ cursor: pointer; background: #f4f4f4; position: sticky; top: 0; user-select: none; }}
th[data-sort=asc]::after {{ content: " \\25B2"; }} th[data-sort=desc]::after {{ content: " \\25BC"; }}
th.text {{ text-align: left; }}
td.text {{ text-align: left; font-family: ui-monospace, monospace; font-size: 12px; }}
tbody tr {{ cursor: pointer; }} tbody tr:hover {{ background: #eef5ff; }} tr.selected {{ background: #dbe9ff; }}
#filter {{ width: 28em; padding: 4px; margin: 0.5em 0; }}
#details {{ background: #f8f8f8; border: 1px solid #ddd; padding: 0.8em; font-size: 12px; }}
#details pre {{ white-space: pre-wrap; margin: 0.3em 0; }}
td[data-key=command] {{ min-width: 24em; max-width: 40em; }}
td[data-key=command] span {{ white-space: nowrap; }}
figure {{ display: inline-block; margin: 0.5em; vertical-align: top; }}
figure img {{ width: 100%; max-width: 880px; border: 1px solid #eee; cursor: zoom-in; }}
figure img.full {{ width: auto; max-width: none; cursor: zoom-out; }}
</style></head>
<body>
<h1>{title}</h1>
<p>{summary}; per dataset {criterion}. Rank '-': not ranked (the row's details say why).
Epochs/s: wall-clock, overheads included ('*': 1 / epoch time, the record has no wall-clock throughput).
Click a column to sort, a row for its config, a plot for its full size.</p>
{notes}<input id="filter" type="search" placeholder="filter rows (any text: dataset, override, ...)">
<span id="count"></span>
<table id="board"><thead><tr></tr></thead><tbody></tbody></table>
<h2>Configuration</h2>
<div id="details">Click a row.</div>
<h2>Plots</h2>
<div id="plots">{figures}</div>
<script type="application/json" id="data">{data}</script>
<script>
"use strict";
const DATA = JSON.parse(document.getElementById("data").textContent);
const head = document.querySelector("#board thead tr");
const body = document.querySelector("#board tbody");
const filterBox = document.getElementById("filter");

function fmt(key, v) {{
  if (v === null || v === undefined) return "-";
  if (typeof v !== "number") return String(v);
  if (["test", "test_std", "val", "val_std"].includes(key)) return v.toFixed(4);
  if (key === "rank" || key === "runs") return String(v);
  if (key === "num_params") return v.toLocaleString("en-US");
  return v.toFixed(v >= 100 ? 1 : 3);
}}

DATA.columns.forEach(([key, label, numeric]) => {{
  const th = document.createElement("th");
  th.textContent = label;
  th.dataset.key = key;
  if (!numeric) th.className = "text";
  th.addEventListener("click", () => sortBy(key, numeric, th.dataset.sort === "asc" ? "desc" : "asc"));
  head.appendChild(th);
}});

DATA.rows.forEach((row, i) => {{
  const tr = document.createElement("tr");
  tr.dataset.index = String(i);
  DATA.columns.forEach(([key, , numeric]) => {{
    const td = document.createElement("td");
    if (key === "command" && row.command_words) {{
      row.command_words.forEach((word, j) => {{
        const span = document.createElement("span");
        span.textContent = word;
        if (j) td.append(" ");
        td.append(span);
      }});
    }} else {{
      td.textContent = fmt(key, row[key]) +
        (key === "epochs_per_s" && row[key] !== null && !row.throughput_measured ? "*" : "");
    }}
    td.dataset.key = key;
    if (numeric && row[key] !== null && row[key] !== undefined) td.dataset.value = String(row[key]);
    if (!numeric) td.className = "text";
    tr.appendChild(td);
  }});
  tr.addEventListener("click", () => showConfig(i, tr));
  body.appendChild(tr);
}});

function sortBy(key, numeric, direction) {{
  document.querySelectorAll("#board th").forEach(th => {{ delete th.dataset.sort; }});
  document.querySelector(`#board th[data-key="${{key}}"]`).dataset.sort = direction;
  const sign = direction === "asc" ? 1 : -1;
  const rows = Array.from(body.rows);
  rows.sort((a, b) => {{
    const va = DATA.rows[a.dataset.index][key], vb = DATA.rows[b.dataset.index][key];
    if (va === null || va === undefined) return 1;   // missing values last, either way
    if (vb === null || vb === undefined) return -1;
    return sign * (numeric ? va - vb : String(va).localeCompare(String(vb)));
  }});
  rows.forEach(r => body.appendChild(r));
}}

function applyFilter() {{
  const words = filterBox.value.toLowerCase().split(/\\s+/).filter(Boolean);
  let shown = 0;
  Array.from(body.rows).forEach(tr => {{
    const text = tr.textContent.toLowerCase();
    tr.hidden = !words.every(w => text.includes(w));
    if (!tr.hidden) shown += 1;
  }});
  document.getElementById("count").textContent = `${{shown}} of ${{body.rows.length}} rows`;
}}
filterBox.addEventListener("input", applyFilter);

function section(title, text) {{
  const h = document.createElement("h3");
  h.textContent = title;
  const pre = document.createElement("pre");
  pre.textContent = text;
  return [h, pre];
}}

function showConfig(i, tr) {{
  document.querySelectorAll("#board tr.selected").forEach(r => r.classList.remove("selected"));
  tr.classList.add("selected");
  const row = DATA.rows[i];
  const pane = document.getElementById("details");
  pane.replaceChildren();
  const diff = Object.entries(row.config_diff).map(([k, v]) => `${{k}}: ${{JSON.stringify(v)}}`).join("\\n");
  pane.append(...section("command", row.command));
  if (row.why_unranked) pane.append(...section("not ranked because", row.why_unranked));
  pane.append(...section("differences from gnnq's defaults", diff || "(none)"));
  pane.append(...section("ran on",
    `${{row.hardware || "-"}}, ${{row.date || "-"}}; seeds ${{row.seeds.join(", ")}}\\n  ` +
    `${{row.run_dirs.join("\\n  ")}}`));
  const full = document.createElement("details");
  full.id = "full-config";
  const summary = document.createElement("summary");
  summary.textContent = "full resolved config (first run)";
  const pre = document.createElement("pre");
  pre.textContent = JSON.stringify(row.run_config, null, 2);
  full.append(summary, pre);
  pane.append(full);
}}

applyFilter();
document.querySelectorAll("#plots img").forEach(img =>
  img.addEventListener("click", () => img.classList.toggle("full")));

// Commands in the URL fragment, carried out as real events: #sort=key[,desc]  #filter=text  #open=row
for (const part of decodeURIComponent(location.hash.slice(1)).split("&").filter(Boolean)) {{
  const cut = part.indexOf("=");
  const cmd = cut < 0 ? part : part.slice(0, cut), arg = cut < 0 ? "" : part.slice(cut + 1);
  if (cmd === "sort") {{
    const [key, dir] = arg.split(",");
    const th = document.querySelector(`#board th[data-key="${{key}}"]`);
    if (!th) continue;
    th.click();
    if (dir === "desc") th.click();
  }} else if (cmd === "filter") {{
    filterBox.value = arg;
    filterBox.dispatchEvent(new Event("input"));
  }} else if (cmd === "open" && body.rows[Number(arg)]) {{
    body.rows[Number(arg)].click();
  }} else if (cmd === "full") {{
    const full = document.getElementById("full-config");
    if (full) full.querySelector("summary").click();
  }}
}}
</script>
</body></html>
"""
