/*
 * A librdkafka transactional producer for tests/admin_transactions.rs, compiled there with
 * the system C compiler against the librdkafka.so.1 that Debian's kcat package brings. The
 * package ships no headers, so the few functions used are declared here as librdkafka's
 * stable C API defines them (rdkafka.h).
 *
 *   rdkafka_txn_producer BOOTSTRAP TOPIC TRANSACTIONAL_ID BEFORE AFTER
 *
 * Opens a transaction, writes BEFORE records ("before-<n>") to partition 0, flushes, prints
 * "OPEN" and waits for a line on standard input; then writes AFTER records ("after-<n>"),
 * commits and prints "COMMITTED", or "FAILED <reason>" and exits with 1.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rd_kafka_s rd_kafka_t;
typedef struct rd_kafka_conf_s rd_kafka_conf_t;
typedef struct rd_kafka_topic_s rd_kafka_topic_t;
typedef struct rd_kafka_error_s rd_kafka_error_t;

rd_kafka_conf_t *rd_kafka_conf_new(void);
int rd_kafka_conf_set(rd_kafka_conf_t *conf, const char *name, const char *value,
                      char *errstr, size_t errstr_size);
rd_kafka_t *rd_kafka_new(int type, rd_kafka_conf_t *conf, char *errstr, size_t errstr_size);
rd_kafka_topic_t *rd_kafka_topic_new(rd_kafka_t *rk, const char *topic, void *conf);
int rd_kafka_produce(rd_kafka_topic_t *rkt, int32_t partition, int msgflags, void *payload,
                     size_t len, const void *key, size_t keylen, void *msg_opaque);
int rd_kafka_flush(rd_kafka_t *rk, int timeout_ms);
int rd_kafka_outq_len(rd_kafka_t *rk);
rd_kafka_error_t *rd_kafka_init_transactions(rd_kafka_t *rk, int timeout_ms);
rd_kafka_error_t *rd_kafka_begin_transaction(rd_kafka_t *rk);
rd_kafka_error_t *rd_kafka_commit_transaction(rd_kafka_t *rk, int timeout_ms);
const char *rd_kafka_error_string(const rd_kafka_error_t *error);

#define RD_KAFKA_PRODUCER 0
#define RD_KAFKA_CONF_OK 0
#define RD_KAFKA_MSG_F_COPY 0x2

static void fail(const char *what, const char *why) {
  printf("FAILED %s: %s\n", what, why);
  fflush(stdout);
  exit(1);
}

static void check(const char *what, rd_kafka_error_t *error) {
  if (error) fail(what, rd_kafka_error_string(error));
}

static void produce(rd_kafka_t *rk, rd_kafka_topic_t *topic, const char *prefix, int count) {
  char value[64];
  for (int n = 0; n < count; n++) {
    int len = snprintf(value, sizeof value, "%s-%d", prefix, n);
    if (rd_kafka_produce(topic, 0, RD_KAFKA_MSG_F_COPY, value, (size_t)len, NULL, 0, NULL))
      fail("produce", "the record was refused");
  }
  rd_kafka_flush(rk, 30000);
  if (rd_kafka_outq_len(rk) != 0) fail("flush", "records were not delivered in 30 s");
}

int main(int argc, char **argv) {
  if (argc != 6) fail("usage", "BOOTSTRAP TOPIC TRANSACTIONAL_ID BEFORE AFTER");
  char errstr[512];
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  const char *settings[][2] = {
      {"bootstrap.servers", argv[1]},
      {"transactional.id", argv[3]},
      {"transaction.timeout.ms", "120000"},
      {"linger.ms", "5"},
  };
  for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++) {
    if (rd_kafka_conf_set(conf, settings[i][0], settings[i][1], errstr, sizeof errstr) !=
        RD_KAFKA_CONF_OK)
      fail(settings[i][0], errstr);
  }
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
  if (!rk) fail("rd_kafka_new", errstr);
  rd_kafka_topic_t *topic = rd_kafka_topic_new(rk, argv[2], NULL);
  check("init_transactions", rd_kafka_init_transactions(rk, 60000));
  check("begin_transaction", rd_kafka_begin_transaction(rk));
  produce(rk, topic, "before", atoi(argv[4]));
  printf("OPEN\n");
  fflush(stdout);
  char line[16];
  if (!fgets(line, sizeof line, stdin)) fail("stdin", "closed before the go-ahead");
  produce(rk, topic, "after", atoi(argv[5]));
  check("commit_transaction", rd_kafka_commit_transaction(rk, 60000));
  printf("COMMITTED\n");
  fflush(stdout);
  return 0;
}
