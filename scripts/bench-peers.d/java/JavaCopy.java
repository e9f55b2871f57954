/*
 * JavaCopy: the Java clients' exactly-once copier, the peer of examples/copy.rs for
 * scripts/chaos-peers --transactional:
 *
 *   JavaCopy BOOTSTRAP SOURCE DESTINATION GROUP TRANSACTIONAL_ID \
 *       [--commit-records N] [--commit-ms MS] [--idle-seconds S]
 *
 * A KafkaConsumer in GROUP reads SOURCE read_committed from the start (auto commit off), a
 * transactional KafkaProducer writes every record to the same partition of DESTINATION, and
 * each transaction commits the consumed offsets with the records (sendOffsetsToTransaction with
 * the consumer's group metadata, KIP-447). A transaction begins with the first record polled
 * and ends after N records or MS milliseconds, whichever comes first (defaults 1,000 / 100,
 * examples/copy's). Prints one line per committed transaction in examples/copy's format, then
 * "copied N records" after S seconds without a record (0: never stop).
 *
 * Errors are handled as KafkaProducer's documentation prescribes: ProducerFencedException,
 * OutOfOrderSequenceException and AuthorizationException end the producer (here: the program,
 * status 1); any other KafkaException aborts the transaction, and the consumer is rewound to
 * the group's committed offsets so that the aborted input is copied again. A commit that
 * throws TimeoutException is retried, as commitTransaction's documentation allows (it may
 * already be completing, so no other call may follow it), at most 10 times.
 */
import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class JavaCopy {
    private static void usage(String problem) {
        System.err.println("JavaCopy: " + problem);
        System.err.println("usage: JavaCopy BOOTSTRAP SOURCE DESTINATION GROUP TRANSACTIONAL_ID "
                + "[--commit-records N] [--commit-ms MS] [--idle-seconds S]");
        System.exit(2);
    }

    public static void main(String[] argv) {
        int commitRecords = 1000, commitMs = 100, idleSeconds = 0;
        String[] positional = new String[5];
        int n = 0;
        for (int i = 0; i < argv.length; i++) {
            if (!argv[i].startsWith("--")) {
                if (n == 5) usage("five arguments needed");
                positional[n++] = argv[i];
                continue;
            }
            if (i + 1 >= argv.length) usage(argv[i] + " takes a number");
            int value = 0;
            try {
                value = Integer.parseInt(argv[i + 1]);
            } catch (NumberFormatException e) {
                usage(argv[i] + " takes a number");
            }
            switch (argv[i]) {
                case "--commit-records": commitRecords = Math.max(value, 1); break;
                case "--commit-ms": commitMs = value; break;
                case "--idle-seconds": idleSeconds = value; break;
                default: usage("unknown flag " + argv[i]);
            }
            i++;
        }
        if (n != 5) usage("five arguments needed");
        String bootstrap = positional[0], source = positional[1], destination = positional[2];

        Properties consumerProps = new Properties();
        consumerProps.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        consumerProps.put(ConsumerConfig.GROUP_ID_CONFIG, positional[3]);
        consumerProps.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        consumerProps.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        consumerProps.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        consumerProps.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, Integer.toString(commitRecords));
        consumerProps.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        consumerProps.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        Properties producerProps = new Properties();
        producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        producerProps.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, positional[4]);
        producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());

        long total = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps);
                KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps)) {
            producer.initTransactions();
            consumer.subscribe(Collections.singletonList(source));
            long started = System.nanoTime(), lastRecord = started;
            Duration interval = Duration.ofMillis(Math.max(commitMs, 1));
            while (true) {
                long polled = System.nanoTime();
                ConsumerRecords<byte[], byte[]> records = consumer.poll(interval);
                if (records.isEmpty()) {
                    if (idleSeconds > 0 && System.nanoTime() - lastRecord >= idleSeconds * 1_000_000_000L) break;
                    continue;
                }
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                Map<Integer, Integer> perPartition = new TreeMap<>();
                int in = 0;
                try {
                    producer.beginTransaction();
                    while (true) {
                        for (ConsumerRecord<byte[], byte[]> r : records) {
                            producer.send(new ProducerRecord<>(destination, r.partition(), r.key(), r.value(), r.headers()));
                            offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                            perPartition.merge(r.partition(), 1, Integer::sum);
                            in++;
                        }
                        long left = commitMs * 1_000_000L - (System.nanoTime() - polled);
                        if (in >= commitRecords || left <= 0) break;
                        records = consumer.poll(Duration.ofNanos(left));
                    }
                    producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                    commit(producer);
                } catch (ProducerFencedException | OutOfOrderSequenceException | AuthorizationException e) {
                    System.err.println("JavaCopy: fatal: " + e);
                    System.exit(1);
                } catch (KafkaException e) {
                    System.err.println("transaction aborted and its input rewound: " + e);
                    producer.abortTransaction();
                    rewind(consumer);
                    continue;
                }
                lastRecord = System.nanoTime();
                total += in;
                StringBuilder parts = new StringBuilder();
                for (Map.Entry<Integer, Integer> e : perPartition.entrySet())
                    parts.append(parts.length() == 0 ? "" : " ").append(e.getKey()).append(':').append(e.getValue());
                System.out.printf("%8.1fs committed %d in / %d out (total %d) in %.1f ms; partitions %s%n",
                        (lastRecord - started) / 1e9, in, in, total, (lastRecord - polled) / 1e6, parts);
            }
        }
        System.out.printf("copied %d records%n", total);
    }

    /** commitTransaction, retried on TimeoutException (at most 10 tries in all). */
    private static void commit(KafkaProducer<byte[], byte[]> producer) {
        for (int attempt = 1; ; attempt++) {
            try {
                producer.commitTransaction();
                return;
            } catch (TimeoutException e) {
                if (attempt == 10) {
                    System.err.println("JavaCopy: fatal: the commit timed out 10 times: " + e);
                    System.exit(1);
                }
                System.err.println("commit timed out, trying again: " + e);
            }
        }
    }

    /** Seeks every assigned partition back to the group's committed offset (the start if none). */
    private static void rewind(KafkaConsumer<byte[], byte[]> consumer) {
        Set<TopicPartition> assignment = consumer.assignment();
        Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(assignment);
        for (TopicPartition tp : assignment) {
            OffsetAndMetadata offset = committed.get(tp);
            if (offset != null) consumer.seek(tp, offset);
            else consumer.seekToBeginning(Collections.singleton(tp));
        }
    }
}
