# The report of scripts/bench-peers, from its runs-*.tsv (one row per run; columns in
# bench-peers' run_attempt). Variables: clients, sizes, modes (space-separated; the CPU modes
# run: "shared", or "shared pinned" with --pin), pinned (how the pinned mode places the
# processes, in words), compression (the codec, empty for none), versions, notes.
#
# records/s counts distinct records read back (the end-offset delta for a client whose values
# are not unique); a client with duplicates is marked, and is never the best peer of a figure.
function commas(x,   s, out, n) { s = sprintf("%.0f", x); out = ""; n = length(s)
  while (n > 3) { out = "," substr(s, n - 2, 3) out; n -= 3 } return substr(s, 1, n) out }
function is_ours(c) { return c ~ /^exactly/ }
function key(m, c, s) { return m " " c " " s }
function rate(k) { return runs[k] ? rps[k] / runs[k] : 0 }
function cpu_per_m(k) { return recs[k] ? cpu[k] / recs[k] * 1e6 : 0 }
function broker_per_m(k) { return recs[k] ? bcpu[k] / recs[k] * 1e6 : 0 }
function verdict(ok) { return ok ? "**met**" : "**missed**" }
function mode_title(m) { return m == "pinned" ? "pinned (" pinned ")" : "shared (no pinning: brokers, proxy and client share every core)" }
# Figure f of the runs k: rate (records/s, higher is better), cpu and broker (CPU s per M
# records), rss (peak MiB), p99 (ms at the fixed load; lower is better for all but rate).
function figure(k, f) {
  if (f == "rate") return rate(k); if (f == "cpu") return cpu_per_m(k); if (f == "broker") return broker_per_m(k)
  if (f == "rss") return rss[k] / 1024; return p99[k] }
function shown(f, v) { return f == "rate" ? commas(v) : (f == "rss" || f == "p99") ? sprintf("%.0f", v) : sprintf("%.2f", v) }
# The peer with the best figure f in mode m at size s, among the peers that completed the runs
# without a duplicate; "" when there is none.
function best_peer(m, s, f,   i, c, k, b, bv, v) {
  b = ""
  for (i = 1; i <= nc; i++) { c = cl[i]; k = key(m, c, s)
    if (is_ours(c) || !runs[k] || dups[k] || (f == "p99" && !(k in lruns))) continue
    v = figure(k, f)
    if (b == "" || (f == "rate" ? v > bv : v < bv)) { b = c; bv = v } }
  return b }
function print_table(m,   i, j, c, k, d, o) {
  print "| client | record | records/s | MiB/s | client CPU s / M records | peak RSS MiB | broker CPU s / M records | p50 ms | p99 ms | duplicates | reordered |"
  print "|---|---|---|---|---|---|---|---|---|---|---|"
  for (j = 1; j <= ns; j++) for (i = 1; i <= nc; i++) { c = cl[i]; k = key(m, c, sz[j])
    if (!runs[k]) { printf "| %s | %s B | failed:%s | | | | | | | %s | |\n", label[c], sz[j], bad["calib " k] bad["full " k],
      anydups[k] ? "**" anydups[k] "** (failed runs)" : ""; continue }
    d = (k in unchecked) ? "not checked" : (dups[k] ? "**" dups[k] "**" : "0")
    o = (k in unchecked) ? "not checked" : reord[k] + 0
    printf "| %s | %s B | %s%s | %.1f | %.2f | %.0f | %.2f | %s | %s | %s | %s |\n", label[c], sz[j],
      commas(rate(k)), dups[k] ? " (with duplicates)" : "", rate(k) * sz[j] / 1048576, cpu_per_m(k), rss[k] / 1024,
      broker_per_m(k), (k in lruns) ? sprintf("%.0f", p50[k]) : "-", (k in lruns) ? sprintf("%.0f", p99[k]) : "-", d, o } }
