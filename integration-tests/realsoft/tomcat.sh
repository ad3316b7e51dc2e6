#!/bin/sh
# Tomcat 10 (Debian's tomcat10) under `ab` load, for profiling the HotSpot
# walker on real servlet/JSP code.
#
#   tomcat.sh BASE [SECONDS]
#
# Makes a fresh CATALINA_BASE in BASE (conf from /etc/tomcat10, the JSP of
# webapp/ as ROOT, HTTP on $PORT, default 18087), starts Tomcat with
# $JAVA_OPTS (e.g. -agentpath:.../libprofiler.so=start,file=...), warms it
# up, runs `ab -c 8` for SECONDS (default 20) and stops Tomcat (the agent
# writes its recording at VM exit). $ATTACH, if set, is an agent option
# string loaded with jcmd after the warm-up ($WARMUP seconds of the same
# load, default 10) instead: the measured load runs while it records
# (AGENT_LIB names the library; the recording is written when Tomcat
# stops).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
base=$1
seconds=${2:-20}
port=${PORT:-18087}
home=${CATALINA_HOME:-/usr/share/tomcat10}

rm -rf "$base"
mkdir -p "$base/conf" "$base/logs" "$base/temp" "$base/work" "$base/webapps/ROOT"
cp -r /etc/tomcat10/. "$base/conf/"
sed -i "s/port=\"8080\"/port=\"$port\"/" "$base/conf/server.xml"
cp "$here"/webapp/*.jsp "$base/webapps/ROOT/"

export CATALINA_BASE="$base" CATALINA_HOME="$home" CATALINA_PID="$base/tomcat.pid"
export JAVA_OPTS="${JAVA_OPTS:-}"
"$home/bin/catalina.sh" start >"$base/logs/start.out" 2>&1
pid=$(cat "$base/tomcat.pid")
# A search-like query of a few dozen words: the JSP counts them.
words="the quick brown fox jumps over the lazy dog while alpha beta gamma delta epsilon zeta eta theta iota"
words="$words kappa lambda mu nu xi omicron pi rho sigma tau upsilon phi chi psi omega and the dog sleeps"
q=$(echo "$words $words" | tr ' ' '+')
url="http://127.0.0.1:$port/words.jsp?q=$q&lang=en&page=3&sort=name+asc&filter=alpha+beta+gamma+delta"
i=0
until curl -fs -o /dev/null "$url"; do
    i=$((i + 1))
    [ $i -lt 100 ] || { echo "Tomcat did not answer" >&2; kill "$pid"; exit 1; }
    sleep 0.2
done
# Warm-up: compile the JSP and let C2 compile the hot paths.
ab -q -k -c 8 -t "${WARMUP:-10}" -n 10000000 "$url" >/dev/null 2>&1 || true
if [ -n "${ATTACH:-}" ]; then
    jcmd "$pid" JVMTI.agent_load "${AGENT_LIB:?AGENT_LIB names the agent}" "\"$ATTACH\"" >/dev/null
fi
ab -k -c 8 -t "$seconds" -n 10000000 "$url" >"$base/logs/ab.out" 2>&1 || true
grep -E "Requests per second|Complete requests|Failed requests" "$base/logs/ab.out" || true
kill "$pid"
while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
