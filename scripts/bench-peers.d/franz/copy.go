// franz-perf copy: franz-go's exactly-once copier, the peer of examples/copy.rs for
// scripts/bench-peers --consume:
//
//	franz-perf copy BOOTSTRAP SOURCE DESTINATION GROUP TRANSACTIONAL_ID \
//	    [--commit-records N] [--commit-ms MS] [--idle-seconds S] [--batch-size BYTES]
//
// The same arguments, transactions and output as examples/copy: a GroupTransactSession (a
// group member reading SOURCE read_committed from the start, and a transactional producer)
// writes every record to the same partition of DESTINATION, and each transaction commits the
// consumed offsets with the records (KIP-98, KIP-447). A transaction begins with the first
// record polled and ends after N records or MS milliseconds, whichever comes first (defaults
// 1,000 / 100, examples/copy's); --batch-size sets the producer's largest batch
// (ProducerBatchMaxBytes, as batch.size does for examples/copy; default franz-go's). The clock
// starts once the producer ID is loaded (examples/copy's starts after init_transactions); one line per committed transaction gives
// the time on it, its records, how long it took (from the poll that brought its first record to
// the end of its commit, as examples/copy measures a step) and its records per source partition,
// in examples/copy's format, then "copied N records" after S seconds without a record (0: never
// stop).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func copyUsage(problem string) {
	fmt.Fprintf(os.Stderr, "franz-perf copy: %s\n", problem)
	fmt.Fprintln(os.Stderr, "usage: franz-perf copy BOOTSTRAP SOURCE DESTINATION GROUP TRANSACTIONAL_ID "+
		"[--commit-records N] [--commit-ms MS] [--idle-seconds S] [--batch-size BYTES]")
	os.Exit(2)
}

func copyFatal(what string, err error) {
	fmt.Fprintf(os.Stderr, "franz-perf copy: %s: %v\n", what, err)
	os.Exit(1)
}

// pollOnce polls at most max records, waiting at most wait; it reports fetch errors other than
// the poll's own deadline.
func pollOnce(sess *kgo.GroupTransactSession, max int, wait time.Duration) []*kgo.Record {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	fetches := sess.PollRecords(ctx, max)
	fetches.EachError(func(t string, p int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) {
			fmt.Fprintf(os.Stderr, "franz-perf copy: %s-%d: %v\n", t, p, err)
		}
	})
	return fetches.Records()
}

func copyMain(argv []string) {
	commitRecords, commitMs, idleSeconds, batchSize := 1000, 100, 0, 0
	var positional []string
	for i := 0; i < len(argv); i++ {
		flag := argv[i]
		if !strings.HasPrefix(flag, "--") {
			positional = append(positional, flag)
			continue
		}
		if i+1 >= len(argv) {
			copyUsage(flag + " takes a number")
		}
		i++
		n, err := strconv.Atoi(argv[i])
		if err != nil || n < 0 {
			copyUsage(flag + " takes a number")
		}
		switch flag {
		case "--commit-records":
			commitRecords = max(n, 1)
		case "--commit-ms":
			commitMs = n
		case "--idle-seconds":
			idleSeconds = n
		case "--batch-size":
			batchSize = n
		default:
			copyUsage("unknown flag " + flag)
		}
	}
	if len(positional) != 5 {
		copyUsage("five arguments needed")
	}
	bootstrap, source, destination, group, txnID := positional[0], positional[1], positional[2], positional[3], positional[4]
	interval := time.Duration(commitMs) * time.Millisecond
	idle := time.Duration(idleSeconds) * time.Second

	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(bootstrap, ",")...),
		kgo.TransactionalID(txnID),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(source),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// Each record goes to its source partition, as examples/copy sends it.
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	}
	if batchSize > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(int32(min(batchSize, 1<<30))))
	}
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		copyFatal("creating the session", err)
	}
	ctx := context.Background()
	if _, _, err := sess.Client().ProducerID(ctx); err != nil {
		copyFatal("loading the producer ID", err)
	}

	started := time.Now()
	lastRecord := started
	total := 0
	perPartition := map[int32]int{}
	for {
		// Wait for the first record of the next transaction, an interval at a time.
		polled := time.Now()
		records := pollOnce(sess, commitRecords, max(interval, time.Millisecond))
		if len(records) == 0 {
			if idle > 0 && time.Since(lastRecord) >= idle {
				break
			}
			continue
		}
		if err := sess.Begin(); err != nil {
			copyFatal("beginning a transaction", err)
		}
		began := time.Now()
		promise := kgo.AbortingFirstErrPromise(sess.Client())
		in := 0
		clear(perPartition)
		for {
			for _, r := range records {
				sess.Produce(ctx, &kgo.Record{Topic: destination, Partition: r.Partition, Key: r.Key, Value: r.Value,
					Headers: r.Headers}, promise.Promise())
				perPartition[r.Partition]++
			}
			in += len(records)
			left := interval - time.Since(began)
			if in >= commitRecords || left <= 0 {
				break
			}
			records = pollOnce(sess, commitRecords-in, left)
		}
		lastRecord = time.Now()
		committed, err := sess.End(ctx, kgo.TransactionEndTry(promise.Err() == nil))
		switch {
		case committed:
			total += in
			took := time.Since(polled)
			fmt.Printf("%8.1fs committed %d in / %d out (total %d) in %.1f ms; partitions %s\n", time.Since(started).Seconds(),
				in, in, total, took.Seconds()*1e3, partitionCounts(perPartition))
		case err != nil:
			copyFatal("ending a transaction", err)
		default:
			// A rebalance or a failed record aborted it; End rewound the session to the
			// committed offsets, so its input is copied again.
			fmt.Fprintf(os.Stderr, "transaction aborted and its input rewound: %v\n", promise.Err())
		}
	}
	sess.Close()
	fmt.Printf("copied %d records\n", total)
}

// partitionCounts formats records per partition as examples/copy does: "0:167 1:166 ...", in
// partition order.
func partitionCounts(counts map[int32]int) string {
	partitions := make([]int32, 0, len(counts))
	for p := range counts {
		partitions = append(partitions, p)
	}
	slices.Sort(partitions)
	parts := make([]string, len(partitions))
	for i, p := range partitions {
		parts[i] = fmt.Sprintf("%d:%d", p, counts[p])
	}
	return strings.Join(parts, " ")
}
