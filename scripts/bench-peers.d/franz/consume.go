// franz-perf consume: franz-go's group consumer reading a topic the way examples/consume_perf.rs's
// `consume` reads it with ours, for scripts/bench-peers --consume:
//
//	franz-perf consume --topic T --num-records N [--timeout-seconds S] --consumer-props k=v [k=v ...]
//
// Joins the group in the properties (group.id, bootstrap.servers), reads read_committed from the
// start until N records arrived, counts the distinct committed indices (the 12 digits at the
// front of each value, below N) and the others, and prints consume_perf's summary line.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func consumeUsage(problem string) {
	fmt.Fprintf(os.Stderr, "franz-perf consume: %s\n", problem)
	fmt.Fprintln(os.Stderr, "usage: franz-perf consume --topic T --num-records N [--timeout-seconds S] --consumer-props k=v [k=v ...]")
	os.Exit(2)
}

// sequence is the index at the front of a value, or -1.
func sequence(value []byte) int64 {
	if len(value) < 12 {
		return -1
	}
	var n int64
	for _, b := range value[:12] {
		if b < '0' || b > '9' {
			return -1
		}
		n = n*10 + int64(b-'0')
	}
	return n
}

func consumeMain(argv []string) {
	var topic, group string
	var n int64
	timeout := 120 * time.Second
	opts := []kgo.Opt{
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
	}
	for i := 0; i < len(argv); i++ {
		flag := argv[i]
		if flag == "--consumer-props" {
			for i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "--") {
				i++
				k, v, ok := strings.Cut(argv[i], "=")
				if !ok {
					consumeUsage(argv[i] + " is not k=v")
				}
				switch k {
				case "bootstrap.servers":
					opts = append(opts, kgo.SeedBrokers(strings.Split(v, ",")...))
				case "group.id":
					group = v
				default:
					consumeUsage(k + ": no kgo option for this property")
				}
			}
			continue
		}
		if i+1 >= len(argv) {
			consumeUsage(flag + " needs a value")
		}
		i++
		var err error
		switch flag {
		case "--topic":
			topic = argv[i]
		case "--num-records":
			n, err = strconv.ParseInt(argv[i], 10, 64)
		case "--timeout-seconds":
			var s int
			s, err = strconv.Atoi(argv[i])
			timeout = time.Duration(s) * time.Second
		default:
			consumeUsage("unknown flag " + flag)
		}
		if err != nil {
			consumeUsage(flag + ": " + err.Error())
		}
	}
	if topic == "" || n <= 0 || group == "" {
		consumeUsage("--topic, --num-records and group.id are required")
	}
	started := time.Now()
	client, err := kgo.NewClient(append(opts, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic))...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "franz-perf consume: %v\n", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	seen := make([]uint64, (n+63)/64)
	var received, distinct, foreign int64
	var first time.Duration = -1
	for received < n {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			fmt.Fprintf(os.Stderr, "franz-perf consume: timed out with %d of %d records\n", received, n)
			break
		}
		fetches.EachError(func(t string, p int32, err error) {
			fmt.Fprintf(os.Stderr, "franz-perf consume: %s-%d: %v\n", t, p, err)
		})
		fetches.EachRecord(func(r *kgo.Record) {
			if first < 0 {
				first = time.Since(started)
			}
			received++
			if i := sequence(r.Value); i >= 0 && i < n {
				if seen[i/64]&(1<<(i%64)) == 0 {
					seen[i/64] |= 1 << (i % 64)
					distinct++
				}
			} else {
				foreign++
			}
		})
	}
	last := time.Since(started)
	if first < 0 {
		first = last
	}
	fmt.Printf("consumed %d records: distinct %d, foreign %d, first record after %.3f s, last after %.3f s\n",
		received, distinct, foreign, first.Seconds(), last.Seconds())
	client.Close()
	if distinct != n || foreign != 0 {
		os.Exit(1)
	}
}
