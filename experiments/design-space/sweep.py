#!/usr/bin/env python3
"""Tabulates one knob sweep of run-all.sh (seed 001 Fig. 8(g)-(o) and the
appendix figures): for every strategy, one row per value of the knob with
the load-independent counts first (write amplification = compaction bytes
written / bytes ingested, data movement = read + written, compactions,
disk levels, compaction CPU ms) and the wall-clock ones after them (mean
and max compaction ms, write stall), then, where the runs had them, CPU µs
and read amplification (blocks read) per lookup at alpha = 0 (existing
keys), 0.8 and 1 (empty) and the mean of the interleaved lookups. VALUEs
that are numbers are put in order; names (distributions) stay as given. Each point is a results directory of run.sh
(one JSON per strategy); the load average during its runs is in its
load.txt, quoted under the table.

--check STRATEGIES fails (exit 1) unless every point has every strategy,
each with bytes ingested and a compaction count, and at least two points:
the quick variant's shape test.

Usage: sweep.py OUT.md NAME KNOB [--check "S1 S2 ..."] VALUE=DIR..."""

import argparse
import os
import sys

from summarize import base, load, row

PAPER = {
    "size": "Fig. 8(g)-(i), O19: mean compaction latency grows sub-linearly with the data for every strategy, their order unchanged, WA likewise; Tier's tail grows the most.",
    "entry": "Fig. 8(j)-(k), O20: smaller entries make compactions (leveled most) slower and WA higher; both fall as the entry grows.",
    "buffer": "Fig. 8(l)-(n), O21: mean compaction latency rises with the buffer for every strategy, Tier's the least; Tier's tail levels off and crosses the eager strategies' at 64 MB; Old has the highest WA of the partial strategies, LO+1 and LO+2 the lowest.",
    "page": "Fig. 8(o), O22 and Fig. 12: every strategy reacts alike; larger pages lower the mean compaction latency.",
    "cache": "Fig. 10 (inserts only): mean compaction latency rises sharply above a 32 MB cache (of 1.28 GB); write stall twice the mixed workload's; Tier the most stable.",
    "mixed": "Fig. 11 (10% existing-key lookups interleaved): mean compaction latency stable from 8 to 256 MB of cache.",
    "ratio": "Fig. 13: Tier has the highest mean compaction latency for T <= 6, Full and Old above 6; Tier the worst tail at every T.",
    "ingest": "Fig. 6, O12-O13: Zipfian and normal ingestion move the same data with the same compaction latencies as uniform; with Zipfian inserts empty lookups end in the files' min/max keys (RA at alpha = 0.8 65-75% below uniform's); normal close to uniform, ~10% more filter and index hits at large alpha.",
    "lookup": "Fig. 7, O14: Zipfian lookups are fast for every strategy (the cache holds the popular blocks, low RA); with normal lookups LO+1 and LO+2 beat the rest and Tier is much slower.",
    "bpk": "Fig. 14: compaction latency grows a little with bits per key (larger filters); lookup latency does not fall (filter blocks missed in the cache).",
    "meta-bpk": "Fig. 14, with index and filter blocks in the block cache as the paper's RocksDB (cache_index_and_filter_blocks=1): compaction latency grows a little with bits per key; lookup latency increases with bits per key, for empty and (more) for existing keys, suspected to be more filter-block misses.",
}


ALPHAS = (0.0, 0.8, 1.0)


def lookup_cells(s):
    """CPU µs and blocks read per lookup at the ALPHAS (empty without
    lookups)."""
    rows = {l["alpha"]: l for l in s.get("lookups", [])}

    def cell(l):
        io = l["io"]
        text = f"{l['cpu_us']:.1f}, {io['read_amplification']:.2f}"
        # Index and filter blocks in the cache: their misses and the reads
        # in pages (summarize.py's block_misses).
        if io.get("filter_misses", 0) + io.get("index_misses", 0) > 0:
            text += f" ({io['filter_misses']:.2f} f, {io['index_misses']:.2f} i, {io.get('read_pages', float('nan')):.2f} pages)"
        return text

    cells = [cell(rows[a]) if a in rows else "" for a in ALPHAS]
    return " / ".join(cells) if any(cells) else ""


def order(points):
    """Numeric values in numeric order; names (distributions) as given."""
    try:
        return sorted(points, key=lambda p: float(p[0]))
    except ValueError:
        return points


def last_load(d):
    try:
        with open(os.path.join(d, "load.txt")) as f:
            lines = f.read().strip().splitlines()
        return lines[-1].split("load average:")[-1].strip() if lines else "?"
    except OSError:
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("name")
    ap.add_argument("knob")
    ap.add_argument("--check", metavar="STRATEGIES")
    ap.add_argument("points", nargs="+", metavar="VALUE=DIR")
    a = ap.parse_args()
    points = [(v, v, d) for v, d in order([p.split("=", 1) for p in a.points])]
    runs = {v: load(d) for _, v, d in points}
    strategies = []
    for _, v, _ in points:
        for label in runs[v]:
            if label not in strategies and (not a.check or base(label) in a.check.split()):
                strategies.append(label)
    out = [
        f"# Sweep `{a.name}`: {a.knob}",
        "",
        "Paper: " + PAPER.get(a.name, ""),
        "",
        f"| strategy | {a.knob} | WA (written / ingested) | data movement | compactions (+ trivial) | disk levels | mean compaction CPU ms | mean / max compaction ms (wall) | stall s (wall) | lookup CPU µs, RA at α = 0 / 0.8 / 1 | interleaved lookup mean µs (wall) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label in strategies:
        for _, v, _ in points:
            s = runs[v].get(label)
            if s is None:
                continue
            r = row(label, s)
            il = s.get("interleaved")
            il_mean = f"{il['mean_us']:.1f}" if il else ""
            out.append(
                f"| {label} | {v} | {r['written']:.2f} | {r['movement']:.1f} | {r['compactions']} (+{r['trivial']}) "
                f"| {r['levels']} | {r['cpu_ms']:.2f} | {r['mean_ms']:.1f} / {r['max_ms']:.0f} | {r['stall_ms'] / 1e3:.1f} "
                f"| {lookup_cells(s)} | {il_mean} |"
            )
    out += ["", "Points and the load average at their last run (1, 5, 15 min):", ""]
    out += [f"* {a.knob} = {v}: `{d}` ({last_load(d)})" for _, v, d in points]
    md = "\n".join(out) + "\n"
    with open(a.out, "w") as f:
        f.write(md)
    print(md)
    if a.check:
        problems = []
        if len(points) < 2:
            problems.append(f"{len(points)} point(s)")
        for _, v, d in points:
            for name in a.check.split():
                s = runs[v].get(name)
                if s is None:
                    problems.append(f"{a.knob}={v}: {name} missing in {d}")
                elif s["bytes_ingested"] <= 0 or s["compactions"] + s["trivial_moves"] <= 0:
                    problems.append(f"{a.knob}={v}: {name} ingested or compacted nothing")
        for p in problems:
            print("check failed:", p, file=sys.stderr)
        if problems:
            sys.exit(1)
        print(f"check: {len(points)} points, each with {a.check}")


if __name__ == "__main__":
    main()
