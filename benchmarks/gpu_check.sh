#!/usr/bin/env bash
# The torch adapter on one device, in one call of under 8 minutes (issue 31, "GPU when
# lent"; docs/torch.md, "On a GPU"): which Python and torch it uses, the device, then
#
#   1. python -m properties verify --adapter adapters/torch --profile ci   (timed)
#   2. benchmarks/splice_bench.py                                           (timed)
#
# on that device, each under a `timeout`, and a summary block of the figures at the end.
# It installs nothing: on a bare GPU machine, use a Python that has torch, numpy and
# Hypothesis (see docs/torch.md for bringing Hypothesis along in .gpu-site/).
#
#   bash benchmarks/gpu_check.sh                 # cuda when torch sees one, else cpu
#   DEVICE=cpu bash benchmarks/gpu_check.sh      # any MMSPEC_TORCH_DEVICE value: cuda:1, ...
#   make gpu-check                               # the same, after `make torch`
#
# Environment (all optional):
#   DEVICE          cpu, cuda, cuda:N (default: cuda when available, else cpu); passed to
#                   the adapter as MMSPEC_TORCH_DEVICE
#   PYTHON          the interpreter (default: .venv/bin/python if it exists, else python3)
#   PROFILE         the Hypothesis profile of verify (default: ci)
#   BUDGET_S        the whole run's wall-clock limit in seconds (default: 450)
#   BENCH_TIMEOUT_S the benchmark's limit (default: 150); verify gets what is left of
#                   BUDGET_S after the probe, less this
#   BENCH_ARGS      extra arguments for splice_bench.py (default: none, its own defaults)
#   GPU_CHECK_OUT   where the verify report, the benchmark's JSON and the logs go
#                   (default: $OUT when set, as on the device machine, else reports/gpu-check)
#
# Exit status: 0 when verify passes and the benchmark completes; verify's status (or 124
# on its timeout) when it does not; the benchmark's otherwise; 2 when the Python cannot
# run the check at all.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# A PYTHON or GPU_CHECK_OUT given as a relative path is relative to where it was started.
if [[ -n ${PYTHON:-} && $PYTHON == */* && $PYTHON != /* ]]; then PYTHON="$PWD/$PYTHON"; fi
if [[ -n ${GPU_CHECK_OUT:-} && $GPU_CHECK_OUT != /* ]]; then GPU_CHECK_OUT="$PWD/$GPU_CHECK_OUT"; fi
cd "$ROOT"

START=$(date +%s)
BUDGET_S=${BUDGET_S:-450}
BENCH_TIMEOUT_S=${BENCH_TIMEOUT_S:-150}
PROBE_TIMEOUT_S=60
PROFILE=${PROFILE:-ci}
BENCH_ARGS=${BENCH_ARGS:-}
if [[ -z ${PYTHON:-} ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
OUT_DIR=${GPU_CHECK_OUT:-${OUT:-reports/gpu-check}}
mkdir -p "$OUT_DIR"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"

# The checkout's import roots, and Hypothesis brought along in .gpu-site/ when present.
PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
if [[ -d .gpu-site ]]; then PYTHONPATH="$PYTHONPATH:$ROOT/.gpu-site"; fi
export PYTHONPATH

elapsed() { echo $(($(date +%s) - START)); }
# Wall seconds with a tenth, from two `date +%s%N` readings (bash arithmetic: no awk).
seconds_between() {
    local tenths=$((($2 - $1) / 100000000))
    echo "$((tenths / 10)).$((tenths % 10))"
}

echo "== gpu_check: $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(uname -n)"

# --- which torch, which device ---------------------------------------------------------
# The adapter's own choice (adapters/torch/device.py: $MMSPEC_TORCH_DEVICE, else cuda when
# available, else cpu), so that the device printed here is the one verify will use.
DEVICE=${DEVICE:-${MMSPEC_TORCH_DEVICE:-}}
if [[ -n $DEVICE ]]; then export MMSPEC_TORCH_DEVICE="$DEVICE"; else unset MMSPEC_TORCH_DEVICE; fi
probe_status=0
probe=$(timeout -k 5 "$PROBE_TIMEOUT_S" "$PYTHON" - <<'EOF' 2>&1
import importlib.util
import sys

print("python:", sys.executable, sys.version.split()[0])
try:
    import torch
except ImportError as error:
    raise SystemExit(f"torch cannot be imported by this Python: {error}") from None
available = torch.cuda.is_available()
print("torch:", torch.__version__, "| cuda available:", available, "|",
      torch.cuda.get_device_name() if available else "no GPU")
print("torch at:", torch.__file__.rsplit("/", 1)[0])
missing = [m for m in ("numpy", "hypothesis") if importlib.util.find_spec(m) is None]
if missing:
    raise SystemExit(f"missing: {' '.join(missing)} (docs/torch.md, 'On a GPU')")
try:  # found is not enough: Hypothesis' wheel holds a compiled module for one Python
    import hypothesis
except ImportError as error:
    raise SystemExit(f"hypothesis at {importlib.util.find_spec('hypothesis').origin} cannot be "
                     f"imported: {error} (docs/torch.md, 'On a GPU')") from None
print("hypothesis:", hypothesis.__version__, "at", hypothesis.__file__.rsplit("/", 2)[0])
try:
    from adapters.torch.device import DEVICE
except Exception as error:  # the adapter's own message, e.g. cuda asked for, none there
    raise SystemExit(f"the adapter cannot start: {type(error).__name__}: {error}") from None
print("device:", DEVICE)
EOF
) || probe_status=$?
echo "$probe"
if [[ $probe_status -ne 0 ]]; then
    echo "gpu_check: $PYTHON cannot run the check (status $probe_status)" >&2
    exit 2
fi
PYTHON_LINE=$(echo "$probe" | grep '^python:')
TORCH_LINE=$(echo "$probe" | grep '^torch:')
DEVICE=$(echo "$probe" | sed -n 's/^device: //p')
export MMSPEC_TORCH_DEVICE="$DEVICE"
if command -v nvidia-smi > /dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
fi
echo "output: $OUT_DIR"

# --- 1. the properties -----------------------------------------------------------------
VERIFY_TIMEOUT_S=$((BUDGET_S - $(elapsed) - BENCH_TIMEOUT_S - 10))
if [[ $VERIFY_TIMEOUT_S -lt 30 ]]; then VERIFY_TIMEOUT_S=30; fi
echo
echo "== verify --adapter adapters/torch --profile $PROFILE (timeout ${VERIFY_TIMEOUT_S} s)"
verify_status=0
began=$(date +%s%N)
timeout -k 5 "$VERIFY_TIMEOUT_S" "$PYTHON" -m properties verify --adapter adapters/torch \
    --profile "$PROFILE" --save-report "$OUT_DIR/verify.json" 2>&1 \
    | tee "$OUT_DIR/verify.log" || verify_status=$?
VERIFY_S=$(seconds_between "$began" "$(date +%s%N)")
VERIFY_LINE=$(grep -E '^(OK|FAILED): ' "$OUT_DIR/verify.log" | tail -n 1 || true)
if [[ -z $VERIFY_LINE ]]; then  # cut short: how far it got, from the progress lines
    log="$OUT_DIR/verify.log"
    finished=$(grep -cE '^\[[0-9]+/[0-9]+\] .* s\)$' "$log" || true)
    last=$(grep -oE '^\[[0-9]+/[0-9]+\] [A-Za-z0-9_]+' "$log" | tail -n 1 || true)
    VERIFY_LINE="no verdict: ${finished:-0} properties finished; the last started: ${last:-none}"
fi

# --- 2. the benchmark ------------------------------------------------------------------
echo
echo "== benchmarks/splice_bench.py $BENCH_ARGS (timeout ${BENCH_TIMEOUT_S} s)"
bench_status=0
began=$(date +%s%N)
# shellcheck disable=SC2086 # BENCH_ARGS is a list of words on purpose
timeout -k 5 "$BENCH_TIMEOUT_S" "$PYTHON" benchmarks/splice_bench.py $BENCH_ARGS \
    --json "$OUT_DIR/splice_bench.json" 2>&1 | tee "$OUT_DIR/splice_bench.log" \
    || bench_status=$?
BENCH_S=$(seconds_between "$began" "$(date +%s%N)")

# --- the figures -----------------------------------------------------------------------
echo
echo "== summary"
echo "date:    $(date -u '+%Y-%m-%d')"
echo "python:  ${PYTHON_LINE#python: }"
echo "torch:   ${TORCH_LINE#torch: }"
echo "device:  $DEVICE (MMSPEC_TORCH_DEVICE)"
echo "verify:  status $verify_status, ${VERIFY_S} s wall: $VERIFY_LINE"
if [[ $bench_status -eq 0 && -f $OUT_DIR/splice_bench.json ]]; then
    echo "bench:   status 0, ${BENCH_S} s wall"
    "$PYTHON" - "$OUT_DIR/splice_bench.json" <<'EOF'
import json
import sys

figures = json.load(open(sys.argv[1], encoding="utf-8"))
for r in figures["splice"]:
    print(f"  splice {r['dtype']:4} {r['rows']:6} x {r['hidden']}: torch {r['torch_gbps']:8.2f} GB/s"
          f"  ref {r['reference_gbps']:7.2f}  ceiling {r['ceiling_gbps']:8.2f}"
          f"  torch/ref {r['torch_over_reference']:6.2f}  torch/ceil {r['torch_over_ceiling']:5.2f}")
c = figures["cache"]
print(f"  cache {c['rows']} x {c['hidden']}: re-encode {c['encode_ms']:.3f} ms, hit "
      f"{c['hit_ms']:.3f} ms, re-encode/hit {c['encode_over_hit']:.1f}")
EOF
else
    echo "bench:   status $bench_status, ${BENCH_S} s wall (no figures)"
fi
echo "total:   $(elapsed) s wall (budget ${BUDGET_S} s)"

if [[ $verify_status -ne 0 ]]; then exit "$verify_status"; fi
exit "$bench_status"