# The figures of both modes in one row per client and size.
function print_side_by_side(   i, j, c, ks, kp, s) {
  print "| client | record | records/s shared | records/s pinned | client CPU s / M shared | client CPU s / M pinned | broker CPU s / M shared | broker CPU s / M pinned | peak RSS MiB shared | peak RSS MiB pinned |"
  print "|---|---|---|---|---|---|---|---|---|---|"
  for (j = 1; j <= ns; j++) for (i = 1; i <= nc; i++) { c = cl[i]; s = sz[j]; ks = key("shared", c, s); kp = key("pinned", c, s)
    printf "| %s | %s B | %s | %s | %s | %s | %s | %s | %s | %s |\n", label[c], s,
      runs[ks] ? commas(rate(ks)) (dups[ks] ? " (with duplicates)" : "") : "failed", runs[kp] ? commas(rate(kp)) (dups[kp] ? " (with duplicates)" : "") : "failed",
      runs[ks] ? sprintf("%.2f", cpu_per_m(ks)) : "-", runs[kp] ? sprintf("%.2f", cpu_per_m(kp)) : "-",
      runs[ks] ? sprintf("%.2f", broker_per_m(ks)) : "-", runs[kp] ? sprintf("%.2f", broker_per_m(kp)) : "-",
      runs[ks] ? sprintf("%.0f", rss[ks] / 1024) : "-", runs[kp] ? sprintf("%.0f", rss[kp] / 1024) : "-" } }
# For each size and mode, each figure's best peer and exactly's figure beside it (the loop;
# p99 from the channel mode, the one of ours with per-record latency).
function print_best(   m, mi, j, s, f, b, o, k, ov, bv, names, nf, fi) {
  nf = split("rate cpu rss broker p99", names, " ")
  title["rate"] = "records/s"; title["cpu"] = "client CPU s / M records"; title["rss"] = "peak RSS MiB"
  title["broker"] = "broker CPU s / M records"; title["p99"] = "p99 ms at the fixed load"
  print "| record | CPUs | figure | best peer | the peer's | exactly's | exactly / best peer |"
  print "|---|---|---|---|---|---|---|"
  for (j = 1; j <= ns; j++) for (mi = 1; mi <= nm; mi++) { m = md[mi]; s = sz[j]
    for (fi = 1; fi <= nf; fi++) { f = names[fi]
      o = key(m, (f == "p99" ? "exactly-channel" : "exactly"), s)
      if (!runs[o] || (f == "p99" && !(o in lruns))) continue
      b = best_peer(m, s, f); if (b == "") continue
      k = key(m, b, s); ov = figure(o, f); bv = figure(k, f)
      printf "| %s B | %s | %s | %s | %s | %s%s | %s |\n", s, m, title[f], b, shown(f, bv), shown(f, ov),
        f == "p99" ? " (channel mode)" : "", (bv > 0 ? sprintf("%.2fx", ov / bv) : "-") } } }
