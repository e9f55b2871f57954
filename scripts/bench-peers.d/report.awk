# The report of scripts/bench-peers, from its runs-*.tsv (one row per run; columns in
# bench-peers' run_attempt). Variables: clients, sizes (space-separated), versions, notes.
#
# records/s counts distinct records read back (the end-offset delta for a client whose values
# are not unique); a client with duplicates is marked, and is not "best" for a target.
function commas(x,   s, out, n) { s = sprintf("%.0f", x); out = ""; n = length(s)
  while (n > 3) { out = "," substr(s, n - 2, 3) out; n -= 3 } return substr(s, 1, n) out }
function is_ours(c) { return c ~ /^exactly/ }
function rate(k) { return runs[k] ? rps[k] / runs[k] : 0 }
function cpu_per_m(k) { return recs[k] ? cpu[k] / recs[k] * 1e6 : 0 }
function verdict(ok) { return ok ? "**met**" : "**missed**" }
BEGIN {
  FS = "\t"
  nc = split(clients, cl, " "); ns = split(sizes, sz, " ")
  label["exactly"] = "exactly, loop (`perf --mode loop`)"
  label["exactly-channel"] = "exactly, channel (`perf --mode channel`)"
  label["exactly-current"] = "exactly, loop on current_thread (`perf --mode loop --runtime current`)"
  label["java"] = "Java producer (`JavaPerf`)"
  label["java-pp"] = "Java producer (`ProducerPerformance`)"
  label["rust-rdkafka"] = "rust-rdkafka FutureProducer (bundled librdkafka)"
  label["rdkafka"] = "librdkafka C, Debian's (`rdkafka_perf`)"
  label["franz"] = "franz-go (`franz-perf`)"
  label["krafka"] = "krafka (`krafka-perf`)"
  label["kacrab"] = "kacrab, 5 in flight (`kacrab-perf`)"
  label["kacrab-inflight1"] = "kacrab, max.in.flight=1 (`kacrab-perf`)"
}
# Columns: 1 phase 2 round 3 client 4 size 5 count 6 rate 7 counted 8 wall 9 user 10 sys 11 rss
# 12 p50 13 p99 14 broker_cpu 15 proxy_cpu 16 load1 17 claimed 18 status 19 offset_delta
# 20 read 21 distinct 22 duplicates 23 reordered
$18 != "ok" && $18 != "short" { bad[$1 " " $3 " " $4] = bad[$1 " " $3 " " $4] " " $18 }
# Duplicates read back from any run, failed or not (a failed run's are shown with its failure).
($1 == "full" || $1 == "lat") && $22 ~ /^[0-9]+$/ { anydups[$3 " " $4] += $22 }
($1 == "full" || $1 == "lat") && $18 == "ok" { k = $3 " " $4
  if ($22 == "-") unchecked[k] = 1; else { dups[k] += $22; reord[k] += $23; checked[k]++ } }
$1 == "full" && $18 == "ok" { k = $3 " " $4; rps[k] += $7 / $8; runs[k]++; recs[k] += $7
  cpu[k] += $9 + $10; bcpu[k] += $14; if ($11 > rss[k]) rss[k] = $11
  each[k] = each[k] (each[k] == "" ? "" : " / ") commas($7 / $8) }
$1 == "lat" && $18 == "ok" { k = $3 " " $4; p50[k] += $12; p99[k] += $13; lruns[k]++; load[$4] = $6
  lat[k] = lat[k] (lat[k] == "" ? "" : " / ") $12 "/" $13 }
