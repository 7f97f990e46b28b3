#!/usr/bin/env bash
# Sweeps lsbm's freeze, keep, unit and file size at the quick scale
# (run.sh --quick: 20 MB, levels of 1.28/12.8/128 MB, RangeHot point reads,
# 10 ms per seeking read). blsm runs once per file size and unit (BASE
# names the setting whose blsm run a setting compares with: the
# compaction bytes lsbm must match). Each setting's runs go to
# experiments/lsbm/results-sweep/NAME/ (or $OUT/NAME), and the table of
# every setting to results-sweep/sweep.md. A setting whose summary.json
# exists is not run again unless REDO=1.
# Usage: experiments/lsbm/sweep.sh   (about 4 minutes a run, most of it
# the load; LONG= seconds recorded, 60 by default)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-experiments/lsbm/results-sweep}
export LONG=${LONG:-60}
# NAME FREEZE KEEP UNIT FILE SYSTEMS BASE
SETTINGS=${SETTINGS:-"
default 0.9 0.8 1 131072 blsm,lsbm default
unit8 0.9 0.8 8 16384 blsm,lsbm unit8
nofreeze 2 0.8 1 131072 lsbm default
keep0.5 0.9 0.5 1 131072 lsbm default
freeze0.5 0.5 0.8 1 131072 lsbm default
"}
mkdir -p "$OUT"
while read -r name freeze keep unit file systems base; do
    [[ -z "$name" ]] && continue
    if [[ -f "$OUT/$name/summary.json" && "${REDO:-0}" != 1 ]]; then
        continue
    fi
    echo "== setting $name" >&2
    OUT="$OUT/$name" FREEZE=$freeze KEEP=$keep UNIT=$unit FILE=$file \
        SYSTEMS=$systems DISTS=rangehot experiments/lsbm/run.sh --quick > /dev/null
done <<< "$SETTINGS"
python3 - "$OUT" "$SETTINGS" <<'PY' | tee "$OUT/sweep.md"
import json, os, sys
out, settings = sys.argv[1], sys.argv[2]
print("| setting | freeze | keep | unit | file | hit ratio blsm / lsbm (all lookups) | lowest 10 s blsm / lsbm | lsbm buffer MB mean | B_1 units live / frozen | B_2 units live / frozen | B_3 units live / frozen | lsbm compaction bytes / blsm |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for line in settings.strip().splitlines():
    name, freeze, keep, unit, file, systems, base = line.split()
    if not os.path.exists(f"{out}/{name}/summary.json"):
        continue
    l = json.load(open(f"{out}/{name}/summary.json"))["lsbm"]["rangehot"]
    b = json.load(open(f"{out}/{base}/summary.json"))["blsm"]["rangehot"]
    units = lambda i: f'{l.get(f"b{i}_appended_live", 0):.0f} / {l.get(f"b{i}_appended_frozen", 0):.0f}'
    print(f'| {name} | {freeze} | {keep} | {unit} | {int(file) // 1024} KiB '
          f'| {b.get("hit_ratio_overall", 0):.3f} / {l.get("hit_ratio_overall", 0):.3f} '
          f'| {b.get("hit_ratio_lowest_10s", 0):.3f} / {l.get("hit_ratio_lowest_10s", 0):.3f} '
          f'| {l["buffer_bytes_mean"] / 1e6:.1f} | {units(1)} | {units(2)} | {units(3)} '
          f'| {l["compaction_bytes_written"] / max(b["compaction_bytes_written"], 1):.2f} |')
PY