function print_targets(m, s,   o, b, k, skipped, i, c, bm, bmc, modes_ran, ch, e) {
  o = key(m, "exactly", s)
  if (!runs[o]) { printf "- %s B: no full-speed exactly loop run, no targets\n", s; return }
  skipped = ""
  for (i = 1; i <= nc; i++) { c = cl[i]; k = key(m, c, s); if (!is_ours(c) && runs[k] && dups[k]) skipped = skipped " " c " (" commas(rate(k)) ", duplicates)" }
  skipped = skipped == "" ? "" : "; not counted as best:" skipped
  b = best_peer(m, s, "rate"); k = key(m, b, s)
  if (b != "" && m == "pinned")
    printf "- %s B records/s >= 1.5x the best peer: %s — %s vs %s %s (%.3fx)%s\n", s, verdict(rate(o) >= 1.5 * rate(k)),
      commas(rate(o)), b, commas(rate(k)), rate(o) / rate(k), skipped
  else if (b != "" && compression != "")
    printf "- %s B, %s: records/s >= 1.0x the best peer's at <= its client CPU per record: %s — %s vs %s %s (%.3fx) at %.2f vs %.2f s / M records (%.3fx)%s\n",
      s, compression, verdict(rate(o) >= rate(k) && cpu_per_m(o) <= cpu_per_m(k)), commas(rate(o)), b, commas(rate(k)),
      rate(o) / rate(k), cpu_per_m(o), cpu_per_m(k), cpu_per_m(o) / cpu_per_m(k), skipped
  else if (b != "")
    printf "- %s B records/s >= 1.25x the best peer: %s — %s vs %s %s (%.3fx)%s\n", s, verdict(rate(o) >= 1.25 * rate(k)),
      commas(rate(o)), b, commas(rate(k)), rate(o) / rate(k), skipped
  if (m == "pinned") {
    e = best_peer(m, s, "cpu"); k = key(m, e, s)
    if (e != "") printf "- %s B client CPU per record <= 0.5x the most efficient peer's: %s — %.2f vs %s %.2f s / M records (%.3fx)\n",
      s, verdict(cpu_per_m(o) <= 0.5 * cpu_per_m(k)), cpu_per_m(o), e, cpu_per_m(k), cpu_per_m(o) / cpu_per_m(k)
    if (s == 100) printf "- 100 B client CPU per record <= 0.3 s / M records: %s — %.2f\n", verdict(cpu_per_m(o) <= 0.3), cpu_per_m(o)
  }
  k = key(m, "franz", s)
  if (runs[k]) printf "- %s B broker CPU per record on our traffic <= franz-go's: %s — %.2f vs %.2f s / M records (%.3fx)\n", s,
    verdict(broker_per_m(o) <= broker_per_m(k)), broker_per_m(o), broker_per_m(k), broker_per_m(o) / broker_per_m(k)
  if (m == "pinned") return
  # p99 at half load: ours (channel mode, the one with per-record latency) <= the best peer's.
  ch = key(m, "exactly-channel", s); b = best_peer(m, s, "p99"); k = key(m, b, s)
  if ((ch in lruns) && b != "")
    printf "- %s B p99 at half load <= the best peer's: %s — %.0f ms (channel mode) vs %s %.0f ms\n", s, verdict(p99[ch] <= p99[k]), p99[ch], b, p99[k]
  # Loop >= 0.95x our best mode (when another mode of ours ran).
  bm = 0; bmc = ""; modes_ran = 0
  for (i = 1; i <= nc; i++) { c = cl[i]; k = key(m, c, s); if (is_ours(c) && runs[k]) modes_ran++; if (is_ours(c) && rate(k) > bm) { bm = rate(k); bmc = c } }
  if (modes_ran > 1)
    printf "- %s B loop >= 0.95x our best mode (%s): %s — %s vs %s (%.3fx)\n", s, bmc, verdict(rate(o) >= 0.95 * bm), commas(rate(o)), commas(bm), rate(o) / bm
  # current_thread loop >= 0.8x the multi-thread loop.
  k = key(m, "exactly-current", s)
  if (runs[k]) printf "- %s B current_thread loop >= 0.8x the multi-thread loop: %s — %s vs %s (%.3fx)\n", s, verdict(rate(k) >= 0.8 * rate(o)), commas(rate(k)), commas(rate(o)), rate(k) / rate(o)
  # Peak RSS <= a quarter of Java's.
  k = key(m, "java", s)
  if (runs[k]) printf "- %s B peak RSS <= 0.25x Java's: %s — %.0f vs %.0f MiB (%.3fx)\n", s, verdict(rss[o] <= 0.25 * rss[k]), rss[o] / 1024, rss[k] / 1024, rss[o] / rss[k]
}
BEGIN {
  FS = "\t"
  nc = split(clients, cl, " "); ns = split(sizes, sz, " "); nm = split(modes, md, " ")
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
# 20 read 21 distinct 22 duplicates 23 reordered 24 mode
{ k = key($24, $3, $4) }
$18 != "ok" && $18 != "short" { bad[$1 " " k] = bad[$1 " " k] " " $18 }
# Duplicates read back from any run, failed or not (a failed run's are shown with its failure).
($1 == "full" || $1 == "lat") && $22 ~ /^[0-9]+$/ { anydups[k] += $22 }
($1 == "full" || $1 == "lat") && $18 == "ok" { if ($22 == "-") unchecked[k] = 1; else { dups[k] += $22; reord[k] += $23; checked[k]++ } }
$1 == "full" && $18 == "ok" { rps[k] += $7 / $8; runs[k]++; recs[k] += $7
  cpu[k] += $9 + $10; bcpu[k] += $14; if ($11 > rss[k]) rss[k] = $11
  each[k] = each[k] (each[k] == "" ? "" : " / ") commas($7 / $8) }
$1 == "lat" && $18 == "ok" { p50[k] += $12; p99[k] += $13; lruns[k]++; load[$4] = $6
  lat[k] = lat[k] (lat[k] == "" ? "" : " / ") $12 "/" $13 }
END {
  for (k in lruns) { p50[k] /= lruns[k]; p99[k] /= lruns[k] }
  for (mi = 1; mi <= nm; mi++) {
    if (nm > 1) { printf "CPUs %s:\n\n", mode_title(md[mi]) }
    print_table(md[mi]); print ""
  }
  if (nm > 1) { print "Side by side, shared and pinned:"; print ""; print_side_by_side(); print "" }
  for (j = 1; j <= ns; j++)
    if (sz[j] in load) printf "p50/p99: send-to-ack latency at a fixed offered load of %s records/s of %s B (half the slowest client's full-speed rate, CPUs shared), mean of 2 runs; the loop rows are not run at the fixed load, so only the channel mode measures ours.\n", commas(load[sz[j]]), sz[j]
  print "records/s: distinct records read back from the topic (kcat) per wall second, mean of the two full-speed rounds; duplicates and reordered (a record behind an earlier-sent one of its partition) summed over the full-speed and latency runs read back."
  if (nm > 1) print "Pinned mode: full-speed runs only (the latency runs are made with the CPUs shared); each round runs every client in both modes one after the other (round 1 shared first, round 2 pinned first)."
  print ""
  print "The best peer of each figure (highest records/s, lowest of the others; a peer with duplicates is never the best) and exactly beside it:"
  print ""
  print_best()
  print ""
  for (mi = 1; mi <= nm; mi++) { m = md[mi]
    printf "Ratios of exactly (loop mode) to each peer, CPUs %s:\n\n", m
    for (j = 1; j <= ns; j++) { s = sz[j]; o = key(m, "exactly", s); ch = key(m, "exactly-channel", s); if (!runs[o]) continue
      for (i = 1; i <= nc; i++) { c = cl[i]; if (is_ours(c)) continue; k = key(m, c, s); if (!runs[k]) continue
        printf "- %s B, exactly vs %s: %.2fx the records/s, %.2fx the client CPU per record, %.2fx the broker CPU per record, %.2fx the peak RSS", s, c,
          rate(o) / rate(k), cpu_per_m(o) / cpu_per_m(k), (broker_per_m(k) > 0 ? broker_per_m(o) / broker_per_m(k) : 0), rss[o] / rss[k]
        if ((ch in lruns) && (k in lruns)) printf "; p99 %.0f ms (channel mode) vs %.0f ms", p99[ch], p99[k]
        print "" } }
    print ""
  }
  for (mi = 1; mi <= nm; mi++) { m = md[mi]
    printf "Targets, CPUs %s:\n\n", m
    for (j = 1; j <= ns; j++) print_targets(m, sz[j])
    print ""
  }
  print "Each round (given order, then reversed), full-speed records/s and p50/p99 ms at the fixed load:"
  print ""
  for (mi = 1; mi <= nm; mi++) for (j = 1; j <= ns; j++) for (i = 1; i <= nc; i++) { k = key(md[mi], cl[i], sz[j])
    if (runs[k]) printf "- %s%s %s B: %s records/s; %s ms\n", cl[i], (nm > 1 ? ", " md[mi] : ""), sz[j], each[k], (k in lat) ? lat[k] : "-" }
  print ""
  if (notes != "") { print notes; print "" }
  print versions
}
