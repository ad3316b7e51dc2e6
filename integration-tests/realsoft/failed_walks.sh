#!/bin/sh
# How many CPU samples of a recording (ours or async-profiler's) have a
# failed Java walk, read through async-profiler's converter (collapsed
# stacks split by thread; frame types _[j] C2/JIT, _[1] C1, _[i] inlined,
# _[0] interpreted):
#   - stacks rooted at a compiled Java frame (the walk stopped above it and
#     the sample reads as if the thread started there), the one-frame ones
#     among them, and the roots most often seen;
#   - stacks rooted at a marker frame ([unknown_Java], async-profiler's
#     unknown / break_*);
#   - our agent's counters (stack_walk_failed, stack_truncated, vm_walk_*).
#   failed_walks.sh RECORDING.jfr
# The converter is $PROFILER_TEST_CONVERTER, else
# shared/tools/async-profiler/jar/jfr-converter.jar in a folder above the
# workspace (as the integration tests find it).
set -eu
jfr=$1
shared_tool() {
    dir=$(cd "$(dirname "$0")/../.." && pwd)
    while [ "$dir" != / ]; do
        dir=$(dirname "$dir")
        [ -e "$dir/shared/tools/$1" ] && { echo "$dir/shared/tools/$1"; return; }
    done
    echo "no shared/tools/$1 above the workspace" >&2
    exit 1
}
conv=${PROFILER_TEST_CONVERTER:-$(shared_tool async-profiler/jar/jfr-converter.jar)}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
java -jar "$conv" --cpu -o collapsed -t "$jfr" "$out" >/dev/null
awk '
{ n = $NF; line = $0; sub(/ [0-9]+$/, "", line); total += n
  k = split(line, f, ";")            # f[1] is the thread
  root = f[2]
  if (root ~ /_\[[j1]\]$/) { cut += n; roots[root] += n; if (k == 2) one += n }
  else if (root ~ /^\[[A-Za-z_]+\]$/ || root ~ /^(unknown|break_[a-z_]+)$/) { marked += n; marks[root] += n }
}
END {
  printf "samples %d\n", total
  printf "rooted at a compiled Java frame %d (%.2f%%), one-frame %d\n", cut, total ? 100 * cut / total : 0, one
  for (r in roots) printf "  %6d %s\n", roots[r], r | "sort -rn | head -8"
  close("sort -rn | head -8")
  printf "rooted at a marker %d (%.2f%%)\n", marked, total ? 100 * marked / total : 0
  for (m in marks) printf "  %6d %s\n", marks[m], m | "sort -rn | head -8"
  close("sort -rn | head -8")
}' "$out"
jfr print --events jvmprofiler.Counter "$jfr" 2>/dev/null |
    awk '/name =/ { n = $3 } /count =/ { if (n ~ /vm_walk|stack_walk_failed|stack_truncated/ && $3 != 0) print "counter", n, $3 }'
