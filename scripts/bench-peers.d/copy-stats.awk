# The figures of one copier run of scripts/bench-peers --consume, from what the copier printed:
# one line per committed transaction, as examples/copy and franz-perf copy both print them,
#
#      2.4s committed 1000 in / 1000 out (total 9000) in 61.2 ms; partitions 0:167 1:167 2:166
#
# Variable: partitions (the source topic's partition count; a partition a transaction did not
# read counts as having copied nothing). Prints one line, "-" for each figure it cannot tell:
#
#   transactions/s  p99-ms  spread  spread-share  finish-spread-s
#
# transactions/s: committed transactions over the copier's clock at its last commit; p99-ms: the
# 99th percentile of the transactions' times (from the poll that brought a transaction's first
# record to the end of its commit), the first one left out (its poll waited for the group join);
# spread: the largest difference, at any commit, between the
# records two source partitions have had copied (how far the lag of one partition ran ahead of
# another's), and spread-share: that as a share of the records of the partition with the most;
# finish-spread-s: from the commit that finished the first partition (copied its last record)
# to the one that finished the last.
/ committed [0-9]+ in .* in [0-9.]+ ms; partitions / {
  t = $1; sub(/s$/, "", t)
  for (i = 1; i <= NF; i++) if ($i == "ms;") ms = $(i - 1)
  n++; if (n > 1) lat[n - 1] = ms + 0
  last = t + 0
  for (i = 1; i <= NF; i++) if ($i == "partitions") break
  for (i++; i <= NF; i++) { split($i, pc, ":"); done[pc[1]] += pc[2]; finished[pc[1]] = last }
  most = -1; least = -1
  for (p = 0; p < partitions; p++) {
    c = done[p] + 0
    if (most < 0 || c > most) most = c
    if (least < 0 || c < least) least = c
  }
  if (most - least > spread) spread = most - least
}
END {
  if (n == 0 || last <= 0) { print "- - - - -"; exit }
  # Insertion sort: a copy commits at most a few thousand transactions.
  m = n - 1
  for (i = 2; i <= m; i++) { v = lat[i]; for (j = i - 1; j >= 1 && lat[j] > v; j--) lat[j + 1] = lat[j]; lat[j + 1] = v }
  k = int(0.99 * m); if (k < 0.99 * m) k++; if (k < 1) k = 1
  p99 = (m > 0 ? sprintf("%.1f", lat[k]) : "-")
  first = -1; latest = 0; total = 0
  for (p = 0; p < partitions; p++) {
    if (done[p] > total) total = done[p]
    if (!(p in finished)) continue
    if (first < 0 || finished[p] < first) first = finished[p]
    if (finished[p] > latest) latest = finished[p]
  }
  share = (total > 0 ? spread / total : 0)
  finish = (first < 0 ? "-" : sprintf("%.1f", latest - first))
  printf "%.1f %s %d %.3f %s\n", n / last, p99, spread, share, finish
}
