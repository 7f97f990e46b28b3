#!/usr/bin/env python3
"""Summarizes experiments/design-space/results/*.json (Db::stats of each
strategy after its inserts have been flushed and compacted) as a Markdown table next to seed 001's
published figures. Fig. 4 is drawn by the plotting module of lamina-sim:
cargo run --release -p lamina-cli --example design_space_report RESULTS_DIR.
Usage: summarize.py RESULTS_DIR INSERTS"""

import json
import os
import sys

ORDER = ["full", "lo1", "lo2", "rr", "cold", "old", "tsd", "tsa", "tier"]
PAPER = {  # seed 001 Fig. 4(a): data movement (x ingested), where stated
    "full": "~63 (32 r + 31 w)",
    "tier": "~12",
}


def load(results):
    runs = {}
    for name in ORDER:
        path = os.path.join(results, name + ".json")
        if os.path.exists(path):
            with open(path) as f:
                runs[name] = json.load(f)
    return runs


def row(name, s):
    ing = max(s["bytes_ingested"], 1)
    c = s["compaction_latency"]
    cpu = s.get("compaction_cpu_latency", {})
    io = s.get("compaction_io_latency", {})
    put = s["put_latency"]
    return {
        "name": name,
        "read": s["compaction_bytes_read"] / ing,
        "written": s["compaction_bytes_written"] / ing,
        "movement": (s["compaction_bytes_read"] + s["compaction_bytes_written"]) / ing,
        "compactions": s["compactions"],
        "trivial": s["trivial_moves"],
        "mean_ms": c.get("mean_us", 0) / 1e3,
        "p50_ms": c["p50_us"] / 1e3,
        "p99_ms": c["p99_us"] / 1e3,
        "max_ms": c["max_us"] / 1e3,
        "cpu_ms": cpu.get("mean_us", 0) / 1e3,
        "io_ms": io.get("mean_us", 0) / 1e3,
        "put_p99_us": put["p99_us"],
        "put_max_ms": put["max_us"] / 1e3,
        "stall_ms": s["stall_micros"] / 1e3,
        "runs": [l["runs"] for l in s["levels"]],
        "seconds": s.get("ingest_seconds", 0),
        "settled": s.get("settled_seconds", 0),
    }


def table(rows, n):
    full = next((r for r in rows if r["name"] == "full"), None)
    out = [
        f"Inserts: {n:,} uniform random 128-byte entries per strategy.",
        "",
        "| strategy | data movement (read + write) / ingested | vs full | paper | compactions (+ trivial moves) | vs full | mean / p50 / p99 / max compaction ms | mean CPU / I/O ms | put p99 µs | put max ms | stall ms | runs per level | ingest / settled s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        rel = f"{(r['movement'] / full['movement'] - 1) * 100:+.0f}%" if full else ""
        crel = f"{r['compactions'] / max(full['compactions'], 1):.1f}x" if full else ""
        out.append(
            f"| {r['name']} | {r['movement']:.1f} ({r['read']:.1f} + {r['written']:.1f}) | {rel} "
            f"| {PAPER.get(r['name'], '')} | {r['compactions']} (+{r['trivial']}) | {crel} "
            f"| {r['mean_ms']:.0f} / {r['p50_ms']:.0f} / {r['p99_ms']:.0f} / {r['max_ms']:.0f} "
            f"| {r['cpu_ms']:.0f} / {r['io_ms']:.0f} | {r['put_p99_us']:.0f} | {r['put_max_ms']:.1f} "
            f"| {r['stall_ms']:.0f} | {r['runs']} | {r['seconds']:.0f} / {r['settled']:.0f} |"
        )
    return "\n".join(out) + "\n"


def main():
    results, n = sys.argv[1], int(sys.argv[2])
    rows = [row(k, v) for k, v in load(results).items()]
    md = table(rows, n)
    with open(os.path.join(results, "results.md"), "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    main()
