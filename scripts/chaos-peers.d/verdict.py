#!/usr/bin/env python3
"""What became of one chaos-peers run's records, as an independent reader (kcat) found the log.

    verdict.py produce COUNT OUTCOMES LOG
    verdict.py copy SOURCE_LOG DESTINATION_LOG

A LOG is a topic read back by kcat, one line per record in offset order within each partition:
"PARTITION OFFSET VALUE", the value's first 12 bytes being the record's index. Each mode prints
a line of "name value" pairs, then a second line (described below).

produce: OUTCOMES is the producer's --outcomes file, one line per record whose outcome it
reported: "INDEX ok", "INDEX failed REASON" or "INDEX indeterminate REASON". Fields:

  acked          records the client reported written
  failed         records the client reported not written
  indeterminate  records the client reported may have been written
  unreported     records 0..COUNT-1 with no outcome (never sent, or the run hung and was killed)
  reported_twice outcome lines for an index already reported (a client bug)
  lost           acked records not in the log
  failed_written records reported failed yet in the log (a failure the application retries
                 becomes a duplicate)
  in_log         distinct records in the log
  duplicates     log records whose index was already read
  reordered      log records whose index is below the previous record's in the same partition
                 (one producer sends in index order, so within a partition the log should be too)
  foreign        log lines that are not a record 0..COUNT-1

and on the second line the first failure's reason (or "-").

copy: the source read read_committed, and the copier's destination read read_committed. The
copier writes each record to its source partition, so each destination partition should be
exactly its source partition, record for record, in order. Fields:

  source       records in the source
  copied       source records found in the destination (each at most as often as in the source)
  missing      source records not in the destination
  duplicates   destination records beyond their count in the source
  partitions_out_of_order  partitions whose destination is not their source, in order (given
               nothing missing or duplicated there)

and on the second line the partitions whose sequence differs (or "-").
"""

import sys
from collections import Counter, defaultdict


def read_log(path):
    """Per partition, the indexes in offset order; and the lines that carry no index."""
    partitions, foreign = defaultdict(list), 0
    with open(path, errors="replace") as log:
        for line in log:
            parts = line.split(" ", 2)
            value = parts[2][:12] if len(parts) == 3 else ""
            if not value.isdigit():
                foreign += 1
                continue
            partitions[parts[0]].append(int(value))
    return partitions, foreign


def produce(count, outcomes_path, log_path):
    outcome, reported_twice, first_error = {}, 0, "-"
    with open(outcomes_path, errors="replace") as outcomes:
        for line in outcomes:
            parts = line.rstrip("\n").split(" ", 2)
            if len(parts) < 2 or not parts[0].isdigit() or parts[1] not in ("ok", "failed", "indeterminate"):
                continue
            index = int(parts[0])
            if index in outcome:
                reported_twice += 1
                continue
            outcome[index] = parts[1]
            if parts[1] != "ok" and first_error == "-":
                first_error = (parts[2] if len(parts) > 2 else "?")[:160]
    partitions, foreign = read_log(log_path)
    seen, duplicates, reordered = set(), 0, 0
    for indexes in partitions.values():
        last = -1
        for index in indexes:
            if index >= count:
                foreign += 1
                continue
            if index in seen:
                duplicates += 1
                continue
            seen.add(index)
            if index < last:
                reordered += 1
            last = index
    statuses = Counter(outcome.values())
    acked = {i for i, s in outcome.items() if s == "ok"}
    failed = {i for i, s in outcome.items() if s == "failed"}
    fields = {
        "acked": len(acked),
        "failed": len(failed),
        "indeterminate": statuses["indeterminate"],
        "unreported": sum(1 for i in range(count) if i not in outcome),
        "reported_twice": reported_twice,
        "lost": len(acked - seen),
        "failed_written": len(failed & seen),
        "in_log": len(seen),
        "duplicates": duplicates,
        "reordered": reordered,
        "foreign": foreign,
    }
    return fields, first_error


def copy(source_path, destination_path):
    source, _ = read_log(source_path)
    destination, _ = read_log(destination_path)
    source_count = Counter(i for indexes in source.values() for i in indexes)
    destination_count = Counter(i for indexes in destination.values() for i in indexes)
    copied = sum(min(n, destination_count[i]) for i, n in source_count.items())
    missing = sum(max(0, n - destination_count[i]) for i, n in source_count.items())
    duplicates = sum(max(0, n - source_count[i]) for i, n in destination_count.items())
    out_of_order = sorted(p for p in set(source) | set(destination)
                          if source.get(p, []) != destination.get(p, [])
                          and Counter(source.get(p, [])) == Counter(destination.get(p, [])))
    fields = {
        "source": sum(source_count.values()),
        "copied": copied,
        "missing": missing,
        "duplicates": duplicates,
        "partitions_out_of_order": len(out_of_order),
    }
    return fields, " ".join(out_of_order) or "-"


def main():
    args = sys.argv[1:]
    if len(args) == 4 and args[0] == "produce" and args[1].isdigit():
        fields, second = produce(int(args[1]), args[2], args[3])
    elif len(args) == 3 and args[0] == "copy":
        fields, second = copy(args[1], args[2])
    else:
        sys.exit("usage: verdict.py produce COUNT OUTCOMES LOG | verdict.py copy SOURCE_LOG DESTINATION_LOG")
    print(" ".join(f"{k} {v}" for k, v in fields.items()))
    print(second)


if __name__ == "__main__":
    main()
