# scripts/bench-peers --consume: the consumer and copier benchmark, sourced by scripts/bench-peers
# after its helpers (test bed, topics, end offsets, seqcheck) are defined. See the header of
# scripts/bench-peers for what it measures.

consume_transactions=20  # committed transactions the input is written in
consume_aborted=4        # aborted transactions of the same size between them
# The copiers' transactions (examples/copy's and its peer's, franz-perf copy): at most this many
# records or milliseconds each. Their defaults (1,000 records / 100 ms, Kafka Streams'
# exactly-once commit interval) spend most of a bulk copy committing; a bulk copy is what is
# timed here.
copy_commit_records=10000
copy_commit_ms=1000
# Both copiers' producers batch up to $batch_size (--batch-size: by default the producer
# benchmark's 1 MiB, about franz-go's default of 1,000,012 B; examples/copy's default batch.size
# is Java's 16 KiB, which costs it CPU per record that franz-go does not spend), franz-go's at
# least $franz_batch_size (the least kgo takes; the report says so when it differs).

# OFFSETS (one per partition) as they are up to 12 partitions, else their least, largest and sum:
# a report line per partition is no use at a thousand.
offsets_summary() {
  local -a offsets
  read -r -a offsets <<<"$1"
  if [ "${#offsets[@]}" -le 12 ]; then
    echo "$1"
  else
    printf '%s\n' "${offsets[@]}" | awk '
      NR == 1 || $1 < min { min = $1 } NR == 1 || $1 > max { max = $1 } { sum += $1 }
      END { printf "from %d to %d over %d partitions (%d in all)", min, max, NR, sum }'
  fi
}

# The committed records of the input at record size $1: --records at 100 B, a quarter of it
# from 1 KiB on (the producer benchmark's calibration sizes, in the same ratio).
consume_count() {
  if [ "$1" -lt 1024 ]; then echo "$records"; else echo $((records / 4)); fi
}

# Sets `cmd` to client $1's command reading topic $2 (count $3) in group $4.
consume_command() {
  local client="$1" topic="$2" count="$3" group="$4"
  local flags=(--topic "$topic" --num-records "$count" --timeout-seconds "$consume_timeout")
  local props=(bootstrap.servers="$client_bootstrap" group.id="$group")
  case "$client" in
    exactly) cmd=("$bin/consume_perf" consume "${flags[@]}" --consumer-props "${props[@]}") ;;
    rust-rdkafka) cmd=("$bin/rust-rdkafka-consume" "${flags[@]}" --consumer-props "${props[@]}") ;;
    franz) cmd=("$bin/franz-perf" consume "${flags[@]}" --consumer-props "${props[@]}") ;;
    java)
      # Kafka's own kafka-consumer-perf-test (ConsumerPerformance), with the JVM options of
      # kafka-run-class.sh; it counts records but cannot tell which ones it got.
      printf '%s\n' isolation.level=read_committed auto.offset.reset=earliest enable.auto.commit=false \
        >"$out/consumer-java.properties"
      cmd=(java -Xmx512M -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35
        -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true
        -Dlog4j2.configurationFile="$here/testbed.d/tools-log4j2.yaml" -cp "$KAFKA_LIBS/*"
        org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "$client_bootstrap" --topic "$topic"
        --messages "$count" --group "$group" --consumer.config "$out/consumer-java.properties"
        --timeout $((consume_timeout * 1000)) --hide-header) ;;
  esac
}

