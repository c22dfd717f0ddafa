#!/bin/bash
# sm90ab.sh — step "sm90ab" of scripts/device_session.sh (issue 4): A/B timings of the Hopper
# kernel's variants with bench/sm90_dev, the '*' row being the heuristic's choice. What it runs is
# SM90AB_RUNS, ';'-separated sm90_dev argument lists, each logged to its own file (default below:
# large M with every configuration, small M with the splits swept). When build-alt/lib/libw8a8.a
# exists (the library built a second way, e.g. `make BUILD=build-alt NVCCEXTRA=-DW8A8_SM90_EPILOGUE_V1
# lib` in the background of the same device call), SM90AB_ALT_RUNS run against both libraries.
# Env from device_session.sh: L, BUILD, LEFT_S. Last line: summary.
set -u
: "${L:?}" "${BUILD:?}"
LEFT_S=${LEFT_S:-300}
. "$(dirname "$0")/common.sh"
RUNS=${SM90AB_RUNS:-"-a -d fp8 -s 8b-qkv,70b-qkv,8b-gateup,70b-o -m 1024,4096,8192;-d fp8 -m 1,16,32,64;-d fp8 -m 1,16 -k 1,2,3,4,6,8;-a -d fp8 -m 32,64 -k 1,2,4"}
ALT_RUNS=${SM90AB_ALT_RUNS:-"-d fp8 -m 1,16,32,64;-d int8 -m 1,16,32,64"}
# Disassembly check of every sm90 kernel: wgmma count (QGMMA / IGMMA) and local-memory traffic.
O="$BUILD/obj/src/cuda/sm90_gemm.cu.o"
if command -v cuobjdump >/dev/null && [ -f "$O" ]; then
  cuobjdump -sass "$O" | awk '/Function :/ {f = $3} /QGMMA/ {q[f]++} /IGMMA/ {i[f]++} /LDL|STL/ {l[f]++}
    END {for (k in q) print "QGMMA", q[k], "LDL/STL", l[k] + 0, k; for (k in i) print "IGMMA", i[k], "LDL/STL", l[k] + 0, k}' \
    >"$L/sm90ab-sass.txt" 2>&1
  # The token-tail twins against their plain kernels (scripts/sass_diff.py): how many instructions
  # differ per pair, and the fp8 128 x 128 promote pair's diff (session 8: the tail's code in every
  # kernel slowed that tile 13-15%; in the twin only the producer should differ).
  cuobjdump -sass "$O" >"$BUILD/sm90.sass" 2>/dev/null &&
    python3 scripts/sass_diff.py "$BUILD/sm90.sass" --pairs >"$L/sm90ab-sass-pairs.txt" 2>&1 &&
    python3 scripts/sass_diff.py "$BUILD/sm90.sass" Li128ELi6ELb0ELb0ELb1ELb0ELi1ELi1ELb0ELb0ELb0EEv \
      Li128ELi6ELb0ELb0ELb1ELb0ELi1ELi1ELb0ELb1ELb0EEv >"$L/sm90ab-sass-fp8-128-tail.txt" 2>&1
fi
need_sm90_dev sm90ab
# Runs with -T need kernels that carry the timeline (compiled out of the normal build since session 7):
# the library a second time with -DW8A8_SM90_TIMELINE in build-tl (~40 s), and sm90_dev against it.
DEV_TL=""
tl_note=""
case " ${RUNS//;/ ; } " in
  *" -T "*)
    if timeout -k 5 "$(cap 150)" make BUILD=build-tl CUDA_ARCHS=90a NVCCEXTRA=-DW8A8_SM90_TIMELINE NVCCWERROR= -j"$(nproc)" lib \
        >"$L/sm90ab-tl-build.txt" 2>&1 && build_sm90_dev build-tl/lib/libw8a8.a build-tl/sm90_dev >>"$L/sm90ab-tl-build.txt" 2>&1; then
      DEV_TL=build-tl/sm90_dev
    else
      tl_note="; the timeline library did not build (sm90ab-tl-build.txt): -T runs timed only"
    fi
    ;;
esac
i=0
IFS=';' read -r -a runs <<<"$RUNS"
for r in "${runs[@]}"; do
  i=$((i + 1))
  echo "# sm90_dev $r" >"$L/sm90ab-run$i.txt"
  d="$DEV"
  case " $r " in *" -T "*) [ -n "$DEV_TL" ] && d="$DEV_TL" ;; esac
  timeout -k 5 "$(cap 120)" "$d" $r >>"$L/sm90ab-run$i.txt" 2>&1
done
res="$i runs$tl_note"
if [ -f build-alt/lib/libw8a8.a ]; then
  ALT=build-alt/bin/sm90_dev
  mkdir -p build-alt/bin
  if build_sm90_dev build-alt/lib/libw8a8.a "$ALT" >>"$L/sm90ab-build.txt" 2>&1; then
    j=0
    IFS=';' read -r -a alts <<<"$ALT_RUNS"
    for r in "${alts[@]}"; do
      j=$((j + 1))
      echo "# sm90_dev $r (default build)" >"$L/sm90ab-alt$j-base.txt"
      timeout -k 5 "$(cap 60)" "$DEV" $r >>"$L/sm90ab-alt$j-base.txt" 2>&1
      echo "# sm90_dev $r (build-alt)" >"$L/sm90ab-alt$j-alt.txt"
      timeout -k 5 "$(cap 60)" "$ALT" $r >>"$L/sm90ab-alt$j-alt.txt" 2>&1
    done
    res="$res; $j A/B runs against build-alt"
  else
    res="$res; build-alt's sm90_dev did not build"
  fi
fi
echo "sm90ab: $res (logs/sm90ab-*.txt)"
