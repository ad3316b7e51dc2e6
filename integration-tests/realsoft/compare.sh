#!/bin/sh
# The Tomcat load (tomcat.sh) recorded by agents attached after the
# warm-up, each ROUNDS times, and what failed_walks.sh reads of each
# recording. Agents: NAME=LIBRARY:OPTIONS words in $AGENTS (default: this
# workspace's release build, and async-profiler from shared/tools above
# the workspace or $ASYNC_PROFILER; add a baseline build with
# BASELINE=path/to/libprofiler.so).
#   compare.sh OUTDIR [ROUNDS] [SECONDS]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=$1
rounds=${2:-2}
seconds=${3:-15}
root=$(cd "$here/../.." && pwd)
if [ -z "${ASYNC_PROFILER:-}" ]; then
    dir=$root
    while [ "$dir" != / ] && [ ! -e "$dir/shared/tools/async-profiler/lib/libasyncProfiler.so" ]; do
        dir=$(dirname "$dir")
    done
    ASYNC_PROFILER=$dir/shared/tools/async-profiler/lib/libasyncProfiler.so
fi
agents="ours=$root/target/release/libprofiler.so:start,cpu=1ms async-profiler=$ASYNC_PROFILER:start,event=cpu,interval=1ms"
agents=${AGENTS:-${BASELINE:+baseline=$BASELINE:start,cpu=1ms }$agents}
mkdir -p "$out"
for round in $(seq "$rounds"); do
    for agent in $agents; do
        name=${agent%%=*}
        lib=${agent#*=}
        options=${lib#*:}
        lib=${lib%%:*}
        jfr="$out/$name-$round.jfr"
        echo "== $name, round $round"
        AGENT_LIB=$lib ATTACH="$options,file=$jfr" "$here/tomcat.sh" "$out/base" "$seconds"
        "$here/failed_walks.sh" "$jfr" | tee "$out/$name-$round.txt"
    done
done
