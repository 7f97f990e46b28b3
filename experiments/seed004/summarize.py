#!/usr/bin/env python3
"""Tables of experiments/seed004/run.sh's results (results.md), beside the
seed's numbers. Usage: summarize.py RESULTS_DIR"""

import csv
import glob
import json
import os
import re
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def series_peak(path, skip=0.1):
    """Mean and max window throughput after the first `skip` of the puts."""
    rows = [line.strip().split(",") for line in open(path)][1:]
    rows = [(int(p), float(s), float(r)) for p, s, r in rows]
    if not rows:
        return 0.0, 0.0
    cut = rows[-1][0] * skip
    rates = [r for p, _, r in rows if p > cut] or [r for _, _, r in rows]
    return sum(rates) / len(rates), max(rates)


def cachegrind(path):
    """D1 and LL data misses (reads + writes) from cachegrind's summary."""
    text = open(path).read()
    out = {}
    for name in ("D1  misses", "LLd misses", "D   refs", "I   refs"):
        m = re.search(re.escape(name) + r":\s+([\d,]+)", text)
        out[name.split()[0]] = int(m.group(1).replace(",", "")) if m else None
    return out


def main(out):
    md = ["# Seed 004 experiments: results", ""]
    machine = os.path.join(out, "machine.txt")
    if os.path.exists(machine):
        md += ["`" + open(machine).read().strip() + "`", ""]

    f1 = sorted(glob.glob(os.path.join(out, "fig1-*.json")))
    if f1:
        md += ["## Fig. 1: compaction policies (buffer 1/40 of the data)", "",
               "Plot: `fig1-series.svg` (sliding-window throughput).", "",
               "| policy | puts/s (whole ingest) | window mean / max puts/s | write amplification | compactions | sorted runs at the end |",
               "|---|---:|---:|---:|---:|---:|"]
        for path in f1:
            s = load(path)
            name = os.path.basename(path)[len("fig1-"):-len(".json")]
            mean, peak = series_peak(path[:-len(".json")] + ".series.csv")
            puts = s["writes"]
            md.append(f"| {name} | {puts / s['ingest_seconds']:,.0f} | {mean:,.0f} / {peak:,.0f} | "
                      f"{s['write_amplification']:.2f} | {s['compactions']} | {s['sorted_runs']} |")
        md.append("")

    logs = sorted(glob.glob(os.path.join(out, "fig1*-*leveled*.merges.log")))
    if logs:
        md += ["### Fig. 1: where leveled and lazy-leveled write (`*.merges.log`, `*.stats.txt`)", "",
               "A fold merges a level's runs into one run of the same level; a push merges runs "
               "into the level below. Bytes in MB; WA is per flushed byte.", "",
               "| run | levels | flushed | folds | fold MB (WA) | largest level-0 run folded | pushes out of level 0 | flushed MB per such push | deeper pushes | push MB (WA) | write amplification |",
               "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for path in logs:
            name = os.path.basename(path)[:-len(".merges.log")]
            s = load(path[:-len(".merges.log")] + ".json")
            flushed = s["flush_bytes_written"]
            folds, pushes = [], []
            for line in open(path):
                m = re.search(r"inputs=\[(.*?)\] output_level=(\d+) .*written=(\d+)", line)
                if not m:
                    continue
                levels = {int(l) for l in re.findall(r"L(\d+):", m.group(1))}
                out_level, written = int(m.group(2)), int(m.group(3))
                if min(levels) < out_level:
                    pushes.append((min(levels), written))
                else:
                    folds.append((out_level, written))
            fold_mb = sum(w for _, w in folds) / 1e6
            push_mb = sum(w for _, w in pushes) / 1e6
            largest = max((w for l, w in folds if l == 0), default=0) / 1e6
            from_l0 = sum(1 for l, _ in pushes if l == 0)
            deeper = len(pushes) - from_l0
            per_push = flushed / from_l0 / 1e6 if from_l0 else 0.0
            depth = sum(1 for l in s["levels"] if l["runs"])
            md.append(f"| {name} | {depth} | {flushed / 1e6:.1f} | {len(folds)} | {fold_mb:,.1f} ({fold_mb * 1e6 / flushed:.2f}) | "
                      f"{largest:.1f} | {from_l0} | {per_push:.2f} | {deeper} | {push_mb:,.1f} ({push_mb * 1e6 / flushed:.2f}) | "
                      f"{s['write_amplification']:.2f} |")
        md.append("")

    f2 = sorted(glob.glob(os.path.join(out, "fig2-*.json")),
                key=lambda p: int(re.search(r"buffer-(\d+)", p).group(1)))
    if f2:
        md += ["## Fig. 2: buffer size (tiered, T = 10)", "",
               "Plot: `fig2-series.svg` (sliding-window throughput).", "",
               "| buffer | puts/s (whole ingest) | window mean / max puts/s (after the first 10%) | write amplification | settled s |",
               "|---|---:|---:|---:|---:|"]
        for path in f2:
            s = load(path)
            b = int(re.search(r"buffer-(\d+)", path).group(1))
            mean, peak = series_peak(path[:-len(".json")] + ".series.csv")
            md.append(f"| {b / 2**20:g} MiB | {s['writes'] / s['ingest_seconds']:,.0f} | "
                      f"{mean:,.0f} / {peak:,.0f} | {s['write_amplification']:.2f} | {s['settled_seconds']:.1f} |")
        md += ["", "Seed 004: 1 billion puts in 13 min 49.51 s (1 MiB, 1.21M puts/s) to 17 min 16.74 s "
               "(0.96M puts/s); the 1 MiB buffer peaked at 1,266,611 puts/s between 400M and 500M puts; "
               "the small buffers ran about 2.5x faster than the 256 MiB one.", ""]

    f4 = [os.path.join(out, f"fig4-{kind}T{t}.csv") for kind in ("", "short-") for t in (10, 2)]
    f4 = [p for p in f4 if os.path.exists(p)]
    if f4:
        md += ["## Fig. 4: range queries on a thread pool (tiered)", "",
               "Plots: `fig4-throughput.svg`, `fig4-cpu.svg`; 18% of the keys per range "
               "(the seed's mean), and 0.1% (`short`).", "",
               "| ranges | fanout | levels / runs | seek µs | scan threads | ranges/s | speedup | querying thread CPU ms/range | pool CPU ms/range | seeks/range | entries | load (1 min) |",
               "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for path in f4:
            kind = "0.1%" if "short" in os.path.basename(path) else "18%"
            rows = list(csv.DictReader(open(path)))
            base = {}
            for r in rows:
                seek, n = int(r["seek_us"]), int(r["threads"])
                rate = float(r["ranges_per_sec"])
                base.setdefault(seek, rate)
                ranges = max(int(r["ranges"]), 1)
                thread_cpu, process_cpu = float(r["query_thread_cpu_s"]), float(r["process_cpu_s"])
                t = r["spec"].split("T=")[-1]
                md.append(f"| {kind} | {t} | {r['levels']} / {r['runs']} | {seek} | {n} | {rate:,.2f} | "
                          f"{rate / base[seek]:.2f} | {1e3 * thread_cpu / ranges:.1f} | "
                          f"{1e3 * max(process_cpu - thread_cpu, 0) / ranges:.1f} | "
                          f"{int(r['seeks']) / ranges:.1f} | {int(r['entries']):,} | {r['load1']} |")
        md += ["", "Seed 004: 1M puts and 100 ranges (17,989,964 pairs returned), a 16 KiB buffer; "
               "fanout 10 gave 3 levels, fanout 2 gave 8; the fastest pool had 3 threads, then 4, 2 and 5, "
               "with 1 thread slowest; the skinny tree (fanout 2) gained more.", ""]

    f5 = sorted(glob.glob(os.path.join(out, "fig5-*.cachegrind.txt")))
    if f5:
        md += ["## Fig. 5: skewed gets (cachegrind)", "",
               "| policy | ops/s (no cachegrind) | D1 data misses | LL data misses | data refs | block-cache misses | blocks read |",
               "|---|---:|---:|---:|---:|---:|---:|"]
        for path in f5:
            name = os.path.basename(path)[len("fig5-"):-len(".cachegrind.txt")]
            base = path[:-len(".cachegrind.txt")]
            cg = cachegrind(path)
            s = load(base + ".json")
            secs = load(base + ".time.json")["seconds"]
            ops = s["writes"] + s["gets"]
            misses = sum(s["cache_misses"].values())
            md.append(f"| {name} | {ops / secs:,.0f} | {cg['D1'] or 0:,} | {cg['LLd'] or 0:,} | "
                      f"{cg['D'] or 0:,} | {misses:,} | {s['blocks_read']:,} |")
        md += ["", "Seed 004: leveled was faster but had many more cache misses than tiered (cachegrind).", ""]

    f6 = sorted(glob.glob(os.path.join(out, "fig6-r*-*.time.json")))
    if f6:
        md += ["## Fig. 6: Monkey against uniform Bloom bits (same memory)", "",
               "| buffer / data | filters | levels (bits per key) | filter false positives | false positives per missing get | blocks read per get | gets/s (with the puts) |",
               "|---|---|---|---:|---:|---:|---:|"]
        for path in f6:
            base = path[:-len(".time.json")]
            ratio, bloom = re.search(r"fig6-r(\d+)-(\w+)", base).groups()
            s = load(base + ".json")
            secs = load(path)["seconds"]
            bits = ", ".join(f"{l['bloom_bits_per_key']:.1f}" for l in s["levels"] if l["entries"])
            missing = max(s["get_misses"], 1)
            md.append(f"| 1/{ratio} | {bloom} | {bits} | {s['bloom_false_positives']:,} | "
                      f"{s['bloom_false_positives'] / missing:.4f} | {s['get_blocks_read'] / max(s['gets'], 1):.3f} | "
                      f"{(s['writes'] + s['gets']) / secs:,.0f} |")
        md += ["", "Seed 004: Monkey had a notable effect with the 1 GiB database and the 256 MiB buffer.", ""]

    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main(sys.argv[1])
