#!/bin/sh
# On a GPU node: runs every mode of ptdsim-calibrate from a bundle made by
# tools/pack-calibrate (the harness and its non-CUDA libraries, for a node
# without GLib or cJSON) over the sc21 shapes, then today's modes over the
# gpt3 and llama3 presets, and leaves the measurements, the logs, the plans
# and the driver's view of the GPU in OUTDIR (doc/calibration.md, "On a GPU
# node without build tools").
#
#   sh calibrate/run-all.sh [BUNDLE [OUTDIR [ptdsim-calibrate options...]]]
set -u
dir=${1:-calibrate-bundle}
out=${2:-calibration-out}
[ $# -gt 2 ] && shift 2 || set --
mkdir -p "$out"
# cuBLAS, cuBLASLt, the CUDA runtime, NCCL, cuDNN 9 and NVRTC (which cuDNN's
# runtime-compiled attention engines need): wherever this image keeps them
# (the toolkit's lib64, the system, or the Python wheels under /opt).
libs=$dir/lib
for name in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2 libcudnn.so.9 libnvrtc.so.13; do
  f=$(find /usr/local/cuda/lib64/ /usr/local/cuda/targets/ /usr/lib/x86_64-linux-gnu/ /usr/local/lib/ /opt/ \
    -name "$name" 2>/dev/null | head -1)
  if [ -n "$f" ]; then libs=$libs:$(dirname "$f"); else echo "run-all: $name not found" >&2; fi
done
export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "$gpus" -ge 1 ] || gpus=1
{ nvidia-smi; nvidia-smi -q -d CLOCK,POWER,PERFORMANCE; } >"$out/nvidia-smi.txt" 2>&1
ldd "$dir/ptdsim-calibrate" >"$out/ldd.txt" 2>&1
"$dir/ptdsim-calibrate" --dry-run --gpus "$gpus" "$@" >"$out/plan.txt" 2>&1
today=gemmlt,attention,membound,modern
for preset in gpt3 llama3; do
  "$dir/ptdsim-calibrate" --dry-run --gpus "$gpus" --mode $today --shapes $preset "$@" >"$out/plan-$preset.txt" 2>&1
done
"$dir/ptdsim-calibrate" --dry-run --gpus "$gpus" --mode overlap "$@" >"$out/plan-overlap.txt" 2>&1
start=$(date +%s)
# every mode (all): the 2021 ones, today's, the sustained loop and the
# overlap runs (beside an NCCL all-reduce too where there are two GPUs)
"$dir/ptdsim-calibrate" --keep-going -o "$out/calibration.json" "$@" >"$out/calibrate.log" 2>&1
rc=$?
echo "ptdsim-calibrate exited $rc after $(($(date +%s) - start)) s on $gpus GPU(s)" >>"$out/calibrate.log"
for preset in gpt3 llama3; do
  start=$(date +%s)
  "$dir/ptdsim-calibrate" --keep-going --mode $today --shapes $preset -o "$out/calibration-$preset.json" "$@" \
    >"$out/calibrate-$preset.log" 2>&1
  r=$?
  echo "ptdsim-calibrate --shapes $preset exited $r after $(($(date +%s) - start)) s" >>"$out/calibrate-$preset.log"
  [ $r -eq 0 ] || rc=$r
done
# Then the hand-written kernels, the cuBLASLt and cuDNN calls and both
# layers once more under compute-sanitizer's memcheck (where the runtime
# allows it), at a small shape so that it takes minutes.
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [ -n "$cs" ]; then
  timeout 600 "$cs" --tool memcheck --error-exitcode 3 "$dir/ptdsim-calibrate" \
    --mode kernels,layer,gemmlt,attention,membound,modern --shapes 512:8:256:2:2,512:8:256:2:2:4:1536:2048:llama \
    --warmup 1 --reps 2 -o /tmp/ptdsim-sanitized.json >"$out/sanitizer.txt" 2>&1
  echo "compute-sanitizer memcheck exited $? (0: no errors; 3: errors, listed above)" >>"$out/sanitizer.txt"
  tail -3 "$out/sanitizer.txt"
fi
tail -40 "$out/calibrate.log" "$out/calibrate-gpt3.log" "$out/calibrate-llama3.log"
exit $rc
