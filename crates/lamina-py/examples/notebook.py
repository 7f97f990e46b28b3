# %% [markdown]
# # Throughput vs write buffer size, by compaction strategy
#
# A seed-004-style experiment from Python: how does the write buffer
# (memtable) size change throughput and write amplification under
# leveling, tiering and binomial compaction? Each point is one fresh
# database running the same workload (`lamina.experiment`, the engine of
# `lamina experiment SPEC.toml`); the model simulator (`lamina.sim`) then
# gives each strategy's write amplification in theory.
#
# A percent-cell script: open it in Jupyter (jupytext) or VS Code, or run
# it whole with `python notebook.py` (the figure goes to
# `buffer-vs-strategy.png`, or `$LAMINA_NOTEBOOK_OUT`). The default run
# takes about a minute on two cores; `LAMINA_NOTEBOOK_QUICK=1` shrinks it
# to seconds (the tests run it so).

# %%
import os
import tempfile

import matplotlib

if "MPLBACKEND" not in os.environ and __name__ == "__main__":
    matplotlib.use("Agg")  # run as a script: draw to a file
import matplotlib.pyplot as plt

import lamina

QUICK = os.environ.get("LAMINA_NOTEBOOK_QUICK") == "1"
OUT = os.environ.get("LAMINA_NOTEBOOK_OUT", "buffer-vs-strategy.png")

STRATEGIES = ["leveling", "tiered:b=4", "binomial:k=4"]
BUFFERS = [64 << 10, 256 << 10] if QUICK else [128 << 10, 512 << 10, 2 << 20, 8 << 20]
RECORDS, OPERATIONS = (2_000, 2_000) if QUICK else (400_000, 400_000)

# %% [markdown]
# ## The experiment
#
# YCSB A (50 % reads, 50 % updates, Zipfian) after loading the records;
# one run per strategy and buffer size.

# %%
spec = f"""
title = "throughput vs buffer size"
strategies = {STRATEGIES!r}
seed = 1

[engine]
block_cache_bytes = 8388608
size_ratio = 10

[grid]
write_buffer_size = {BUFFERS!r}

[[workload]]
name = "ycsb-a"
ycsb = "a"
records = {RECORDS}
operations = {OPERATIONS}
"""
with tempfile.TemporaryDirectory() as work:
    rows = lamina.experiment(spec, work_dir=work)

for r in rows:
    print(
        f"{r['strategy']:>14} buffer {r['write_buffer_size'] >> 10:>5} KiB: "
        f"{r['ops_per_sec']:>10.0f} ops/s, load {r['load_ops_per_sec']:>10.0f} ops/s, "
        f"write amp {r['write_amplification']:.2f}"
    )

# %% [markdown]
# Rows are plain dicts, so `pandas.DataFrame(rows)` works as well.
#
# ## The model
#
# The simulator runs the same policy objects over a model tree: write
# amplification after as many flushes as the load wrote, per buffer size.

# %%
def model_wa(strategy, buffer, ingested):
    flushes = max(1, ingested // buffer)
    return lamina.sim(strategy, flushes, flush_size=buffer)[-1]["write_amplification"]


model = {
    (r["strategy"], r["write_buffer_size"]): model_wa(
        r["strategy"], r["write_buffer_size"], r["bytes_ingested"]
    )
    for r in rows
}

# %% [markdown]
# ## Plots

# %%
fig, (ax_tp, ax_wa) = plt.subplots(1, 2, figsize=(11, 4.2))
for strategy in STRATEGIES:
    mine = sorted((r for r in rows if r["strategy"] == strategy), key=lambda r: r["write_buffer_size"])
    xs = [r["write_buffer_size"] >> 10 for r in mine]
    (line,) = ax_tp.plot(xs, [r["ops_per_sec"] for r in mine], marker="o", label=strategy)
    ax_wa.plot(xs, [r["write_amplification"] for r in mine], marker="o", color=line.get_color(), label=strategy)
    ax_wa.plot(
        xs,
        [model[(strategy, r["write_buffer_size"])] for r in mine],
        linestyle="--",
        color=line.get_color(),
        label=f"{strategy} (model)",
    )
for ax in (ax_tp, ax_wa):
    ax.set_xscale("log", base=2)
    ax.set_xticks([b >> 10 for b in BUFFERS], [str(b >> 10) for b in BUFFERS])
    ax.set_xlabel("write buffer (KiB)")
    ax.grid(True, alpha=0.3)
ax_tp.set_ylabel("YCSB A throughput (ops/s)")
ax_wa.set_ylabel("write amplification")
ax_tp.legend()
ax_wa.legend(fontsize="small")
fig.suptitle(f"lamina: {RECORDS} records, {OPERATIONS} YCSB A operations")
fig.tight_layout()
fig.savefig(OUT, dpi=110)
print(f"figure: {OUT}")
