#!/bin/bash
# ncusrc.sh — step "ncusrc" of scripts/device_session.sh: WHERE the sm90 kernel's warps stall, per
# SASS instruction (issue 4), for two large-M kernels and one small-M (decode) one. ncu.sh (session 3) showed the int8 128x256 kernel at 56% of the
# tensor pipe with "L1TEX scoreboard" the top stall; this samples the stalls per instruction and
# prints the 30 instructions with the most samples (with their SASS) for one int8 and one fp8
# large-M kernel. Env from device_session.sh: L, BUILD, LEFT_S. About 90 s.
# NCUSRC_SPECS="dtype shape M [config]; ..." replaces the three default kernels (a config name
# profiles that configuration through sm90_dev -c instead of the heuristic's).
set -u
: "${L:?}" "${BUILD:?}"
. "$(dirname "$0")/common.sh"
need_sm90_dev ncusrc
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
res=""
SPECS=${NCUSRC_SPECS:-"int8 8b-qkv 8192; fp8 8b-qkv 8192; fp8 70b-o 16"}
IFS=';' read -ra SPECA <<<"$SPECS"
for spec in "${SPECA[@]}"; do
  set -- $spec
  [ $# -ge 3 ] || continue
  name="$1-$2-$3${4:+-$4}"
  cfg=()
  [ $# -ge 4 ] && cfg=(-c "$4")
  rep="$L/ncusrc-$name"
  timeout -k 5 60 "$NCU" --kernel-name regex:'sm90_(gemm|skinny)_kernel' --launch-skip 3 --launch-count 1 \
    --section SourceCounters --section WarpStateStats --import-source no -o "$rep" -f \
    "$DEV" -d "$1" -s "$2" -m "$3" "${cfg[@]}" >"$L/ncusrc-$name-run.txt" 2>&1
  rc=$?
  timeout -k 5 60 "$NCU" -i "$rep.ncu-rep" --page source --csv --print-source sass >"$L/ncusrc-$name.csv" 2>&1
  timeout -k 5 30 "$NCU" -i "$rep.ncu-rep" --page details --print-details all >"$L/ncusrc-$name-details.txt" 2>&1
  python3 - "$L/ncusrc-$name.csv" >"$L/ncusrc-$name-top.txt" 2>&1 <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
hdr_i = next(i for i, r in enumerate(rows) if any("Warp Stall Sampling (All" in c for c in r))
hdr = rows[hdr_i]
col = next(i for i, c in enumerate(hdr) if "Warp Stall Sampling (All" in c)
src = next((i for i, c in enumerate(hdr) if c.strip() == "Source"), 1)
def num(x):
    try: return float(x.replace(",", ""))
    except: return 0.0
data = [r for r in rows[hdr_i + 1:] if len(r) > col]
tot = sum(num(r[col]) for r in data) or 1
print("columns:", " | ".join(hdr))
print(f"total samples {tot:.0f}")
for r in sorted(data, key=lambda r: -num(r[col]))[:30]:
    extra = [f"{hdr[i]}={r[i]}" for i in range(len(hdr)) if i not in (col, src) and "stall" in hdr[i].lower() and num(r[i]) > 0.05 * num(r[col])]
    print(f"{100*num(r[col])/tot:5.1f}%  {r[0]:>8}  {r[src][:90]}  {' '.join(extra)[:200]}")
PY
  res="$res $name:exit$rc"
done
echo "ncusrc:$res (logs/ncusrc-*-top.txt)"
