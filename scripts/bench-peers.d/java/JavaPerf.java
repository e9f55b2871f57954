/*
 * JavaPerf: the Java producer (kafka-clients) driven the way examples/perf.rs drives ours, so
 * that scripts/bench-peers compares the clients and not the benchmark programs. It is Kafka's
 * ProducerPerformance loop (send with a callback per record; send blocks while the buffer is
 * full) with perf's values, which ProducerPerformance cannot make unique.
 *
 *   JavaPerf --topic T --num-records N --record-size BYTES --throughput RECORDS_PER_SEC|-1 \
 *       [--payload-file F] [--unique-values] [--outcomes FILE] --producer-props k=v [k=v ...]
 *
 * - values: BYTES 'x' bytes, or the file's lines in turn; with --unique-values record i's value
 *   is a copy whose first 12 bytes are i in zero-padded decimal;
 * - --throughput R paces record i to start + i/R (sleeping when ahead); -1 means as fast as the
 *   producer accepts records;
 * - latency = the time from just before send to the record's callback, truncated to whole
 *   milliseconds; percentiles are the sorted latency at index floor((n-1)*p);
 * - --outcomes FILE writes one line per record as its callback runs, "INDEX ok" or
 *   "INDEX failed REASON", flushed at once so that a run killed as hung keeps what it had
 *   reported (scripts/chaos-peers reads it; the Java producer's exceptions do not say whether
 *   a failed record may have been written, so there is no "indeterminate").
 */
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class JavaPerf {
    private static void usage(String problem) {
        System.err.println("JavaPerf: " + problem);
        System.err.println("usage: JavaPerf --topic T --num-records N --record-size BYTES "
                + "--throughput RECORDS_PER_SEC|-1 [--payload-file F] [--unique-values] [--outcomes FILE] --producer-props k=v [k=v ...]");
        System.exit(2);
    }

    /** Latencies and totals; callbacks run on the producer's one I/O thread, and close() joins it before print. */
    private static final class Stats {
        final int[] latenciesMs;
        int acked;
        long bytes;
        long errors;
        final AtomicReference<Exception> firstError = new AtomicReference<>();
        final PrintStream outcomes; // --outcomes, or null

        Stats(int n, PrintStream outcomes) {
            latenciesMs = new int[n];
            this.outcomes = outcomes;
        }

        void record(int index, long sentAtNanos, int size, Exception error) {
            if (outcomes != null) {
                if (error == null) outcomes.println(index + " ok");
                else outcomes.println(index + " failed " + String.valueOf(error).replace('\n', ' '));
            }
            if (error != null) {
                errors++;
                firstError.compareAndSet(null, error);
                return;
            }
            latenciesMs[acked++] = (int) ((System.nanoTime() - sentAtNanos) / 1_000_000L);
            bytes += size;
        }

        boolean print(long elapsedNanos) {
            int n = acked;
            double secs = elapsedNanos / 1e9;
            int[] sorted = Arrays.copyOf(latenciesMs, n);
            Arrays.sort(sorted);
            double sum = 0;
            for (int l : sorted) sum += l;
            System.out.printf("%d records sent, %.1f records/sec (%.2f MB/sec), %.2f ms avg latency, "
                    + "%.2f ms max latency, %d ms 50th, %d ms 95th, %d ms 99th, %d ms 99.9th.%n",
                    n, n / secs, bytes / secs / (1024.0 * 1024.0), sum / Math.max(n, 1),
                    (double) (n > 0 ? sorted[n - 1] : 0), pct(sorted, 0.5), pct(sorted, 0.95),
                    pct(sorted, 0.99), pct(sorted, 0.999));
            if (errors > 0) System.out.printf("%d records failed, the first with: %s%n", errors, firstError.get());
            return errors == 0;
        }

        private static int pct(int[] sorted, double p) {
            return sorted.length == 0 ? 0 : sorted[(int) ((sorted.length - 1) * p)];
        }
    }

    public static void main(String[] argv) throws Exception {
        String topic = null, payloadFile = null, outcomesFile = null;
        int numRecords = 0, recordSize = 100;
        double throughput = -1;
        boolean unique = false;
        Properties props = new Properties();
        for (int i = 0; i < argv.length; i++) {
            String flag = argv[i];
            if (flag.equals("--unique-values")) {
                unique = true;
                continue;
            }
            if (flag.equals("--producer-props")) {
                while (i + 1 < argv.length && !argv[i + 1].startsWith("--")) {
                    String kv = argv[++i];
                    int eq = kv.indexOf('=');
                    if (eq < 0) usage(kv + " is not k=v");
                    props.put(kv.substring(0, eq), kv.substring(eq + 1));
                }
                continue;
            }
            if (i + 1 >= argv.length) usage(flag + " needs a value");
            String value = argv[++i];
            switch (flag) {
                case "--topic": topic = value; break;
                case "--num-records": numRecords = Integer.parseInt(value); break;
                case "--record-size": recordSize = Integer.parseInt(value); break;
                case "--throughput": throughput = Double.parseDouble(value); break;
                case "--payload-file": payloadFile = value; break;
                case "--outcomes": outcomesFile = value; break;
                default: usage("unknown flag " + flag);
            }
        }
        if (topic == null || numRecords <= 0) usage("--topic and --num-records are required");

        List<byte[]> templates = new ArrayList<>();
        if (payloadFile != null) {
            for (String line : Files.readAllLines(Paths.get(payloadFile), StandardCharsets.UTF_8))
                if (!line.isEmpty()) templates.add(line.getBytes(StandardCharsets.UTF_8));
            if (templates.isEmpty()) usage("--payload-file has no lines");
        } else {
            byte[] x = new byte[recordSize];
            Arrays.fill(x, (byte) 'x');
            templates.add(x);
        }
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());

        // Autoflush: every line is written as it is printed.
        PrintStream outcomes = outcomesFile == null ? null
                : new PrintStream(new FileOutputStream(outcomesFile), true, StandardCharsets.UTF_8);
        Stats stats = new Stats(numRecords, outcomes);
        long elapsed;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            long start = System.nanoTime();
            for (int i = 0; i < numRecords; i++) {
                if (throughput > 0) {
                    long due = start + (long) (i * 1e9 / throughput);
                    for (long wait = due - System.nanoTime(); wait > 0; wait = due - System.nanoTime())
                        Thread.sleep(wait / 1_000_000L, (int) (wait % 1_000_000L));
                }
                byte[] value = templates.get(i % templates.size());
                if (unique) {
                    value = value.clone();
                    long seq = i;
                    for (int d = Math.min(value.length, 12) - 1; d >= 0; d--, seq /= 10)
                        value[d] = (byte) ('0' + seq % 10);
                }
                long sentAt = System.nanoTime();
                int size = value.length;
                int index = i;
                producer.send(new ProducerRecord<>(topic, value), (metadata, error) -> stats.record(index, sentAt, size, error));
            }
            producer.flush();
            elapsed = System.nanoTime() - start;
        }
        System.exit(stats.print(elapsed) ? 0 : 1);
    }
}
