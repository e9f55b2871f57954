/*
 * rdkafka_perf: librdkafka's producer driven the way examples/perf.rs drives ours, so that
 * scripts/bench-peers compares the clients and not the benchmark programs.
 *
 *   rdkafka_perf --topic T --num-records N --record-size BYTES --throughput RECORDS_PER_SEC|-1 \
 *       [--payload-file F] [--unique-values] [--outcomes FILE] --producer-props k=v [k=v ...]
 *
 * Same flags, same measurement and same summary line as examples/perf.rs (which copies
 * Kafka's ProducerPerformance):
 * - every record is keyless, with one shared payload of BYTES 'x' bytes (produced without
 *   RD_KAFKA_MSG_F_COPY, as perf.rs shares one `Bytes`), or with --payload-file the file's
 *   lines in turn (for compression: the same realistic bytes for every client); with
 *   --unique-values, record i's value is a copy (RD_KAFKA_MSG_F_COPY) whose first 12 bytes are
 *   i in zero-padded decimal, so that scripts/bench-peers can count distinct records read back;
 * - --throughput R paces record i to start + i/R (sleeping when ahead, never catching up by
 *   skipping); -1 means as fast as the producer accepts records;
 * - latency = the time from just before the produce call to the delivery report of that
 *   record, truncated to whole milliseconds; percentiles are the sorted latency at index
 *   floor((n-1)*p);
 * - --outcomes FILE (with --unique-values) writes one line per record from its delivery report,
 *   "INDEX ok", "INDEX failed REASON" or, when rd_kafka_message_status() says the failed
 *   record is RD_KAFKA_MSG_STATUS_POSSIBLY_PERSISTED, "INDEX indeterminate REASON"; each line
 *   is flushed at once so that a run killed as hung keeps what it had reported
 *   (scripts/chaos-peers reads it).
 *
 * --producer-props are librdkafka properties (librdkafka accepts most of the Java names:
 * bootstrap.servers, acks, linger.ms, batch.size, enable.idempotence, compression.type), except
 * `buffer.memory`, which librdkafka does not know: it becomes queue.buffering.max.kbytes.
 */
#include <errno.h>
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct args {
        const char *topic;
        uint64_t num_records;
        size_t record_size;
        double throughput;
        const char *payload_file;
        int unique_values;
        const char *outcomes;
};

/* Latencies and totals in the shape ProducerPerformance prints; filled by the delivery report
 * callback, which librdkafka runs inside rd_kafka_poll()/rd_kafka_flush() on our thread. */
struct stats {
        uint32_t *latencies_ms;
        uint64_t acked;
        uint64_t errors;
        uint64_t bytes;
        rd_kafka_resp_err_t first_error;
        FILE *outcomes; /* --outcomes, line-buffered, or NULL */
};

static struct stats stats;

static void usage(const char *problem) {
        fprintf(stderr, "rdkafka_perf: %s\n", problem);
        fprintf(stderr,
                "usage: rdkafka_perf --topic T --num-records N --record-size BYTES "
                "--throughput RECORDS_PER_SEC|-1 [--payload-file F] [--unique-values] [--outcomes FILE] --producer-props k=v [k=v ...]\n");
        exit(2);
}

static uint64_t now_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void sleep_us(uint64_t us) {
        struct timespec ts = {.tv_sec = (time_t)(us / 1000000u),
                              .tv_nsec = (long)(us % 1000000u) * 1000};
        while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
                ;
}

static uint64_t parse_u64(const char *text, const char *flag) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(text, &end, 10);
        if (errno || *end || end == text)
                usage(flag);
        return (uint64_t)v;
}