END {
  for (k in lruns) { p50[k] /= lruns[k]; p99[k] /= lruns[k] }
  print "| client | record | records/s | MiB/s | client CPU s / M records | peak RSS MiB | broker CPU s / M records | p50 ms | p99 ms | duplicates | reordered |"
  print "|---|---|---|---|---|---|---|---|---|---|---|"
  for (j = 1; j <= ns; j++) for (i = 1; i <= nc; i++) { c = cl[i]; k = c " " sz[j]
    if (!runs[k]) { printf "| %s | %s B | failed:%s | | | | | | | %s | |\n", label[c], sz[j], bad["calib " k] bad["full " k],
      anydups[k] ? "**" anydups[k] "** (failed runs)" : ""; continue }
    d = (k in unchecked) ? "not checked" : (dups[k] ? "**" dups[k] "**" : "0")
    o = (k in unchecked) ? "not checked" : reord[k] + 0
    printf "| %s | %s B | %s%s | %.1f | %.2f | %.0f | %.2f | %s | %s | %s | %s |\n", label[c], sz[j],
      commas(rate(k)), dups[k] ? " (with duplicates)" : "", rate(k) * sz[j] / 1048576, cpu_per_m(k), rss[k] / 1024,
      bcpu[k] / recs[k] * 1e6, (k in lruns) ? sprintf("%.0f", p50[k]) : "-", (k in lruns) ? sprintf("%.0f", p99[k]) : "-", d, o }
  print ""
  for (j = 1; j <= ns; j++)
    if (sz[j] in load) printf "p50/p99: send-to-ack latency at a fixed offered load of %s records/s of %s B (half the slowest client's full-speed rate), mean of 2 runs; the loop rows are not run at the fixed load, so only the channel mode measures ours.\n", commas(load[sz[j]]), sz[j]
  print "records/s: distinct records read back from the topic (kcat) per wall second, mean of the two full-speed rounds; duplicates and reordered (a record behind an earlier-sent one of its partition) summed over the full-speed and latency runs read back."
  print ""
  print "Ratios of exactly (loop mode) to each peer:"
  print ""
  for (j = 1; j <= ns; j++) { s = sz[j]; o = "exactly " s; ch = "exactly-channel " s; if (!runs[o]) continue
    for (i = 1; i <= nc; i++) { c = cl[i]; if (is_ours(c)) continue; k = c " " s; if (!runs[k]) continue
      printf "- %s B, exactly vs %s: %.2fx the records/s, %.2fx the client CPU per record, %.2fx the peak RSS", s, c,
        rate(o) / rate(k), cpu_per_m(o) / cpu_per_m(k), rss[o] / rss[k]
      if ((ch in lruns) && (k in lruns)) printf "; p99 %.0f ms (channel mode) vs %.0f ms", p99[ch], p99[k]
      print "" } }
  print ""
  print "Issue-13 targets:"
  print ""
  for (j = 1; j <= ns; j++) { s = sz[j]; o = "exactly " s
    if (!runs[o]) { printf "- %s B: no full-speed exactly loop run, no targets\n", s; continue }
    # Records/s: 1.25x the best clean peer.
    best = 0; bestc = ""; skipped = ""
    for (i = 1; i <= nc; i++) { c = cl[i]; k = c " " s; if (is_ours(c) || !runs[k]) continue
      if (dups[k]) { skipped = skipped " " c " (" commas(rate(k)) ", duplicates)"; continue }
      if (rate(k) > best) { best = rate(k); bestc = c } }
    if (bestc != "")
      printf "- %s B records/s >= 1.25x the best peer: %s — %s vs %s %s (%.3fx)%s\n", s, verdict(rate(o) >= 1.25 * best),
        commas(rate(o)), bestc, commas(best), rate(o) / best, skipped == "" ? "" : "; not counted as best:" skipped
    # CPU per record: 0.5x librdkafka's at 100 B.
    if (s == 100) { r = ("rust-rdkafka " s in runs) ? "rust-rdkafka " s : "rdkafka " s
      if (runs[r]) printf "- 100 B client CPU per record <= 0.5x librdkafka's (%s): %s — %.2f vs %.2f s / M records (%.3fx)\n",
        substr(r, 1, index(r, " ") - 1), verdict(cpu_per_m(o) <= 0.5 * cpu_per_m(r)), cpu_per_m(o), cpu_per_m(r), cpu_per_m(o) / cpu_per_m(r) }
    # p99 at half load: ours (channel mode, the one with per-record latency) <= the best peer's.
    ch = "exactly-channel " s; bestp = -1; bestpc = ""
    for (i = 1; i <= nc; i++) { c = cl[i]; k = c " " s; if (is_ours(c) || !(k in lruns)) continue
      if (bestp < 0 || p99[k] < bestp) { bestp = p99[k]; bestpc = c } }
    if ((ch in lruns) && bestp >= 0)
      printf "- %s B p99 at half load <= the best peer's: %s — %.0f ms (channel mode) vs %s %.0f ms\n", s, verdict(p99[ch] <= bestp), p99[ch], bestpc, bestp
    # Loop >= 0.95x our best mode.
    bm = 0; bmc = ""
    for (i = 1; i <= nc; i++) { c = cl[i]; k = c " " s; if (is_ours(c) && rate(k) > bm) { bm = rate(k); bmc = c } }
    if (bmc != "")
      printf "- %s B loop >= 0.95x our best mode (%s): %s — %s vs %s (%.3fx)\n", s, bmc, verdict(rate(o) >= 0.95 * bm), commas(rate(o)), commas(bm), rate(o) / bm
    # current_thread loop >= 0.8x the multi-thread loop.
    k = "exactly-current " s
    if (runs[k]) printf "- %s B current_thread loop >= 0.8x the multi-thread loop: %s — %s vs %s (%.3fx)\n", s, verdict(rate(k) >= 0.8 * rate(o)), commas(rate(k)), commas(rate(o)), rate(k) / rate(o)
    # Peak RSS <= a quarter of Java's.
    k = "java " s
    if (runs[k]) printf "- %s B peak RSS <= 0.25x Java's: %s — %.0f vs %.0f MiB (%.3fx)\n", s, verdict(rss[o] <= 0.25 * rss[k]), rss[o] / 1024, rss[k] / 1024, rss[o] / rss[k]
  }
  print ""
  print "Each round (given order, then reversed), full-speed records/s and p50/p99 ms at the fixed load:"
  print ""
  for (j = 1; j <= ns; j++) for (i = 1; i <= nc; i++) { k = cl[i] " " sz[j]
    if (runs[k]) printf "- %s %s B: %s records/s; %s ms\n", cl[i], sz[j], each[k], (k in lat) ? lat[k] : "-" }
  print ""
  if (notes != "") { print notes; print "" }
  print versions
}
