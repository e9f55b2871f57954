# The report of scripts/bench-peers --consume, from its consume-runs-*.tsv (one row per run; the
# columns of consume_row in consume.sh). Variables: clients, sizes (space-separated), versions,
# copy_txn (the copiers' transaction bounds, in words).
#
# records/s = committed records delivered / the client process's wall time (start-up and group
# join included: that is what a job reading a topic pays), mean of the two rounds. A copier's
# headline rate is the records it copied over its own clock at its last commit (without the
# idle wait that ends it), mean of its two rounds; so are its transactions/s, the p99 of its
# transactions' times and the spread of its progress across partitions (copy-stats.awk).
function commas(x,   s, out, n) { s = sprintf("%.0f", x); out = ""; n = length(s)
  while (n > 3) { out = "," substr(s, n - 2, 3) out; n -= 3 } return substr(s, 1, n) out }
function rate(k) { return runs[k] ? rps[k] / runs[k] : 0 }
function cpu_per_m(k) { return recs[k] ? cpu[k] / recs[k] * 1e6 : 0 }
function verdict(ok) { return ok ? "**met**" : "**missed**" }
function own_rate(k) { return owns[k] ? own[k] / owns[k] : 0 }
# The mean over the rounds of copier figure f (column 16 + f), or "-".
function copy_fig(k, f, fmt) { return nfig[k, f] ? sprintf(fmt, fig[k, f] / nfig[k, f]) : "-" }
BEGIN {
  FS = "\t"
  nc = split(clients, cl, " "); ns = split(sizes, sz, " ")
  label["exactly"] = "exactly (`consume_perf consume`)"
  label["rust-rdkafka"] = "rust-rdkafka BaseConsumer (bundled librdkafka)"
  label["franz"] = "franz-go (`franz-perf consume`)"
  label["java"] = "Java consumer (`ConsumerPerformance`)"
  copier["exactly"] = "exactly, `examples/copy` (CopyLoop)"
  copier["franz"] = "franz-go GroupTransactSession (`franz-perf copy`)"
  ncp = split("exactly franz", cpl, " ")
}
# Columns: 1 phase 2 round 3 client 4 size 5 count 6 wall 7 user 8 sys 9 rss 10 received
# 11 distinct 12 foreign 13 first_s 14 last_s 15 status; copiers: 16 transactions/s
# 17 transaction p99 ms 18 partition spread 19 spread share 20 finish spread s
$15 != "ok" { bad[$1 " " $3 " " $4] = bad[$1 " " $3 " " $4] " " $15 }
$15 == "ok" && $6 > 0 { k = $1 " " $3 " " $4; n = ($11 == "-" ? $5 : $11)
  rps[k] += n / $6; runs[k]++; recs[k] += n; cpu[k] += $7 + $8; if ($9 > rss[k]) rss[k] = $9
  if ($13 != "-") { join[k] += $13; joins[k]++ }
  # Only over 50 ms or more: the programs print milliseconds.
  if ($13 != "-" && $14 != "-" && $14 - $13 >= 0.05) { stream[k] += n / ($14 - $13); streams[k]++ }
  if ($1 == "copy" && $14 > 0) { own[k] += n / $14; owns[k]++ }
  if ($1 == "copy") for (f = 0; f < 5; f++) if ($(16 + f) != "-" && $(16 + f) != "") { fig[k, f] += $(16 + f); nfig[k, f]++ }
  checked[k] = ($11 != "-"); each[k] = each[k] (each[k] == "" ? "" : " / ") commas(n / $6) }
