// Command franz-perf drives franz-go's producer the way examples/perf.rs drives ours, so that
// scripts/bench-peers compares the clients and not the benchmark programs (and, as
// `franz-perf consume`, its consumer: see consume.go; as `franz-perf copy`, its exactly-once
// copier, GroupTransactSession: see copy.go).
//
//	franz-perf --topic T --num-records N --record-size BYTES --throughput RECORDS_PER_SEC|-1 \
//	    [--payload-file F] [--unique-values] [--outcomes FILE] --producer-props k=v [k=v ...]
//
// Same flags, same measurement and same summary line as examples/perf.rs (which copies Kafka's
// ProducerPerformance):
//   - every record is keyless, with one shared payload of BYTES 'x' bytes, or with
//     --payload-file the file's lines in turn (the same realistic bytes for every client);
//     with --unique-values, record i's value is a copy whose first 12 bytes are i in zero-padded
//     decimal, so that scripts/bench-peers can count distinct records read back (duplicates);
//   - --throughput R paces record i to start + i/R (sleeping when ahead); -1 means as fast as
//     the producer accepts records (Produce blocks while the buffer is full);
//   - latency = the time from just before Produce to the record's promise, truncated to whole
//     milliseconds; percentiles are the sorted latency at index floor((n-1)*p);
//   - --outcomes FILE (with --unique-values) writes one line per record as its promise runs,
//     "INDEX ok" or "INDEX failed REASON", written through at once so that a run killed as hung
//     keeps what it had reported (scripts/chaos-peers reads it; kgo has no way to say a failed
//     record may have been written, so there is no "indeterminate").
//
// --producer-props takes the Java producer's names and maps each to its kgo option (see
// producerOptions); a name without a mapping is an error rather than silently ignored.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

type args struct {
	topic       string
	numRecords  int
	recordSize  int
	throughput  float64
	payloadFile string
	unique      bool
	outcomes    string
	props       map[string]string
}

func usage(problem string) {
	fmt.Fprintf(os.Stderr, "franz-perf: %s\n", problem)
	fmt.Fprintln(os.Stderr, "usage: franz-perf --topic T --num-records N --record-size BYTES "+
		"--throughput RECORDS_PER_SEC|-1 [--payload-file F] [--unique-values] [--outcomes FILE] --producer-props k=v [k=v ...]")
	os.Exit(2)
}

func parseArgs() args {
	a := args{recordSize: 100, throughput: -1, props: map[string]string{}}
	argv := os.Args[1:]
	for i := 0; i < len(argv); i++ {
		flag := argv[i]
		if flag == "--unique-values" {
			a.unique = true
			continue
		}
		if flag == "--producer-props" {
			for i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "--") {
				i++
				k, v, ok := strings.Cut(argv[i], "=")
				if !ok {
					usage(argv[i] + " is not k=v")
				}
				a.props[k] = v
			}
			continue
		}
		if i+1 >= len(argv) {
			usage(flag + " needs a value")
		}
		i++
		value := argv[i]
		var err error
		switch flag {
		case "--topic":
			a.topic = value
		case "--num-records":
			a.numRecords, err = strconv.Atoi(value)
		case "--record-size":
			a.recordSize, err = strconv.Atoi(value)
		case "--throughput":
			a.throughput, err = strconv.ParseFloat(value, 64)
		case "--payload-file":
			a.payloadFile = value
		case "--outcomes":
			a.outcomes = value
		default:
			usage("unknown flag " + flag)
		}
		if err != nil {
			usage(flag + ": " + err.Error())
		}
	}
	if a.topic == "" || a.numRecords <= 0 {
		usage("--topic and --num-records are required")
	}
	if a.outcomes != "" && !a.unique {
		usage("--outcomes needs --unique-values (a record's index is read from its value)")
	}
	return a
}

