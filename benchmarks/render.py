#!/usr/bin/env python3
"""Renders benchmarks/run's JSON lines as Markdown tables and a gnuplot chart.

Usage: render.py LATEST.jsonl LATEST.md LATEST.png

Each scenario (`bench`) printed by both implementations gets one row per side
and the ratios dlock/raw for ops/s (higher is better), p50 latency and CPU per
operation (lower is better). A side measured several times in one run (some
programs alternate raw and dlock) is summarized by the median of each figure.
Results without a raw counterpart are listed as they are.
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
        pairs, singles = [], []
        for bench, sides in benches:
            summary = {impl: median_of(results) for impl, results in sides.items()}
            if "raw" in summary and "dlock" in summary:
                pairs.append((bench, summary["raw"], summary["dlock"]))
                chart.append((bench, ratio(summary["dlock"], summary["raw"], "ops_per_s")))
            else:
                singles += [(bench, impl, r) for impl, r in summary.items()]
        if pairs:
            out += comparison_table(pairs) + [""]
        if singles:
            out += ["Without a raw counterpart:", ""] + single_table(singles) + [""]
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


def main():
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