# One row of $tsv (columns in consume-report.awk): phase round client size count wall user sys
# rss_kb received distinct foreign first_s last_s status, and for a copier (else "-") its
# transactions/s, transaction p99 ms, partition spread (records), spread as a share of a
# partition's records, and partition finish spread s (bench-peers.d/copy-stats.awk).
consume_row() {
  local row=("$@")
  while [ ${#row[@]} -lt 20 ]; do row+=(-); done
  (IFS=$'\t'; echo "${row[*]}") >>"$tsv"
}

# The timing line /usr/bin/time wrote to $1: "wall user sys rss_kb".
timing_of() {
  grep -E '^[0-9.]+ [0-9.]+ [0-9.]+ [0-9]+$' "$1" | tail -1
}

# consume_run ROUND CLIENT SIZE TOPIC COUNT: one client reading the whole input topic in a fresh
# group; the row counts what the client says it got (distinct committed records, foreign ones).
consume_run() {
  local round="$1" client="$2" size="$3" topic="$4" count="$5" name="consume-$1-$2-$3"
  local status=ok wall user sys rss summary received distinct=- foreign=- first=- last=-
  consume_command "$client" "$topic" "$count" "bench-$run_id-$client-$size-$round"
  path_state >/dev/null || die "the proxy in front of $client_bootstrap is not a clean pass-through"
  if ! timeout -k 10 $((consume_timeout + 60)) /usr/bin/time -f '%e %U %S %M' -o "$runs/$name.time" "${cmd[@]}" \
    >"$runs/$name.out" 2>"$runs/$name.err"; then
    status=failed
    log "$name failed or timed out; see $runs/$name.{out,err}"
  fi
  read -r wall user sys rss < <(timing_of "$runs/$name.time") || { wall=0 user=0 sys=0 rss=0; status=no-timing; }
  if [ "$client" = java ]; then
    # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
    # rebalance.time.ms, fetch.time.ms, ...
    received="$(awk -F', *' 'NF >= 8 && $5 ~ /^[0-9]+$/ { n = $5 } END { print n + 0 }' "$runs/$name.out")"
    first="$(awk -F', *' 'NF >= 8 && $7 ~ /^[0-9]+$/ { printf "%.3f", $7 / 1000 }' "$runs/$name.out")"
    last="$(awk -F', *' 'NF >= 8 && $8 ~ /^[0-9]+$/ { printf "%.3f", ($7 + $8) / 1000 }' "$runs/$name.out")"
    [ "$received" -ge "$count" ] || [ "$status" != ok ] || status="received-$received-of-$count"
  else
    summary="$(grep '^consumed ' "$runs/$name.out" | tail -1)" || true
    received="$(sed -nE 's/^consumed ([0-9]+) records.*/\1/p' <<<"$summary")"
    distinct="$(sed -nE 's/.*distinct ([0-9]+).*/\1/p' <<<"$summary")"
    foreign="$(sed -nE 's/.*foreign ([0-9]+).*/\1/p' <<<"$summary")"
    first="$(sed -nE 's/.*first record after ([0-9.]+) s.*/\1/p' <<<"$summary")"
    last="$(sed -nE 's/.*last after ([0-9.]+) s.*/\1/p' <<<"$summary")"
    if [ -z "$distinct" ]; then
      status=no-summary; received=0 distinct=0 foreign=0
    elif [ "$status" = failed ] || [ "$distinct" != "$count" ] || [ "$foreign" != 0 ]; then
      status="distinct-$distinct-foreign-$foreign-of-$count"
    fi
  fi
  consume_row consume "$round" "$client" "$size" "$count" "$wall" "$user" "$sys" "$rss" "${received:-0}" \
    "$distinct" "$foreign" "${first:--}" "${last:--}" "$status"
  log "$(printf 'consume %-12s %5s B round %s: %9s records in %6ss: %9.0f records/s, cpu %5.1fs, rss %s KiB, first record after %ss [%s]' \
    "$client" "$size" "$round" "$received" "$wall" \
    "$(awk -v n="${received:-0}" -v w="$wall" 'BEGIN { print (w > 0 ? n / w : 0) }')" \
    "$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" "$rss" "${first:--}" "$status")"
}

# copy_run ROUND COPIER SIZE TOPIC COUNT: copier exactly (examples/copy) or franz (franz-perf
# copy, franz-go's GroupTransactSession) copies the input to a new topic of its own (exactly
# once, in transactions of $copy_commit_records records or $copy_commit_ms ms) and stops after 3
# idle seconds; its rate is counted up to its last commit, on its own clock, and the destination
# is read back read_committed (kcat) and counted by seqcheck: every source record once. Both
# copiers print the same line per transaction, from which copy-stats.awk takes the transactions
# per second, their p99 time and the spread of progress across the source partitions.
copy_run() {
  local round="$1" copier="$2" size="$3" topic="$4" count="$5" dest="$4-copy-$2-$1" name="copy-$1-$2-$3"
  local status=ok wall user sys rss copied last checked read distinct duplicates reordered foreign program stats batch
  case "$copier" in
    exactly) program=("$bin/copy") batch="$batch_size" ;;
    franz) program=("$bin/franz-perf" copy) batch="$franz_batch_size" ;;
  esac
  create_topic "$dest" || die "could not create $dest"
  if ! timeout -k 10 $((consume_timeout + 60)) /usr/bin/time -f '%e %U %S %M' -o "$runs/$name.time" \
    "${program[@]}" "$client_bootstrap" "$topic" "$dest" "bench-$run_id-copy-$copier-$size-$round" "bench-$run_id-copy-$copier-$size-$round" \
    --commit-records "$copy_commit_records" --commit-ms "$copy_commit_ms" --idle-seconds 3 --batch-size "$batch" \
    >"$runs/$name.out" 2>"$runs/$name.err"; then
    status=failed
    log "$name failed or timed out; see $runs/$name.{out,err}"
  fi
  read -r wall user sys rss < <(timing_of "$runs/$name.time") || { wall=0 user=0 sys=0 rss=0; status=no-timing; }
  copied="$(sed -nE 's/^copied ([0-9]+) records.*/\1/p' "$runs/$name.out" | tail -1)"
  # The copy's own clock at its last commit: the time to copy, without the idle wait at the end.
  last="$(sed -nE 's/^ *([0-9.]+)s committed .*/\1/p' "$runs/$name.out" | tail -1)"
  if checked="$(timeout -k 5 $((consume_timeout + 60)) kcat -C -b "$KAFKA_BOOTSTRAP" -t "$dest" -o beginning -e -q \
    -X isolation.level=read_committed -f '%p %s\n' | "$bin/seqcheck" "$count")" &&
    read -r _ read _ distinct _ duplicates _ reordered _ foreign <<<"$checked" && [ -n "$foreign" ]; then
    if [ "$distinct" != "$count" ] || [ "$duplicates" != 0 ] || [ "$foreign" != 0 ]; then
      status="distinct-$distinct-dup-$duplicates-foreign-$foreign-of-$count"
    fi
  else
    status=unread distinct=0 foreign=-
  fi
  stats="$(awk -v partitions="$partitions" -f "$here/bench-peers.d/copy-stats.awk" "$runs/$name.out")"
  # shellcheck disable=SC2086 # five words
  consume_row copy "$round" "$copier" "$size" "$count" "$wall" "$user" "$sys" "$rss" "${copied:-0}" "$distinct" \
    "$foreign" - "${last:--}" "$status" $stats
  log "$(printf 'copy    %-12s %5s B round %s: %9s records copied, last commit after %ss (process %ss), read back: %s [%s]; transactions/s, p99 ms, partition spread, its share, finish spread s: %s' \
    "$copier" "$size" "$round" "${copied:-0}" "${last:--}" "$wall" "${checked:-nothing}" "$status" "$stats")"
}