END {
  print "| client | record | records/s | MiB/s | client CPU s / M records | peak RSS MiB | first record after s | records/s after the first | checked |"
  print "|---|---|---|---|---|---|---|---|---|"
  for (j = 1; j <= ns; j++) for (i = 1; i <= nc; i++) { c = cl[i]; k = "consume " c " " sz[j]
    if (!runs[k]) { printf "| %s | %s B | failed:%s | | | | | | |\n", label[c], sz[j], bad[k]; continue }
    printf "| %s | %s B | %s | %.1f | %.2f | %.0f | %s | %s | %s |\n", label[c], sz[j], commas(rate(k)),
      rate(k) * sz[j] / 1048576, cpu_per_m(k), rss[k] / 1024, joins[k] ? sprintf("%.2f", join[k] / joins[k]) : "-",
      streams[k] ? commas(stream[k] / streams[k]) : "-",
      checked[k] ? "distinct = committed, 0 aborted" : "count only" }
  print ""
  print "records/s: committed records delivered per wall second of the client process (start-up and group join included), mean of two rounds"
  print "(given order, then reversed); checked: the program counted the distinct committed records it got and the records it should not"
  print "have got (aborted ones); Java's ConsumerPerformance only counts records. first record after: from the program's start (Java: its"
  print "rebalance.time.ms, from the consumer's creation, so without the JVM's start-up); records/s after the first: committed records"
  print "over the time from the first record to the last (Java: fetch.time.ms), the fetch rate without start-up and group join."
  print ""
  printf "Copiers: read_committed consumer + transactional producer, each record to its source partition of a new topic, exactly once, transactions of %s, stopping after 3 idle seconds; read back read_committed (kcat) and counted, every source record once; mean of two rounds (exactly's first, then the peer's first).\n", copy_txn
  print ""
  print "| copier | record | records/s to its last commit | records/s of process wall time | client CPU s / M records | transactions/s | transaction p99 ms | partition spread, records (share) | partition finish spread s | peak RSS MiB | checked |"
  print "|---|---|---|---|---|---|---|---|---|---|---|"
  for (j = 1; j <= ns; j++) for (ci = 1; ci <= ncp; ci++) { c = cpl[ci]; k = "copy " c " " sz[j]
    if (runs[k]) printf "| %s | %s B | %s | %s | %.2f | %s | %s | %s (%s) | %s | %.0f | every record once%s |\n", copier[c], sz[j], commas(own_rate(k)), commas(rate(k)),
      cpu_per_m(k), copy_fig(k, 0, "%.1f"), copy_fig(k, 1, "%.0f"), copy_fig(k, 2, "%.0f"), copy_fig(k, 3, "%.3f"), copy_fig(k, 4, "%.1f"),
      rss[k] / 1024, bad[k] == "" ? "" : "; another round failed:" bad[k]
    else if (bad[k] != "") printf "| %s | %s B | failed:%s | | | | | | | | |\n", copier[c], sz[j], bad[k] }
  print ""
  print "records/s to its last commit: the records copied over the copier's own clock at its last commit (started once connected and its producer ID loaded, without the idle wait at the end); of process wall time: with start-up and the idle wait."
  print "transactions/s: committed transactions over the same clock; transaction p99: of the transactions' times, from the poll that brought a transaction's first record to the end of its commit (the first transaction, whose poll waited for the group join, left out);"
  print "partition spread: the most records one source partition had had copied more than another at any commit (its share: of the records of a partition), i.e. how far their lags drifted apart;"
  print "partition finish spread: from the commit that copied the last record of the first partition to finish to the one of the last. Each copier prints one line per transaction, in the same format."
  print ""
  print "Ratios of exactly to each peer:"
  print ""
  for (j = 1; j <= ns; j++) { s = sz[j]; o = "consume exactly " s; if (!runs[o]) continue
    for (i = 1; i <= nc; i++) { c = cl[i]; if (c == "exactly") continue; k = "consume " c " " s; if (!runs[k]) continue
      printf "- %s B, exactly vs %s: %.2fx the records/s, %.2fx the client CPU per record, %.2fx the peak RSS\n", s, c,
        rate(o) / rate(k), cpu_per_m(o) / cpu_per_m(k), rss[o] / rss[k] } }
  for (j = 1; j <= ns; j++) { s = sz[j]; o = "copy exactly " s; k = "copy franz " s; if (!runs[o] || !runs[k]) continue
    printf "- %s B, copier exactly vs franz-go GroupTransactSession: %.2fx the records/s to the last commit, %.2fx of process wall time, %.2fx the client CPU per record, %.2fx the peak RSS\n", s,
      own_rate(o) / own_rate(k), rate(o) / rate(k), cpu_per_m(o) / cpu_per_m(k), rss[o] / rss[k] }
  print ""
  print "Targets:"
  print ""
  for (j = 1; j <= ns; j++) { s = sz[j]; o = "consume exactly " s
    if (!runs[o]) { printf "- %s B: no complete exactly consume run, no consume target\n", s } else {
      best = 0; bestc = ""
      for (i = 1; i <= nc; i++) { c = cl[i]; k = "consume " c " " s; if (c == "exactly" || !runs[k]) continue
        if (rate(k) > best) { best = rate(k); bestc = c } }
      k = "consume franz " s
      if (runs[k])
        printf "- %s B read_committed consume records/s >= 1.25x franz-go's: %s — %s vs %s (%.3fx); the best peer: %s %s (%.3fx)\n", s,
          verdict(rate(o) >= 1.25 * rate(k)), commas(rate(o)), commas(rate(k)), rate(o) / rate(k), bestc, commas(best), rate(o) / best
      else if (bestc != "")
        printf "- %s B read_committed consume: no franz-go run, no target; the best peer: %s %s (%.3fx)\n", s, bestc, commas(best), rate(o) / best }
    o = "copy exactly " s; k = "copy franz " s
    if (runs[o] && runs[k])
      printf "- %s B copier records/s >= 1.25x the copier peer's (franz-go GroupTransactSession): %s — %s vs %s (%.3fx)\n", s,
        verdict(own_rate(o) >= 1.25 * own_rate(k)), commas(own_rate(o)), commas(own_rate(k)), own_rate(o) / own_rate(k)
    else if (runs[o] || runs[k]) printf "- %s B copier: only one copier completed, no target\n", s }
  print ""
  print "Each round, records/s:"
  print ""
  for (j = 1; j <= ns; j++) for (i = 1; i <= nc; i++) { k = "consume " cl[i] " " sz[j]
    if (runs[k]) printf "- %s %s B: %s\n", cl[i], sz[j], each[k] }
  for (j = 1; j <= ns; j++) for (ci = 1; ci <= ncp; ci++) { c = cpl[ci]; k = "copy " c " " sz[j]
    if (runs[k]) printf "- copier %s %s B: %s (of process wall time)\n", c, sz[j], each[k] }
  print ""
  print versions
}