// producerOptions maps the Java producer's property names onto kgo options.
func producerOptions(props map[string]string) ([]kgo.Opt, error) {
	codecs := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	// kgo compresses with snappy unless told otherwise; Java's default is none.
	codec := codecs["none"]
	var opts []kgo.Opt
	securityProtocol, caFile := "PLAINTEXT", ""
	for k, v := range props {
		n, numErr := strconv.Atoi(v)
		switch k {
		case "bootstrap.servers":
			opts = append(opts, kgo.SeedBrokers(strings.Split(v, ",")...))
			numErr = nil
		case "acks":
			switch v {
			case "all", "-1":
				opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
			default:
				return nil, fmt.Errorf("acks=%s: only all is benchmarked", v)
			}
			numErr = nil
		case "enable.idempotence":
			// Idempotence is kgo's default; turning it off is not something we benchmark.
			if v != "true" {
				return nil, fmt.Errorf("enable.idempotence=%s: only true is benchmarked", v)
			}
			numErr = nil
		case "compression.type":
			c, ok := codecs[v]
			if !ok {
				return nil, fmt.Errorf("compression.type=%s: unknown codec", v)
			}
			codec = c
			numErr = nil
		case "linger.ms":
			opts = append(opts, kgo.ProducerLinger(time.Duration(n)*time.Millisecond))
		case "batch.size":
			// Java's batch.size is both the batch cap and, since KIP-794, the number of bytes
			// a keyless sticky partition takes before the partitioner moves on; kgo has one
			// option for each.
			opts = append(opts, kgo.ProducerBatchMaxBytes(int32(n)),
				kgo.RecordPartitioner(kgo.UniformBytesPartitioner(n, true, true, nil)))
		case "buffer.memory":
			// Java bounds the buffer in bytes only; kgo also bounds it in records (50,000 by
			// default), which would bind first for small records, so that bound is lifted.
			opts = append(opts, kgo.MaxBufferedBytes(n), kgo.MaxBufferedRecords(math.MaxInt32))
		case "security.protocol":
			securityProtocol = strings.ToUpper(v)
			numErr = nil
		case "ssl.truststore.type":
			if !strings.EqualFold(v, "PEM") {
				return nil, fmt.Errorf("ssl.truststore.type=%s: only PEM is benchmarked", v)
			}
			numErr = nil
		case "ssl.truststore.location":
			// A PEM file of CA certificates (the Java name with ssl.truststore.type=PEM).
			caFile = v
			numErr = nil
		default:
			return nil, fmt.Errorf("%s: no kgo option for this property", k)
		}
		if numErr != nil {
			return nil, fmt.Errorf("%s=%s: %v", k, v, numErr)
		}
	}
	switch securityProtocol {
	case "PLAINTEXT":
	case "SSL":
		config := &tls.Config{MinVersion: tls.VersionTLS12}
		if caFile != "" {
			pem, err := os.ReadFile(caFile)
			if err != nil {
				return nil, fmt.Errorf("ssl.truststore.location: %v", err)
			}
			config.RootCAs = x509.NewCertPool()
			if !config.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("ssl.truststore.location: no PEM certificate in %s", caFile)
			}
		}
		opts = append(opts, kgo.DialTLSConfig(config))
	default:
		return nil, fmt.Errorf("security.protocol=%s: only PLAINTEXT and SSL are benchmarked", securityProtocol)
	}
	return append(opts, kgo.ProducerBatchCompression(codec)), nil
}

// stats holds latencies and totals in the shape ProducerPerformance prints. kgo calls promises
// serially, so the promise needs no lock; the WaitGroup publishes them to the main goroutine.
type stats struct {
	latenciesMs []uint32
	bytes       int64
	errors      int64
	firstError  error
	pending     sync.WaitGroup
	outcomes    *os.File // --outcomes, unbuffered
}

// report writes record r's outcome line to --outcomes, if given: its index (the value's first
// 12 bytes) and "ok" or "failed REASON".
func (s *stats) report(r *kgo.Record, err error) {
	if s.outcomes == nil {
		return
	}
	index := r.Value[:min(len(r.Value), 12)]
	if err != nil {
		fmt.Fprintf(s.outcomes, "%s failed %s\n", index, strings.ReplaceAll(err.Error(), "\n", " "))
	} else {
		fmt.Fprintf(s.outcomes, "%s ok\n", index)
	}
}