# The copiers of the chosen clients in run order for round $1: exactly's, then franz-go's, then
# the reverse.
copiers() {
  local list=()
  has_client exactly && list+=(exactly)
  has_client franz && list+=(franz)
  if [ "$1" = 1 ]; then echo "${list[*]}"; else printf '%s\n' "${list[@]}" | tac | tr '\n' ' '; fi
}

consume_versions() {
  local peers=""
  has_client rust-rdkafka && peers+="rust-rdkafka $(locked_version rust-rdkafka rdkafka) BaseConsumer with its bundled librdkafka $("$bin/rust-rdkafka-perf" --version | sed 's/.*librdkafka //'), "
  has_client franz && peers+="franz-go $(sed -n 's/^require github.com\/twmb\/franz-go //p' "$here/bench-peers.d/franz/go.mod") (consumer, and GroupTransactSession as the copier) on $(go env GOVERSION), "
  has_client java && peers+="Java consumer (kafka-clients) $(jar_version kafka-clients) in ConsumerPerformance on $(java -version 2>&1 | head -1 | cut -d'"' -f2), "
  echo "Versions: exactly from $(git -C "$repo" rev-parse --short HEAD 2>/dev/null)$(git -C "$repo" diff --quiet HEAD -- src examples 2>/dev/null || echo " with local changes"), ${peers}$(rustc --version | cut -d' ' -f1-2); broker Kafka $(jar_version kafka_2.13) on Java $(java -version 2>&1 | head -1 | cut -d'"' -f2) with $broker_jvm."
}

