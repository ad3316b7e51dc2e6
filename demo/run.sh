#!/usr/bin/env bash
# Builds the agent and the symbolizer, profiles the bundled demo program,
# and writes a JFR recording and an HTML flame graph to demo/out/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-10}"

cargo build --release --quiet -p profiler -p symbolizer
mkdir -p demo/out/classes
javac -d demo/out/classes demo/Demo.java

java -agentpath:"$PWD/target/release/libprofiler.so=start,interval=5ms,file=$PWD/demo/out/profile.jfr" \
     -cp demo/out/classes Demo "$seconds"

target/release/symbolize flamegraph demo/out/profile.jfr --threads -o demo/out/flamegraph.html \
    --title "Demo"
target/release/symbolize collapsed demo/out/profile.jfr -o demo/out/profile.collapsed
echo "recording:   demo/out/profile.jfr ($(jfr summary demo/out/profile.jfr | awk '/jdk.ExecutionSample/ {print $2}') samples)"
echo "flame graph: demo/out/flamegraph.html"
echo "top frames (self samples):"
# A collapsed line is `frame;frame;...;leaf COUNT`; frame names may hold
# spaces. awk, not head, ends the pipeline, so nothing dies of SIGPIPE.
awk '{ count = $NF; sub(/ [0-9]+$/, ""); n = split($0, f, ";"); self[f[n]] += count }
     END { for (leaf in self) printf "%d\t%s\n", self[leaf], leaf }' demo/out/profile.collapsed |
    sort -nr | awk -F'\t' 'NR <= 5 { printf "  %6d  %s\n", $1, $2 }'
