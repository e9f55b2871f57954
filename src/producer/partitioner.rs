//! Choosing a partition for a record, as the Java producer does.
//!
//! - Keyed records: murmur2 of the key bytes, made positive, modulo the partition count
//!   (`BuiltInPartitioner.partitionForKey`), so a key lands on the same partition whichever
//!   client wrote it.
//! - Keyless records: sticky partitioning (KIP-480), switching partitions after `batch.size`
//!   bytes as KIP-794's uniform sticky partitioner does, so batches fill up instead of every
//!   partition getting a trickle of one-record batches.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Kafka's 32-bit murmur2 hash, bit for bit `org.apache.kafka.common.utils.Utils.murmur2`:
/// seed `0x9747b28c`, little-endian 4-byte blocks, then the 1–3 trailing bytes.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;

    // Java xors the seed with the array's `int` length; Java arrays never exceed i32::MAX, so
    // keeping the low 32 bits is the same value for every key Java could hash.
    let mut h = SEED ^ data.len() as u32;
    let blocks = data.chunks_exact(4);
    let tail = blocks.remainder();
    for block in blocks {
        let mut k = little_endian(block);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    // Java's `switch (length % 4)` falls through from case 3 to case 1: the 1-3 trailing bytes,
    // little-endian, then one multiplication.
    if !tail.is_empty() {
        h ^= little_endian(tail);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Up to 4 bytes read as a little-endian integer, as murmur2 reads its blocks and its tail.
fn little_endian(bytes: &[u8]) -> u32 {
    bytes
        .iter()
        .rev()
        .fold(0, |value, &byte| value << 8 | u32::from(byte))
}

/// The partition of a keyed record: `toPositive(murmur2(key)) % numPartitions`
/// (`BuiltInPartitioner.partitionForKey`; `Utils.toPositive` clears the sign bit).
///
/// `num_partitions` must be at least 1 — a topic without partitions has nothing to choose
/// from; a non-positive count gives partition 0 rather than a division by zero.
pub fn partition_for_key(key: &[u8], num_partitions: i32) -> i32 {
    (murmur2(key) & 0x7fff_ffff) % num_partitions.max(1)
}

/// The sticky partitioner for one topic's keyless records (KIP-480, as refined by KIP-794).
///
/// It keeps one partition and gives it every keyless record until `batch.size` bytes have
/// been appended to it (Java's `BuiltInPartitioner.updatePartitionInfo`), and then until the
/// partition's open batch is full, so that it moves on at a batch boundary: leaving after
/// exactly `batch.size` bytes of values would leave a tail of a few records in a batch of its
/// own (the records' overhead makes a batch fill before `batch.size` bytes of values), which
/// at a thousand partitions ships alone, since the partition's next turn is far away. Java
/// holds the switch the same way while the partition's last batch is not full, and moves on
/// regardless at twice `batch.size`, as this one does.
///
/// The next partition is chosen at random. Unlike Java's uniform sticky partitioner, which
/// picks among all partitions and may pick the same one again, it is never the one just left
/// when there is more than one (as KIP-480's `StickyPartitionCache` did), so a switch always
/// spreads load. Java also weighs the choice by broker queue sizes (KIP-794 adaptive
/// partitioning); this one picks uniformly.
///
/// One per topic, kept in the topic's route by `send`, so a keyless record's partition takes
/// no lookup by topic name. The random choices come from an RNG seeded at construction, so a
/// seed replays them.
#[derive(Debug, Clone)]
pub struct StickyPartitioner {
    /// Bytes a partition receives before the partitioner moves on; at least 1.
    batch_size: usize,
    /// Chooses the next partition.
    rng: SmallRng,
    /// The current choice; `None` before the topic's first keyless record.
    choice: Option<StickyChoice>,
}

/// The current sticky partition.
#[derive(Debug, Clone, Copy)]
struct StickyChoice {
    /// The partition keyless records go to.
    partition: i32,
    /// Bytes appended to it since it was chosen.
    appended_bytes: usize,
}

impl StickyPartitioner {
    /// A partitioner switching partitions after `batch_size` bytes (`batch.size`; 0 is taken
    /// as 1, i.e. a switch after every record) with its random choices seeded by `seed`.
    pub fn new(batch_size: usize, seed: u64) -> Self {
        StickyPartitioner {
            batch_size: batch_size.max(1),
            rng: SmallRng::seed_from_u64(seed),
            choice: None,
        }
    }

    /// The partition for the next keyless record of the topic, which has `num_partitions`
    /// partitions (at least 1; a non-positive count gives partition 0), at a batch boundary.
    #[cfg(test)]
    pub fn partition(&mut self, num_partitions: i32) -> i32 {
        self.partition_record(num_partitions, 0, |_| false)
    }

    /// The partition for the next keyless record of `bytes` (see [`StickyPartitioner`]),
    /// counted at once. A record that then fails to append still counts: that only brings
    /// the next switch a little earlier.
    ///
    /// A new partition is chosen on the first record, when the current one is no longer below
    /// `num_partitions`, after `batch.size` bytes went to the current one if
    /// `has_open_batch(current)` says it has no batch open for more records, and after twice
    /// `batch.size` bytes in any case. `has_open_batch` is asked only past `batch.size` bytes,
    /// so the per-record path does not take the partition's lock twice.
    pub fn partition_record(
        &mut self,
        num_partitions: i32,
        bytes: usize,
        has_open_batch: impl FnOnce(i32) -> bool,
    ) -> i32 {
        let num_partitions = num_partitions.max(1);
        // `Some(previous)`: a new partition is due, other than `previous` if that is set.
        let due = match &self.choice {
            Some(current) if current.partition < num_partitions => {
                let appended = current.appended_bytes;
                let due = appended >= self.batch_size.saturating_mul(2)
                    || appended >= self.batch_size && !has_open_batch(current.partition);
                due.then_some(Some(current.partition))
            }
            // The first record, or the partition is gone: any partition.
            _ => Some(None),
        };
        let choice = match (due, &mut self.choice) {
            (None, Some(current)) => current,
            (previous, choice) => choice.insert(StickyChoice {
                partition: choose_partition(&mut self.rng, previous.flatten(), num_partitions),
                appended_bytes: 0,
            }),
        };
        choice.appended_bytes = choice.appended_bytes.saturating_add(bytes);
        choice.partition
    }

    /// Records that `bytes` of a keyless record were appended to the current partition. The
    /// switch it may cause happens at the next [`Self::partition`] call, which knows the
    /// current partition count. Before the first record it is ignored.
    #[cfg(test)]
    pub fn record_appended(&mut self, bytes: usize) {
        if let Some(choice) = &mut self.choice {
            choice.appended_bytes = choice.appended_bytes.saturating_add(bytes);
        }
    }
}

/// A uniformly random partition below `num_partitions` (≥ 1), other than `previous` when there
/// is another to take.
fn choose_partition(rng: &mut SmallRng, previous: Option<i32>, num_partitions: i32) -> i32 {
    match previous {
        Some(previous) if num_partitions > 1 => {
            // Draw among the other partitions: skip over `previous`.
            let drawn = rng.random_range(0..num_partitions - 1);
            if drawn >= previous { drawn + 1 } else { drawn }
        }
        _ => rng.random_range(0..num_partitions),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_kafka_utils_test() {
        // Expected values from apache/kafka
        // clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java, testMurmur2.
        for (data, expected) in [
            (&b"21"[..], -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ] {
            assert_eq!(
                murmur2(data),
                expected,
                "{:?}",
                String::from_utf8_lossy(data)
            );
        }
    }

    /// `(num_partitions, partition)` pairs for one key.
    type PartitionsByCount = [(i32, i32); 5];

    /// `(key, murmur2, [(num_partitions, partition)])` printed by the real Java code: a
    /// throwaway program calling `Utils.murmur2` and `BuiltInPartitioner.partitionForKey` from
    /// kafka-clients-4.1.1.jar on the UTF-8 bytes of each key (and on the raw bytes below).
    /// They cover every tail length (0–3), negative hashes and bytes ≥ 0x80.
    const JAVA_PARTITIONS: [(&[u8], i32, PartitionsByCount); 13] = [
        (
            b"",
            275_646_681,
            [(1, 0), (3, 0), (6, 3), (12, 9), (100, 81)],
        ),
        (
            b"a",
            -1_563_381_124,
            [(1, 0), (3, 1), (6, 4), (12, 4), (100, 24)],
        ),
        (
            b"ab",
            316_155_434,
            [(1, 0), (3, 2), (6, 2), (12, 2), (100, 34)],
        ),
        (
            b"abc",
            479_470_107,
            [(1, 0), (3, 0), (6, 3), (12, 3), (100, 7)],
        ),
        (
            b"abcd",
            -1_323_649_548,
            [(1, 0), (3, 2), (6, 2), (12, 8), (100, 0)],
        ),
        (
            b"abcde",
            461_995_741,
            [(1, 0), (3, 1), (6, 1), (12, 1), (100, 41)],
        ),
        (
            b"key-0",
            29_210_041,
            [(1, 0), (3, 1), (6, 1), (12, 1), (100, 41)],
        ),
        (
            b"key-1",
            193_331_640,
            [(1, 0), (3, 0), (6, 0), (12, 0), (100, 40)],
        ),
        (
            b"order-12345",
            -1_747_359_319,
            [(1, 0), (3, 1), (6, 1), (12, 1), (100, 29)],
        ),
        (
            b"exactly",
            1_592_336_356,
            [(1, 0), (3, 1), (6, 4), (12, 4), (100, 56)],
        ),
        (
            "été".as_bytes(),
            -2_101_193_575,
            [(1, 0), (3, 1), (6, 1), (12, 1), (100, 73)],
        ),
        (
            "🦀".as_bytes(),
            1_309_741_855,
            [(1, 0), (3, 1), (6, 1), (12, 7), (100, 55)],
        ),
        (
            &[0xff, 0x80, 0x00, 0x7f, 0xfe, 0x01, 0xc3],
            953_675_850,
            [(1, 0), (3, 0), (6, 0), (12, 6), (100, 50)],
        ),
    ];

    #[test]
    fn partition_for_key_matches_java() {
        for (key, hash, partitions) in JAVA_PARTITIONS {
            assert_eq!(murmur2(key), hash, "{key:?}");
            for (num_partitions, partition) in partitions {
                assert_eq!(
                    partition_for_key(key, num_partitions),
                    partition,
                    "{key:?} over {num_partitions}"
                );
            }
        }
    }

    #[test]
    fn partition_for_key_never_divides_by_zero() {
        assert_eq!(partition_for_key(b"k", 0), 0);
        assert_eq!(partition_for_key(b"k", -3), 0);
    }

    #[test]
    fn sticks_until_batch_size_bytes_then_switches() {
        let mut partitioner = StickyPartitioner::new(100, 7);
        let first = partitioner.partition(8);
        for _ in 0..9 {
            partitioner.record_appended(10);
            assert_eq!(partitioner.partition(8), first);
        }
        partitioner.record_appended(9);
        assert_eq!(partitioner.partition(8), first, "99 bytes: not yet");
        partitioner.record_appended(1);
        let second = partitioner.partition(8);
        assert_ne!(second, first, "100 bytes: switched");
        assert_eq!(partitioner.partition(8), second, "and sticks again");
    }

    #[test]
    fn past_batch_size_waits_for_the_open_batch_to_fill_up_to_twice_batch_size() {
        let mut partitioner = StickyPartitioner::new(100, 7);
        let first = partitioner.partition_record(8, 100, |_| unreachable!("not past 100 bytes"));
        let mut asked = Vec::new();
        for _ in 0..9 {
            let open = |partition| {
                asked.push(partition);
                true
            };
            assert_eq!(partitioner.partition_record(8, 10, open), first);
        }
        assert_eq!(
            asked, [first; 9],
            "asked about the current partition each time"
        );
        // 190 bytes: a batch still open keeps the partition...
        assert_eq!(partitioner.partition_record(8, 0, |_| true), first);
        // ...and one full (or sent) moves on.
        let second = partitioner.partition_record(8, 10, |_| false);
        assert_ne!(second, first);
        // Twice batch.size moves on even while the batch is open.
        partitioner.record_appended(189);
        assert_eq!(
            partitioner.partition_record(8, 0, |_| true),
            second,
            "199 bytes"
        );
        partitioner.record_appended(1);
        assert_ne!(partitioner.partition_record(8, 0, |_| true), second);
    }

    #[test]
    fn never_the_same_partition_twice_in_a_row() {
        let mut partitioner = StickyPartitioner::new(1, 42);
        let mut previous = partitioner.partition(2);
        for _ in 0..1000 {
            partitioner.record_appended(1);
            let next = partitioner.partition(2);
            assert_ne!(next, previous);
            previous = next;
        }
    }

    #[test]
    fn spreads_over_all_partitions() {
        let mut partitioner = StickyPartitioner::new(16_384, 1);
        let mut batches = [0u32; 12];
        for _ in 0..12_000 {
            let partition = partitioner.partition(12);
            let index = usize::try_from(partition).unwrap();
            batches[index] += 1;
            partitioner.record_appended(16_384);
        }
        // 12 000 switches over 12 partitions: about 1 000 each.
        for (partition, count) in batches.iter().enumerate() {
            assert!(
                (800..1200).contains(count),
                "partition {partition}: {count}"
            );
        }
    }

    #[test]
    fn follows_partition_count_changes() {
        let mut partitioner = StickyPartitioner::new(1000, 5);
        // Find a seed state whose partition is not 0, then shrink below it.
        let mut current = partitioner.partition(10);
        while current == 0 {
            partitioner.record_appended(1000);
            current = partitioner.partition(10);
        }
        let shrunk = partitioner.partition(current);
        assert!(shrunk < current, "moved inside the smaller topic");
        // Growing keeps the current choice.
        assert_eq!(partitioner.partition(1000), shrunk);
    }

    #[test]
    fn one_partition_is_always_partition_zero() {
        let mut partitioner = StickyPartitioner::new(1, 9);
        for _ in 0..100 {
            assert_eq!(partitioner.partition(1), 0);
            partitioner.record_appended(5);
        }
        assert_eq!(partitioner.partition(0), 0);
        assert_eq!(partitioner.partition(-1), 0);
    }

    #[test]
    fn same_seed_same_choices() {
        let choices = |seed| {
            let mut partitioner = StickyPartitioner::new(1, seed);
            (0..50)
                .map(|_| {
                    let partition = partitioner.partition(100);
                    partitioner.record_appended(1);
                    partition
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(choices(11), choices(11));
        assert_ne!(choices(11), choices(12));
    }
}