report_consume() {
  awk -v clients="$clients" -v sizes="$sizes" -v versions="$1" -v copy_txn="$copy_commit_records records or $copy_commit_ms ms" \
    -f "$here/bench-peers.d/consume-report.awk" "$tsv"
}

consume_main() {
  run_id="$(date +%Y%m%d%H%M%S)"
  mkdir -p "$runs"
  tsv="$out/consume-runs-$run_id.tsv"; : >"$tsv"
  local started=$SECONDS load_before size count topic round c fill_out fills=""
  load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
  log "run $run_id (--consume): clients [$clients], sizes [$sizes] B, $records records at 100 B, $brokers broker(s), $partitions partitions, batch.size $batch_size B$(franz_batch_note), via the proxies at $client_bootstrap"
  for size in $sizes; do
    count="$(consume_count "$size")"
    topic="bench-$run_id-consume-$size"
    create_topic "$topic" || die "could not create $topic"
    log "filling $topic: $count committed records of $size B in $consume_transactions transactions, and $consume_aborted aborted transactions"
    fill_out="$("$bin/consume_perf" fill --topic "$topic" --num-records "$count" --record-size "$size" \
      --transactions "$consume_transactions" --aborted "$consume_aborted" --partitions "$partitions" \
      --producer-props bootstrap.servers="$client_bootstrap" transactional.id="bench-$run_id-fill-$size" \
      linger.ms=5 batch.size="$batch_size" buffer.memory="$buffer_memory")" || die "filling $topic failed"
    fills+="- $size B: $fill_out; end offsets $(offsets_summary "$(end_offsets "$topic")") (records, aborted records and transaction markers)"$'\n'
    for round in 1 2; do
      for c in $(order "$round"); do consume_run "$round" "$c" "$size" "$topic" "$count"; done
    done
    if [ "$copy" = 1 ]; then
      for round in 1 2; do
        for c in $(copiers "$round"); do copy_run "$round" "$c" "$size" "$topic" "$count"; done
      done
    fi
    delete_topics "consume-$size.*"
  done
  local versions results="$out/results-consume.md"
  [ "$brokers" = 1 ] || results="$out/results-consume-${brokers}brokers.md"
  versions="$(consume_versions) Machine: $(nproc) cores, load average $load_before at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end; $((SECONDS - started)) s in all."
  {
    echo "# Consumer benchmark, run $run_id"
    echo
    echo "$brokers Kafka broker(s) on loopback ($([ -n "${BENCH_PEERS_NETNS:-}" ] && echo "a private test bed in its own network namespace" || echo "the shared test bed")); every client through the same Toxiproxy pass-through (no toxics)."
    echo "One input topic of $partitions partitions per size, written once by examples/consume_perf fill: the committed records"
    echo "in $consume_transactions transactions and $consume_aborted aborted transactions of the same size between them, round-robin"
    echo "over the partitions. Each client reads it from the beginning, read_committed, in a fresh group, until it has the committed count."
    echo "Fetch settings at each client's defaults; group protocol at each client's default: exactly KIP-848 (the broker has it),"
    echo "librdkafka, franz-go and Java classic (eager/cooperative join with the broker's group.initial.rebalance.delay.ms=0)."
    echo "The copiers run at their clients' producer and consumer defaults too (exactly: Java's, linger.ms=5; franz-go: linger 10 ms)"
    echo "but for the batch size, $batch_size B for both$(franz_batch_note) (the fill's too), with the same transactions ($copy_commit_records records or $copy_commit_ms ms)."
    echo
    echo "Input:"
    echo
    printf '%s\n' "$fills"
    report_consume "$versions"
    echo
    echo "## Every run"
    echo
    echo "| phase | round | client | record B | committed | wall s | user s | sys s | peak RSS KiB | received | distinct | foreign | first record s | last record s | status | transactions/s | transaction p99 ms | partition spread | spread share | finish spread s |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    sed 's/\t/ | /g; s/^/| /; s/$/ |/' "$tsv"
  } >"$results"
  report_consume "$versions"
  log "results in $results (per-run logs in $runs)"
}