func (s *stats) print(elapsed time.Duration) {
	n := len(s.latenciesMs)
	secs := elapsed.Seconds()
	slices.Sort(s.latenciesMs)
	pct := func(p float64) uint32 {
		if n == 0 {
			return 0
		}
		return s.latenciesMs[int(float64(n-1)*p)]
	}
	var sum float64
	for _, l := range s.latenciesMs {
		sum += float64(l)
	}
	fmt.Printf("%d records sent, %.1f records/sec (%.2f MB/sec), %.2f ms avg latency, "+
		"%.2f ms max latency, %d ms 50th, %d ms 95th, %d ms 99th, %d ms 99.9th.\n",
		n, float64(n)/secs, float64(s.bytes)/secs/(1024*1024), sum/math.Max(float64(n), 1),
		float64(pct(1)), pct(0.5), pct(0.95), pct(0.99), pct(0.999))
	if s.errors > 0 {
		fmt.Printf("%d records failed, the first with: %v\n", s.errors, s.firstError)
	}
}

// withSequence returns a copy of template whose first 12 bytes (fewer if it is shorter) are i in
// zero-padded decimal.
func withSequence(template []byte, i int) []byte {
	value := slices.Clone(template)
	for j := min(len(value), 12) - 1; j >= 0; j-- {
		value[j] = byte('0' + i%10)
		i /= 10
	}
	return value
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "consume" {
		consumeMain(os.Args[2:])
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "copy" {
		copyMain(os.Args[2:])
		return
	}
	a := parseArgs()
	opts, err := producerOptions(a.props)
	if err != nil {
		fmt.Fprintf(os.Stderr, "franz-perf: %v\n", err)
		os.Exit(2)
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "franz-perf: %v\n", err)
		os.Exit(1)
	}
	payloads := [][]byte{[]byte(strings.Repeat("x", a.recordSize))}
	if a.payloadFile != "" {
		data, err := os.ReadFile(a.payloadFile)
		if err != nil {
			usage("--payload-file: " + err.Error())
		}
		payloads = payloads[:0]
		for _, line := range bytes.Split(data, []byte("\n")) {
			if len(line) > 0 {
				payloads = append(payloads, line)
			}
		}
		if len(payloads) == 0 {
			usage("--payload-file has no lines")
		}
	}
	s := &stats{latenciesMs: make([]uint32, 0, a.numRecords)}
	// One promise for every record: the send time travels in the record's own Timestamp
	// (which Produce would otherwise set to time.Now itself), so no closure per record.
	if a.outcomes != "" {
		if s.outcomes, err = os.Create(a.outcomes); err != nil {
			usage("--outcomes: " + err.Error())
		}
	}
	promise := func(r *kgo.Record, err error) {
		s.report(r, err)
		if err != nil {
			if s.errors == 0 {
				s.firstError = err
			}
			s.errors++
		} else {
			s.latenciesMs = append(s.latenciesMs, uint32(time.Since(r.Timestamp).Milliseconds()))
			s.bytes += int64(len(r.Value))
		}
		s.pending.Done()
	}
	ctx := context.Background()
	start := time.Now()
	for i := 0; i < a.numRecords; i++ {
		if a.throughput > 0 {
			due := start.Add(time.Duration(float64(i) / a.throughput * float64(time.Second)))
			if wait := time.Until(due); wait > 0 {
				time.Sleep(wait)
			}
		}
		s.pending.Add(1)
		value := payloads[i%len(payloads)]
		if a.unique {
			value = withSequence(value, i)
		}
		client.Produce(ctx, &kgo.Record{Topic: a.topic, Value: value, Timestamp: time.Now()}, promise)
	}
	if err := client.Flush(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "franz-perf: flush: %v\n", err)
	}
	s.pending.Wait()
	elapsed := time.Since(start)
	client.Close()
	s.print(elapsed)
	if s.errors > 0 {
		os.Exit(1)
	}
}
