#!/usr/bin/env bash
# Issue 30's whole measurement in one run, side by side with kube-scheduler on one control-plane release:
# batch arrival of six workloads at 200, 1,000 and 5,000 nodes, then streams at 100 pods/s at 200 nodes of the
# non-gang workloads and the two mixed ones (6 repeats, the schedulers' order rotated: each goes first on a fresh
# control plane three times, which favours neither; BENCHMARKS.md, issue 30). The streams' apiserver traces its
# garbage collector (--apiserver-gc): the slowest pods of a stream are those waiting across its mark phases. About an
# hour on 2 cores; run it on a quiet machine.
#
#   bash bench/issue30.sh [OUT]      # results.json, logs and plots under OUT (default /tmp/issue30)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/issue30}
mkdir -p "$out"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out/load.txt"
python bench/compare.py --nodes 200 --nodes 1000 --nodes 5000 \
  -w basic -w anti-affinity -w topology-spread -w gangs -w mixed-hetero -w tight-packing \
  -s policy-scheduler -s kube-scheduler --arrival batch -n 1 --idle 6 \
  --report "$out/batch.md" --plots "$out/batch-plots" --out "$out/batch"
python bench/compare.py --nodes 200 -w basic -w anti-affinity -w topology-spread -w mixed -w mixed-hetero \
  -s policy-scheduler -s kube-scheduler --arrival stream --rate 100 -n 6 --idle 4 --apiserver-gc \
  --report "$out/stream.md" --plots "$out/stream-plots" --out "$out/stream"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/load.txt"