static void set_prop(rd_kafka_conf_t *conf, const char *key, const char *value) {
        char errstr[512];
        char kbytes[32];
        if (!strcmp(key, "buffer.memory")) {
                /* Java's buffer.memory is in bytes; librdkafka's queue limit is in KiB. */
                uint64_t bytes = parse_u64(value, "buffer.memory");
                snprintf(kbytes, sizeof(kbytes), "%" PRIu64, bytes / 1024u);
                key = "queue.buffering.max.kbytes";
                value = kbytes;
        }
        if (rd_kafka_conf_set(conf, key, value, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK) {
                fprintf(stderr, "rdkafka_perf: %s=%s: %s\n", key, value, errstr);
                exit(2);
        }
}

static void parse_args(int argc, char **argv, struct args *args, rd_kafka_conf_t *conf) {
        *args = (struct args){.topic = NULL, .num_records = 0, .record_size = 100, .throughput = -1,
                              .payload_file = NULL, .unique_values = 0, .outcomes = NULL};
        for (int i = 1; i < argc; i++) {
                const char *flag = argv[i];
                if (!strcmp(flag, "--unique-values")) {
                        args->unique_values = 1;
                        continue;
                }
                if (!strcmp(flag, "--producer-props")) {
                        while (i + 1 < argc && strncmp(argv[i + 1], "--", 2)) {
                                char *kv = argv[++i];
                                char *eq = strchr(kv, '=');
                                if (!eq)
                                        usage("--producer-props takes k=v");
                                *eq = '\0';
                                set_prop(conf, kv, eq + 1);
                        }
                        continue;
                }
                if (i + 1 >= argc)
                        usage("a flag needs a value");
                const char *value = argv[++i];
                if (!strcmp(flag, "--topic"))
                        args->topic = value;
                else if (!strcmp(flag, "--num-records"))
                        args->num_records = parse_u64(value, "--num-records");
                else if (!strcmp(flag, "--record-size"))
                        args->record_size = (size_t)parse_u64(value, "--record-size");
                else if (!strcmp(flag, "--throughput"))
                        args->throughput = strtod(value, NULL);
                else if (!strcmp(flag, "--payload-file"))
                        args->payload_file = value;
                else if (!strcmp(flag, "--outcomes"))
                        args->outcomes = value;
                else
                        usage("unknown flag");
        }
        if (!args->topic || args->num_records == 0)
                usage("--topic and --num-records are required");
        if (args->outcomes && !args->unique_values)
                usage("--outcomes needs --unique-values (a record's index is read from its value)");
}

/* Writes the record's outcome line to --outcomes: its index (the value's first 12 bytes). */
static void report_outcome(const rd_kafka_message_t *msg) {
        int digits = msg->len < 12 ? (int)msg->len : 12;
        if (!msg->err)
                fprintf(stats.outcomes, "%.*s ok\n", digits, (const char *)msg->payload);
        else
                fprintf(stats.outcomes, "%.*s %s %s\n", digits, (const char *)msg->payload,
                        rd_kafka_message_status(msg) == RD_KAFKA_MSG_STATUS_POSSIBLY_PERSISTED
                                ? "indeterminate"
                                : "failed",
                        rd_kafka_err2str(msg->err));
}

/* The send time travels with the record as its opaque pointer, so no per-record table. */
static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque) {
        (void)rk;
        (void)opaque;
        if (stats.outcomes)
                report_outcome(msg);
        if (msg->err) {
                if (!stats.errors++)
                        stats.first_error = msg->err;
                return;
        }
        uint64_t sent_at = (uint64_t)(uintptr_t)msg->_private;
        stats.latencies_ms[stats.acked++] = (uint32_t)((now_us() - sent_at) / 1000u);
        stats.bytes += msg->len;
}

static int compare_u32(const void *a, const void *b) {
        uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
        return (x > y) - (x < y);
}

static void print_stats(uint64_t elapsed_us) {
        uint64_t n = stats.acked;
        double secs = (double)elapsed_us / 1e6;
        qsort(stats.latencies_ms, n, sizeof(uint32_t), compare_u32);
        double sum = 0;
        for (uint64_t i = 0; i < n; i++)
                sum += stats.latencies_ms[i];
#define PCT(p) (n ? stats.latencies_ms[(uint64_t)((double)(n - 1) * (p))] : 0)
        printf("%" PRIu64 " records sent, %.1f records/sec (%.2f MB/sec), %.2f ms avg latency, "
               "%.2f ms max latency, %u ms 50th, %u ms 95th, %u ms 99th, %u ms 99.9th.\n",
               n, (double)n / secs, (double)stats.bytes / secs / (1024.0 * 1024.0),
               sum / (double)(n ? n : 1), (double)(n ? stats.latencies_ms[n - 1] : 0), PCT(0.5),
               PCT(0.95), PCT(0.99), PCT(0.999));
#undef PCT
        if (stats.errors)
                printf("%" PRIu64 " records failed, the first with: %s\n", stats.errors,
                       rd_kafka_err2str(stats.first_error));
}

