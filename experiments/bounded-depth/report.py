"""Side-by-side tables of seed 003 Table I (paper), the model simulator and
the engine, from the CSVs written by run.sh. Usage:
    python3 report.py paper-table1.csv results/table1-sim.csv results/table1-engine.csv
"""
import csv
import os
import sys


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def main():
    paper = {(r["policy"], int(r["k"]), int(r["n"])): r for r in rows(sys.argv[1])}
    sim = {}
    for r in rows(sys.argv[2]):
        sim[(r["flush_sizes"], r["policy"], int(r["k"]), int(r["n"]))] = r
    engine = rows(sys.argv[3]) if len(sys.argv) > 3 else []
    lockstep = rows(sys.argv[4]) if len(sys.argv) > 4 and os.path.exists(sys.argv[4]) else []

    ns = [1000, 3000, 5000, 10000, 20000]
    keys = sorted({(p, k) for (p, k, _) in paper})

    def table(title, paper_col, sim_col):
        print(f"## Table I: {title} (paper / model, unit flushes / model, flushes uniform in [0.75, 1.25])\n")
        print("| policy | k | " + " | ".join(f"n={n}" for n in ns) + " |")
        print("|---|---|" + "---|" * len(ns))
        for p, k in keys:
            cells = []
            for n in ns:
                pr = paper.get((p, k, n))
                c = sim.get(("constant", p, k, n))
                u = sim.get(("uniform", p, k, n))
                published = pr[paper_col] if pr else "N/A"
                cells.append(
                    f"{published} / {float(c[sim_col]):.2f} / {float(u[sim_col]):.2f}"
                    if c and u
                    else published
                )
            print(f"| {p} | {k} | " + " | ".join(cells) + " |")
        print()

    table("write amplification", "write_amplification", "write_amplification")
    table("average SSTable count", "sstable_count", "avg_sorted_runs")
    residuals(paper, sim)

    if lockstep:
        print("## Engine in lockstep with the model (each flush waits for the previous merges), n = 3000\n")
        print("| policy | k | engine WA | model WA (same flush sizes) | paper WA | engine avg runs at flush "
              "| model avg runs after merges | paper count | diverged flushes |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in lockstep:
            p, k = r["policy"], int(r["k"])
            pr = paper.get((p, k, 3000))
            print(
                f"| {p} | {k} | {float(r['write_amplification']):.2f} "
                f"| {float(r['model_write_amplification']):.2f} | {pr['write_amplification']} "
                f"| {float(r['avg_sorted_runs']):.2f} | {float(r['model_avg_sorted_runs']):.2f} "
                f"| {pr['sstable_count']} | {r['diverged_flushes']} |"
            )

    if not engine:
        return
    print("\n## Engine flat out (lamina bench fillseq) vs model vs paper\n")
    print("The model column is the simulator at the nearest tabulated n (paper: AsterixDB at n=3000).\n")
    print("| policy | k | engine flushes | engine WA | model WA (n=3000) | paper WA (n=3000) "
          "| engine avg runs at flush | model avg runs (n=3000) | paper count (n=3000) "
          "| overshoot flushes (max excess) | seconds |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in engine:
        p, k = r["policy"], int(r["k"])
        c = sim.get(("constant", p, k, 3000))
        pr = paper.get((p, k, 3000))
        print(
            f"| {p} | {k} | {r['flushes']} | {float(r['write_amplification']):.2f} "
            f"| {float(c['write_amplification']):.2f} | {pr['write_amplification']} "
            f"| {float(r['avg_sorted_runs']):.2f} | {float(c['avg_sorted_runs']):.2f} | {pr['sstable_count']} "
            f"| {r['overshoot_flushes']} ({r['max_overshoot']}) | {r['seconds']} |"
        )


def residuals(paper, sim):
    """Per policy: the model's write amplification against the paper's
    cells, relative error (model / paper - 1) as mean, lowest and highest,
    for unit flushes and for flushes uniform in [0.75, 1.25]."""
    print("## Residual per policy: model write amplification / paper - 1\n")
    print("| policy | table | cells | unit flushes: mean (range) | uniform flushes: mean (range) |")
    print("|---|---|---:|---|---|")
    for p in sorted({p for (p, _, _) in paper}):
        cols = []
        cells = 0
        for sizes in ("constant", "uniform"):
            errs = []
            for (pp, k, n), pr in paper.items():
                s = sim.get((sizes, pp, k, n))
                if pp != p or s is None:
                    continue
                errs.append(float(s["write_amplification"]) / float(pr["write_amplification"]) - 1)
            cells = len(errs)
            cols.append(
                f"{100 * sum(errs) / len(errs):+.1f}% ({100 * min(errs):+.1f}% … {100 * max(errs):+.1f}%)"
                if errs
                else "—"
            )
        table = "A.2 (seed 000)" if p in ("tiered", "leveled") else "I (seed 003)"
        print(f"| {p} | {table} | {cells} | {cols[0]} | {cols[1]} |")
    print()


if __name__ == "__main__":
    main()
