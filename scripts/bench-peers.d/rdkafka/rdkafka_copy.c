/*
 * rdkafka_copy: librdkafka's exactly-once copier, the peer of examples/copy.rs for
 * scripts/chaos-peers --transactional:
 *
 *   rdkafka_copy BOOTSTRAP SOURCE DESTINATION GROUP TRANSACTIONAL_ID \
 *       [--commit-records N] [--commit-ms MS] [--idle-seconds S]
 *
 * A consumer in GROUP reads SOURCE read_committed from the start (auto commit off), a
 * transactional producer writes every record to the same partition of DESTINATION, and each
 * transaction commits the consumed offsets with the records
 * (rd_kafka_send_offsets_to_transaction with the consumer's group metadata, KIP-447). A
 * transaction begins with the first record polled and ends after N records or MS milliseconds,
 * whichever comes first (defaults 1,000 / 100, examples/copy's). Prints one line per committed
 * transaction in examples/copy's format, then "copied N records" after S seconds without a
 * record (0: never stop).
 *
 * Errors are handled as librdkafka's transactional API documents it (rdkafka.h, "Transactional
 * producer API"): an error that rd_kafka_error_txn_requires_abort() marks aborts the
 * transaction, and the consumer is rewound to the group's committed offsets so that the
 * aborted input is copied again; one rd_kafka_error_is_retriable() marks is retried (at most
 * 10 times); any other (fatal) ends the program with status 1.
 */
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_PARTITIONS 4096

static void usage(const char *problem) {
        fprintf(stderr, "rdkafka_copy: %s\n", problem);
        fprintf(stderr, "usage: rdkafka_copy BOOTSTRAP SOURCE DESTINATION GROUP TRANSACTIONAL_ID "
                        "[--commit-records N] [--commit-ms MS] [--idle-seconds S]\n");
        exit(2);
}

static void fatal(const char *what, const char *why) {
        fprintf(stderr, "rdkafka_copy: fatal: %s: %s\n", what, why);
        exit(1);
}