int main(int argc, char **argv) {
        char errstr[512];
        struct args args;
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        parse_args(argc, argv, &args, conf);
        rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);

        stats.latencies_ms = malloc(args.num_records * sizeof(uint32_t));
        if (args.outcomes) {
                if (!(stats.outcomes = fopen(args.outcomes, "w"))) {
                        fprintf(stderr, "rdkafka_perf: cannot write %s: %s\n", args.outcomes, strerror(errno));
                        return 2;
                }
                setvbuf(stats.outcomes, NULL, _IOLBF, 0);
        }
        char *payload = NULL;
        size_t payload_len = 0;
        if (args.payload_file) {
                FILE *f = fopen(args.payload_file, "rb");
                long len = -1;
                if (!f || fseek(f, 0, SEEK_END) || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
                        fprintf(stderr, "rdkafka_perf: cannot read %s\n", args.payload_file);
                        return 2;
                }
                payload_len = (size_t)len;
                payload = malloc(payload_len + 1);
                if (payload && fread(payload, 1, payload_len, f) != payload_len) {
                        fprintf(stderr, "rdkafka_perf: cannot read %s\n", args.payload_file);
                        return 2;
                }
                fclose(f);
        } else {
                payload_len = args.record_size;
                payload = malloc(payload_len ? payload_len : 1);
                if (payload)
                        memset(payload, 'x', payload_len);
        }
        /* The records' values: the file's lines, or the one 'x' payload. */
        size_t n_values = 0, *value_at = NULL, *value_len = NULL;
        if (payload && args.payload_file) {
                value_at = malloc((payload_len + 1) * sizeof(size_t));
                value_len = malloc((payload_len + 1) * sizeof(size_t));
                for (size_t at = 0; value_at && value_len && at < payload_len;) {
                        char *nl = memchr(payload + at, '\n', payload_len - at);
                        size_t end = nl ? (size_t)(nl - payload) : payload_len;
                        if (end > at) {
                                value_at[n_values] = at;
                                value_len[n_values++] = end - at;
                        }
                        at = end + 1;
                }
        } else if (payload) {
                value_at = malloc(sizeof(size_t));
                value_len = malloc(sizeof(size_t));
                if (value_at && value_len) {
                        value_at[0] = 0;
                        value_len[0] = payload_len;
                        n_values = 1;
                }
        }
        /* Under --unique-values each value is built here and copied by librdkafka. */
        char *scratch = args.unique_values ? malloc(payload_len + 1) : NULL;
        if (!stats.latencies_ms || !payload || !n_values || (args.unique_values && !scratch)) {
                fprintf(stderr, "rdkafka_perf: out of memory, or no payload\n");
                return 1;
        }

        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
        if (!rk) {
                fprintf(stderr, "rdkafka_perf: %s\n", errstr);
                return 1;
        }
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, args.topic, NULL);

        uint64_t start = now_us();
        for (uint64_t i = 0; i < args.num_records; i++) {
                if (args.throughput > 0) {
                        uint64_t due = start + (uint64_t)((double)i * 1e6 / args.throughput);
                        for (uint64_t now = now_us(); now < due; now = now_us()) {
                                /* Serve delivery reports while waiting; poll() sleeps in whole
                                 * milliseconds, so the last fraction is a plain sleep. */
                                if (due - now >= 1000)
                                        rd_kafka_poll(rk, (int)((due - now) / 1000));
                                else
                                        sleep_us(due - now);
                        }
                }
                uint64_t sent_at = now_us();
                /* A full queue is backpressure: serve delivery reports until there is room. */
                size_t v = (size_t)(i % n_values);
                char *value = payload + value_at[v];
                int msgflags = 0;
                if (scratch) {
                        memcpy(scratch, value, value_len[v]);
                        uint64_t seq = i;
                        for (size_t d = value_len[v] < 12 ? value_len[v] : 12; d-- > 0; seq /= 10)
                                scratch[d] = (char)('0' + seq % 10);
                        value = scratch;
                        msgflags = RD_KAFKA_MSG_F_COPY;
                }
                while (rd_kafka_produce(rkt, RD_KAFKA_PARTITION_UA, msgflags, value, value_len[v],
                                        NULL, 0, (void *)(uintptr_t)sent_at) == -1) {
                        rd_kafka_resp_err_t err = rd_kafka_last_error();
                        if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                                fprintf(stderr, "rdkafka_perf: produce: %s\n", rd_kafka_err2str(err));
                                return 1;
                        }
                        rd_kafka_poll(rk, 100);
                }
                rd_kafka_poll(rk, 0);
        }
        rd_kafka_resp_err_t flushed = rd_kafka_flush(rk, 120 * 1000);
        uint64_t elapsed = now_us() - start;
        if (flushed)
                fprintf(stderr, "rdkafka_perf: flush: %s\n", rd_kafka_err2str(flushed));
        rd_kafka_topic_destroy(rkt);
        rd_kafka_destroy(rk);
        print_stats(elapsed);
        free(payload);
        free(scratch);
        free(value_at);
        free(value_len);
        free(stats.latencies_ms);
        return flushed || stats.errors ? 1 : 0;
}
