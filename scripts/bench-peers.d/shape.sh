#!/usr/bin/env bash
# The request shape one producer run puts on a broker: Produce requests per second and per
# million records, batches per request, records per batch, bytes per request, and the broker's
# CPU per million records. Run a producer (examples/perf, franz-perf, any program taking a
# topic) against a one-broker test bed started with a JMX port, and read the figures from the
# broker itself, so every client is measured the same way:
#   - the broker's request metrics over JMX (Kafka's org.apache.kafka.tools.JmxTool):
#     kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce (every version)
#     and name=RequestBytes (the bytes of the Produce requests), before and after the run;
#   - the topic's log (kafka.tools.DumpLogSegments): batches and records per batch;
#   - the broker process's CPU (utime + stime in /proc) over the run.
#
#   scripts/bench-peers.d/shape.sh --label NAME --topic T [--partitions N] -- COMMAND ARGS...
#
# COMMAND is run as given (name the same topic in its arguments); the topic is created first
# with N partitions (default 6) and deleted after. Prints one tab-separated line:
#   label records seconds requests requests/s requests/M-records batches batches/request
#   records/batch bytes/request broker-cpu-s/M-records
# (with a header line when SHAPE_HEADER=1). Needs the test bed's environment (eval "$(scripts/
# testbed up)": KAFKA_BOOTSTRAP, KAFKA_LIBS, KAFKA_CLUSTER_DIR, and KAFKA_JMX_PORTS: the test
# bed's brokers listen for JMX on loopback); SHAPE_JMX_PORT names another JMX port.
# Only this run should produce to the broker meanwhile: the request counts are the broker's.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
label="" topic="" partitions=6
die() { echo "shape: error: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
  case "$1" in
    --label) label="${2:?}"; shift 2 ;;
    --topic) topic="${2:?}"; shift 2 ;;
    --partitions) partitions="${2:?}"; shift 2 ;;
    --) shift; break ;;
    *) sed -n '2,27p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
[ -n "$label" ] && [ -n "$topic" ] && [ $# -gt 0 ] || die "--label, --topic and a command are needed"
: "${KAFKA_BOOTSTRAP:?run under the test bed environment}" "${KAFKA_LIBS:?}" "${KAFKA_CLUSTER_DIR:?}"
jmx_url="service:jmx:rmi:///jndi/rmi://127.0.0.1:${SHAPE_JMX_PORT:-${KAFKA_JMX_PORTS%%,*}}/jmxrmi"
broker_pid="$(cat "$KAFKA_CLUSTER_DIR/broker0/kafka.pid")"
java_tool() {
  java -cp "$KAFKA_LIBS/*" -Dlog4j2.configurationFile="$here/../testbed.d/tools-log4j2.yaml" "$@"
}

# Produce requests (summed over the versions' meters) and their bytes, as "requests bytes".
produce_counters() {
  java_tool org.apache.kafka.tools.JmxTool --jmx-url "$jmx_url" --one-time true --report-format properties \
    --object-name 'kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce,*' \
    --object-name 'kafka.network:type=RequestMetrics,name=RequestBytes,request=Produce' \
    --attributes Count,Mean 2>/dev/null |
    awk -F'[:=]' '
      /name=RequestsPerSec/ && $(NF-1) == "Count" { requests += $NF }
      /name=RequestBytes/ && $(NF-1) == "Count" { n = $NF }
      /name=RequestBytes/ && $(NF-1) == "Mean" { mean = $NF }
      END { printf "%d %.0f\n", requests, n * mean }'
}
broker_cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$broker_pid/stat"; }

java_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$KAFKA_BOOTSTRAP" --create \
  --topic "$topic" --partitions "$partitions" --replication-factor 1 >/dev/null
read -r req0 bytes0 < <(produce_counters)
cpu0="$(broker_cpu_ticks)"
start="$(date +%s.%N)"
"$@" >&2
end="$(date +%s.%N)"
cpu1="$(broker_cpu_ticks)"
read -r req1 bytes1 < <(produce_counters)

# Every batch of the topic's segments: DumpLogSegments prints one line per batch with its count.
mapfile -t segments < <(find "$KAFKA_CLUSTER_DIR/broker0/data" -path "*/$topic-*" -name '*.log')
read -r batches records < <(java_tool kafka.tools.DumpLogSegments --files "$(IFS=,; echo "${segments[*]}")" 2>/dev/null |
  awk '/^baseOffset:/ { for (i = 1; i < NF; i++) if ($i == "count:") { b++; r += $(i + 1) } }
       END { printf "%d %d\n", b, r }')
java_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$KAFKA_BOOTSTRAP" --delete \
  --topic "$topic" >/dev/null

[ "${SHAPE_HEADER:-0}" = 1 ] && printf 'label\trecords\tseconds\trequests\trequests/s\trequests/M\tbatches\tbatches/request\trecords/batch\tbytes/request\tbroker-cpu-s/M\n'
awk -v label="$label" -v records="$records" -v start="$start" -v end="$end" -v req=$((req1 - req0)) \
  -v bytes=$((bytes1 - bytes0)) -v batches="$batches" -v ticks=$((cpu1 - cpu0)) -v hz="$(getconf CLK_TCK)" '
  BEGIN {
    s = end - start; m = records / 1e6
    printf "%s\t%d\t%.2f\t%d\t%.0f\t%.0f\t%d\t%.2f\t%.0f\t%.0f\t%.3f\n", label, records, s, req,
      req / s, req / m, batches, batches / req, records / batches, bytes / req, ticks / hz / m
  }'