static double now_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void set(rd_kafka_conf_t *conf, const char *key, const char *value) {
        char errstr[512];
        if (rd_kafka_conf_set(conf, key, value, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK)
                fatal(key, errstr);
}

/* Seeks every assigned partition back to the group's committed offset (the start if none). */
static void rewind_consumer(rd_kafka_t *consumer) {
        rd_kafka_topic_partition_list_t *assignment;
        rd_kafka_resp_err_t err = rd_kafka_assignment(consumer, &assignment);
        if (err)
                fatal("reading the assignment", rd_kafka_err2str(err));
        if (assignment->cnt > 0) {
                if ((err = rd_kafka_committed(consumer, assignment, 10000)))
                        fatal("reading the committed offsets", rd_kafka_err2str(err));
                for (int i = 0; i < assignment->cnt; i++)
                        if (assignment->elems[i].offset < 0)
                                assignment->elems[i].offset = RD_KAFKA_OFFSET_BEGINNING;
                rd_kafka_error_t *error = rd_kafka_seek_partitions(consumer, assignment, 10000);
                if (error)
                        fatal("rewinding", rd_kafka_error_string(error));
        }
        rd_kafka_topic_partition_list_destroy(assignment);
}

/* What a failed transactional call leads to: 0 retry it, 1 abort the transaction; fatal exits. */
static int must_abort(const char *what, rd_kafka_error_t *error, int attempt) {
        int abort = rd_kafka_error_txn_requires_abort(error);
        if (!abort && (!rd_kafka_error_is_retriable(error) || attempt >= 10))
                fatal(what, rd_kafka_error_string(error));
        fprintf(stderr, "%s: %s (%s)\n", what, rd_kafka_error_string(error),
                abort ? "aborting the transaction" : "trying again");
        rd_kafka_error_destroy(error);
        return abort;
}

int main(int argc, char **argv) {
        long commit_records = 1000, commit_ms = 100, idle_seconds = 0;
        const char *positional[5];
        int n = 0;
        for (int i = 1; i < argc; i++) {
                if (strncmp(argv[i], "--", 2)) {
                        if (n == 5)
                                usage("five arguments needed");
                        positional[n++] = argv[i];
                        continue;
                }
                if (i + 1 >= argc)
                        usage("a flag takes a number");
                char *end;
                long value = strtol(argv[i + 1], &end, 10);
                if (*end || value < 0)
                        usage("a flag takes a number");
                if (!strcmp(argv[i], "--commit-records"))
                        commit_records = value > 0 ? value : 1;
                else if (!strcmp(argv[i], "--commit-ms"))
                        commit_ms = value;
                else if (!strcmp(argv[i], "--idle-seconds"))
                        idle_seconds = value;
                else
                        usage("unknown flag");
                i++;
        }
        if (n != 5)
                usage("five arguments needed");
        const char *bootstrap = positional[0], *source = positional[1], *destination = positional[2];
        char errstr[512];

        rd_kafka_conf_t *cconf = rd_kafka_conf_new();
        set(cconf, "bootstrap.servers", bootstrap);
        set(cconf, "group.id", positional[3]);
        set(cconf, "isolation.level", "read_committed");
        set(cconf, "enable.auto.commit", "false");
        set(cconf, "auto.offset.reset", "earliest");
        rd_kafka_t *consumer = rd_kafka_new(RD_KAFKA_CONSUMER, cconf, errstr, sizeof(errstr));
        if (!consumer)
                fatal("creating the consumer", errstr);
        rd_kafka_poll_set_consumer(consumer);
        rd_kafka_conf_t *pconf = rd_kafka_conf_new();
        set(pconf, "bootstrap.servers", bootstrap);
        set(pconf, "transactional.id", positional[4]);
        rd_kafka_t *producer = rd_kafka_new(RD_KAFKA_PRODUCER, pconf, errstr, sizeof(errstr));
        if (!producer)
                fatal("creating the producer", errstr);
        rd_kafka_error_t *error;
        for (int attempt = 1; (error = rd_kafka_init_transactions(producer, 30000)); attempt++)
                if (must_abort("init_transactions", error, attempt))
                        fatal("init_transactions", "asked for an abort");
        rd_kafka_topic_partition_list_t *topics = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(topics, source, RD_KAFKA_PARTITION_UA);
        rd_kafka_resp_err_t err = rd_kafka_subscribe(consumer, topics);
        rd_kafka_topic_partition_list_destroy(topics);
        if (err)
                fatal("subscribing", rd_kafka_err2str(err));

        static long per_partition[MAX_PARTITIONS];
        double started = now_s(), last_record = started;
        uint64_t total = 0;
        for (;;) {
                double polled = now_s();
                rd_kafka_message_t *msg = rd_kafka_consumer_poll(consumer, (int)(commit_ms > 0 ? commit_ms : 1));
                if (!msg) {
                        if (idle_seconds > 0 && now_s() - last_record >= (double)idle_seconds)
                                break;
                        continue;
                }
                if (msg->err) {
                        fprintf(stderr, "consumer: %s\n", rd_kafka_message_errstr(msg));
                        rd_kafka_message_destroy(msg);
                        continue;
                }
                for (int attempt = 1; (error = rd_kafka_begin_transaction(producer)); attempt++)
                        if (must_abort("begin_transaction", error, attempt))
                                fatal("begin_transaction", "asked for an abort");
                rd_kafka_topic_partition_list_t *offsets = rd_kafka_topic_partition_list_new(8);
                memset(per_partition, 0, sizeof(per_partition));
                long in = 0;
                int aborted = 0;
                while (msg) {
                        if (msg->err) {
                                fprintf(stderr, "consumer: %s\n", rd_kafka_message_errstr(msg));
                        } else {
                                while ((err = rd_kafka_producev(producer, RD_KAFKA_V_TOPIC(destination),
                                                                RD_KAFKA_V_PARTITION(msg->partition),
                                                                RD_KAFKA_V_KEY(msg->key, msg->key_len),
                                                                RD_KAFKA_V_VALUE(msg->payload, msg->len),
                                                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                                                RD_KAFKA_V_END)) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
                                        rd_kafka_poll(producer, 10);
                                if (err) {
                                        /* Such a record would be missing from a committed
                                         * transaction: abort it instead. */
                                        fprintf(stderr, "produce: %s (aborting the transaction)\n", rd_kafka_err2str(err));
                                        aborted = 1;
                                }
                                const char *topic = rd_kafka_topic_name(msg->rkt);
                                rd_kafka_topic_partition_t *tp = rd_kafka_topic_partition_list_find(offsets, topic, msg->partition);
                                if (!tp)
                                        tp = rd_kafka_topic_partition_list_add(offsets, topic, msg->partition);
                                tp->offset = msg->offset + 1;
                                if (msg->partition >= 0 && msg->partition < MAX_PARTITIONS)
                                        per_partition[msg->partition]++;
                                in++;
                        }
                        rd_kafka_message_destroy(msg);
                        double left = (double)commit_ms / 1e3 - (now_s() - polled);
                        if (in >= commit_records || left <= 0 || aborted)
                                break;
                        msg = rd_kafka_consumer_poll(consumer, (int)(left * 1e3) + 1);
                }
                if (!aborted) {
                        rd_kafka_consumer_group_metadata_t *cgmd = rd_kafka_consumer_group_metadata(consumer);
                        for (int attempt = 1; (error = rd_kafka_send_offsets_to_transaction(producer, offsets, cgmd, -1)); attempt++)
                                if ((aborted = must_abort("send_offsets_to_transaction", error, attempt)))
                                        break;
                        rd_kafka_consumer_group_metadata_destroy(cgmd);
                }
                for (int attempt = 1; !aborted && (error = rd_kafka_commit_transaction(producer, -1)); attempt++)
                        aborted = must_abort("commit_transaction", error, attempt);
                rd_kafka_topic_partition_list_destroy(offsets);
                if (aborted) {
                        for (int attempt = 1; (error = rd_kafka_abort_transaction(producer, -1)); attempt++)
                                if (must_abort("abort_transaction", error, attempt))
                                        fatal("abort_transaction", "asked for an abort");
                        rewind_consumer(consumer);
                        fprintf(stderr, "transaction aborted and its input rewound\n");
                        continue;
                }
                last_record = now_s();
                total += (uint64_t)in;
                printf("%8.1fs committed %ld in / %ld out (total %" PRIu64 ") in %.1f ms; partitions", last_record - started,
                       in, in, total, (last_record - polled) * 1e3);
                for (int p = 0; p < MAX_PARTITIONS; p++)
                        if (per_partition[p])
                                printf(" %d:%ld", p, per_partition[p]);
                printf("\n");
                fflush(stdout);
        }
        rd_kafka_consumer_close(consumer);
        rd_kafka_destroy(consumer);
        rd_kafka_destroy(producer);
        printf("copied %" PRIu64 " records\n", total);
        return 0;
}
