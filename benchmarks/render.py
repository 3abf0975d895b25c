#!/usr/bin/env python3
"""Renders benchmarks/run's JSON lines as Markdown tables and a gnuplot chart.

Usage: render.py LATEST.jsonl LATEST.md LATEST.png
       render.py --peers PEERS.jsonl PEERS.md PEERS.png

Without --peers:

Each scenario (`bench`) printed by both implementations gets one row per side
and the ratios dlock/raw for ops/s (higher is better), p50 latency and CPU per
operation (lower is better). A side measured several times in one run (some
programs alternate raw and dlock) is summarized by the median of each figure.
Results without a raw counterpart are listed as they are. A scenario whose
dlock side also ran with a no-op observer (impl `dlock_observed`) gets a
table of that side against the plain one: the hooks' own cost.

With --peers (benchmarks/peers/run's lines): one row per scenario and side
(dlock and each peer library) with the median of every run and its spread
(lowest-highest), and a chart of ops/s and client CPU per operation, one
bar per side, the spread as error bars.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import OrderedDict

FIGURES = ("ops_per_s", "p50_us", "p99_us", "cpu_us_per_op")


def read_results(path):
    """{(program, bench): {impl: [result, ...]}} in first-seen order.

    A scenario belongs to the first program that printed it; results for the
    same scenario from another program join it (zk_raw prints the baseline of
    zk_client's scenarios again, as a standalone check).
    """
    grouped = OrderedDict()
    program_of = {}
    with open(path) as lines:
        for line in lines:
            line = line.strip()
            if not line:
                continue
            result = json.loads(line)
            bench = result["bench"]
            key = (program_of.setdefault(bench, result.get("program", "?")), bench)
            grouped.setdefault(key, OrderedDict()).setdefault(result["impl"], []).append(result)
    return grouped


def median_of(results):
    """One result whose figures are the medians of `results`' figures."""
    summary = dict(results[0])
    for figure in FIGURES:
        values = [r[figure] for r in results if figure in r]
        if values:
            summary[figure] = statistics.median(values)
    summary["runs"] = len(results)
    return summary


def ratio(dlock, raw, figure):
    if not raw.get(figure):
        return None
    return dlock[figure] / raw[figure]


def number(value, digits=1):
    return "-" if value is None else f"{value:,.{digits}f}"


def comparison_table(pairs):
    rows = [
        "| bench | impl | ops/s | p50 us | p99 us | CPU us/op | runs |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    ratios = [
        "| bench | ops/s dlock/raw | p50 dlock/raw | CPU/op dlock/raw |",
        "|---|---:|---:|---:|",
    ]
    for bench, raw, dlock in pairs:
        for impl, r in (("raw", raw), ("dlock", dlock)):
            rows.append(f"| `{bench}` | {impl} | {number(r['ops_per_s'])} | {number(r['p50_us'])} | "
                        f"{number(r['p99_us'])} | {number(r['cpu_us_per_op'])} | {r['runs']} |")
        ratios.append(f"| `{bench}` | {number(ratio(dlock, raw, 'ops_per_s'), 2)} | "
                      f"{number(ratio(dlock, raw, 'p50_us'), 2)} | {number(ratio(dlock, raw, 'cpu_us_per_op'), 2)} |")
    return rows + [""] + ratios


def single_table(results):
    rows = ["| bench | impl | figures |", "|---|---|---|"]
    for bench, impl, r in results:
        figures = ", ".join(f"{k} {v}" for k, v in r.items() if k not in ("program", "bench", "impl", "runs"))
        rows.append(f"| `{bench}` | {impl} | {figures} |")
    return rows


def observer_table(observed):
    """The hooks' cost: dlock with a no-op observer against dlock without one."""
    rows = ["| bench | ops/s observed/plain | CPU/op observed/plain | runs | target (ops/s >= 0.97) |",
            "|---|---:|---:|---:|---|"]
    for bench, plain, seen in observed:
        ops = ratio(seen, plain, "ops_per_s")
        verdict = "-" if ops is None else ("met" if ops >= 0.97 else "NOT MET")
        rows.append(f"| `{bench}` | {number(ops, 3)} | {number(ratio(seen, plain, 'cpu_us_per_op'), 3)} | "
                    f"{seen['runs']} | {verdict} |")
    return rows


def render_markdown(grouped):
    """The Markdown text, and [(bench, ops/s ratio)] for the chart."""
    out = ["# Benchmark results (latest run of benchmarks/run)", "",
           "Ratios are dlock / raw from the same run: ops/s above 1.0 is faster than raw,",
           "p50 and CPU/op below 1.0 are better than raw. Medians when a side ran several times.",
           "See benchmarks/RESULTS.md for what each scenario measures.", ""]
    chart = []
    programs = OrderedDict()
    for (program, bench), sides in grouped.items():
        programs.setdefault(program, []).append((bench, sides))
    for program, benches in programs.items():
        out += [f"## {program}", ""]
        pairs, singles, observed = [], [], []
        for bench, sides in benches:
            summary = {impl: median_of(results) for impl, results in sides.items()}
            if "dlock" in summary and "dlock_observed" in summary:
                observed.append((bench, summary["dlock"], summary.pop("dlock_observed")))
            if "raw" in summary and "dlock" in summary:
                pairs.append((bench, summary["raw"], summary["dlock"]))
                chart.append((bench, ratio(summary["dlock"], summary["raw"], "ops_per_s")))
            else:
                singles += [(bench, impl, r) for impl, r in summary.items()]
        if pairs:
            out += comparison_table(pairs) + [""]
        if singles:
            out += ["Without a raw counterpart:", ""] + single_table(singles) + [""]
        if observed:
            out += ["With a no-op observer installed (`dlock_observed`) against none (`dlock`):", ""]
            out += observer_table(observed) + [""]
    return "\n".join(out), [(b, r) for b, r in chart if r is not None]


GNUPLOT = """
set terminal pngcairo size 1100,600 font ",10"
set output '{png}'
set title 'dlock ops/s relative to the raw client (1.0 = raw speed; higher is better)'
set style fill solid 0.8 border -1
set boxwidth 0.6
set yrange [0:{top}]
set xrange [-0.6:{right}]
set rmargin 8
set ylabel 'ops/s dlock / raw'
set xtics rotate by -35 left noenhance
set grid ytics
set key off
set bmargin 9
set arrow from graph 0, first 1.0 to graph 1, first 1.0 nohead lw 2 lc rgb '#c0392b'
plot '{data}' using 0:2:xtic(1) with boxes lc rgb '#2e86c1', \\
     '' using 0:2:(sprintf('%.2f', $2)) with labels offset 0,0.8
"""


def render_chart(chart, png):
    with tempfile.NamedTemporaryFile("w", suffix=".dat", delete=False) as data:
        for bench, value in chart:
            data.write(f'"{bench}" {value:.4f}\n')
    top = max(1.2, max(value for _, value in chart) * 1.15)  # room for the value labels
    script = GNUPLOT.format(png=png, data=data.name, top=f"{top:.2f}", right=f"{len(chart) - 0.4:.1f}")
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


# ------------------------------------------------------------ peers ----

PEER_SIDES = ("dlock", "curator", "kazoo", "redis-py", "node-redlock")
PEER_COLORS = {"dlock": "#2e86c1", "curator": "#e67e22", "kazoo": "#27ae60",
               "redis-py": "#c0392b", "node-redlock": "#8e44ad"}
PEER_COLUMNS = (("ops_per_s", "ops/s", 0), ("p50_us", "p50 us", 0),
                ("cpu_us_per_op", "client CPU us/op", 1), ("peak_rss_kb", "peak RSS MiB", 1))


def read_peers(path):
    """{bench: {side: [result, ...]}}, scenarios and sides in first-seen order."""
    grouped = OrderedDict()
    with open(path) as lines:
        for line in lines:
            if line.strip():
                result = json.loads(line)
                grouped.setdefault(result["bench"], OrderedDict()).setdefault(result["impl"], []).append(result)
    return grouped


def spread(results, figure):
    """(median, lowest, highest) of `figure` over `results`; peak RSS in MiB."""
    values = [r[figure] / (1024 if figure == "peak_rss_kb" else 1) for r in results if figure in r]
    if not values:
        return None
    return statistics.median(values), min(values), max(values)


def spread_cell(s, digits):
    if s is None:
        return "-"
    median, low, high = s
    return f"**{median:,.{digits}f}** ({low:,.{digits}f}-{high:,.{digits}f})"


def peers_markdown(grouped):
    out = ["# dlock beside its peers (latest benchmarks/run --peers)", "",
           "Each cell: **median** (lowest-highest) over every run of that side; runs = how many.",
           "Client CPU = user + system time of the client process per operation; peak RSS = the",
           "client process's peak resident set (one process per scenario and side).", "",
           "| scenario | side | " + " | ".join(title for _, title, _ in PEER_COLUMNS) + " | runs |",
           "|---|---|" + "---:|" * (len(PEER_COLUMNS) + 1)]
    versions = OrderedDict()
    for bench, sides in grouped.items():
        for side, results in sides.items():
            cells = [spread_cell(spread(results, figure), digits) for figure, _, digits in PEER_COLUMNS]
            out.append(f"| `{bench}` | {side} | " + " | ".join(cells) + f" | {len(results)} |")
            if "peer_version" in results[0]:
                versions[side] = results[0]["peer_version"]
    loads = [r["load1"] for sides in grouped.values() for results in sides.values() for r in results if "load1" in r]
    if loads:
        out += ["", f"1-minute load average as each side started: {min(loads):.2f}-{max(loads):.2f} "
                    f"(median {statistics.median(loads):.2f})."]
    out += ["", "Versions measured:", ""] + [f"- {side}: {v}" for side, v in versions.items()]
    return "\n".join(out) + "\n"


PEERS_GNUPLOT_HEAD = """
set terminal pngcairo size 1400,950 font ",10"
set output '{png}'
set datafile missing 'NaN'
set style data histogram
set style histogram errorbars gap 1 lw 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set logscale y
set grid ytics mytics
set key below horizontal
set xtics noenhance rotate by -20 left
set bmargin 6
set multiplot layout 2,2 columnsfirst title 'dlock and its peers: same servers, same run (bars: median of the runs; whiskers: lowest-highest)'
"""

PEERS_GNUPLOT_PANEL = """
set title '{backend}: {what}'
set ylabel '{ylabel}'
set format y '{format}'
plot for [i=0:{last}] '{data}' using (column({first}+6*i)):(column({first}+1+6*i)):(column({first}+2+6*i)):xtic(1) \\
     title word('{sides}', i+1) lc rgb word('{colors}', i+1)
"""


def peers_panel_data(grouped, sides):
    """A gnuplot data file: per scenario, for each side, ops/s and CPU/op as median low high."""
    with tempfile.NamedTemporaryFile("w", suffix=".dat", delete=False) as data:
        for bench, by_side in grouped.items():
            row = [f'"{bench}"']
            for side in sides:
                for figure in ("ops_per_s", "cpu_us_per_op"):
                    s = spread(by_side.get(side, []), figure)
                    row += [f"{v:.3f}" for v in s] if s else ["NaN"] * 3
            data.write(" ".join(row) + "\n")
    return data.name


def render_peers_chart(grouped, png):
    """Two columns (ZooKeeper scenarios, Redis scenarios), two rows (ops/s, CPU/op)."""
    script, files = PEERS_GNUPLOT_HEAD.format(png=png), []
    backends = (("ZooKeeper", OrderedDict((b, r) for b, r in grouped.items() if b.startswith("zk_"))),
                ("Redis", OrderedDict((b, r) for b, r in grouped.items() if not b.startswith("zk_"))))
    for backend, scenarios in backends:
        if not scenarios:
            continue
        present = {side for by_side in scenarios.values() for side in by_side}
        sides = [s for s in PEER_SIDES if s in present] + sorted(present - set(PEER_SIDES))
        files.append(peers_panel_data(scenarios, sides))
        common = dict(backend=backend, data=files[-1], last=len(sides) - 1, sides=" ".join(sides),
                      colors=" ".join(PEER_COLORS.get(s, "#7f8c8d") for s in sides))
        script += PEERS_GNUPLOT_PANEL.format(what="ops/s (higher is better; log scale)", ylabel="ops/s",
                                             format="%.0f", first=2, **common)
        script += PEERS_GNUPLOT_PANEL.format(what="client CPU per operation (lower is better; log scale)",
                                             ylabel="user + system us/op", format="%g", first=5, **common)
    subprocess.run(["gnuplot"], input=script + "unset multiplot\n", text=True, check=True)
    for name in files:
        os.remove(name)


def main_peers(jsonl, markdown, png):
    grouped = read_peers(jsonl)
    with open(markdown, "w") as out:
        out.write(peers_markdown(grouped))
    if grouped:
        render_peers_chart(grouped, png)


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--peers":
        return main_peers(*sys.argv[2:])
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    jsonl, markdown, png = sys.argv[1:]
    text, chart = render_markdown(read_results(jsonl))
    with open(markdown, "w") as out:
        out.write(text + "\n")
    if chart:
        render_chart(chart, png)
    elif os.path.exists(png):
        os.remove(png)  # no pair of sides in this run: no chart, rather than last run's


if __name__ == "__main__":
    main()
