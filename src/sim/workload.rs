//! The workload: which record is sent to which partition when. Every record's value starts
//! with its id (its index in the plan, 8 bytes big-endian), so the checkers can follow each
//! one into the logs. Records are sent in plan order; a full buffer blocks the sender until
//! memory frees, as `send` does (backpressure), so the plan order is the send order.

use std::ops::Range;

use super::entropy::Entropy;
use crate::types::{Millis, TopicPartition};

/// One record of the plan.
#[derive(Debug, Clone)]
pub struct PlannedRecord {
    /// When the application calls `send` (virtual time).
    pub at: Millis,
    /// Where it goes.
    pub partition: TopicPartition,
    /// Filler bytes after the 8-byte id, to vary record and batch sizes.
    pub padding: usize,
}

/// Every record a run sends, in send order.
#[derive(Debug, Clone, Default)]
pub struct Workload {
    /// The records; a record's id is its index here.
    pub records: Vec<PlannedRecord>,
    /// Call `begin_flush` on the engine once the last record is sent.
    pub flush_at_end: bool,
    /// A transactional producer sends the records in these transactions (in order, covering
    /// the records in order); `None`: an idempotent producer.
    pub transactions: Option<Vec<PlannedTransaction>>,
}

/// One transaction of a transactional workload.
#[derive(Debug, Clone)]
pub struct PlannedTransaction {
    /// The ids of its records.
    pub records: Range<usize>,
    /// Commit (true) or abort (false) at the end. An abortable failure aborts regardless.
    pub commit: bool,
    /// `send_offsets_to_transaction` before the end: the offsets, and whether the consumer
    /// group metadata is stale (ILLEGAL_GENERATION, then the transaction must be aborted).
    pub offsets: Option<(Vec<(TopicPartition, i64)>, bool)>,
    /// Try a call that is invalid in the current state first (it must fail and send nothing).
    pub misuse: bool,
}

impl PlannedTransaction {
    /// Splits `records` records into random transactions (an empty one now and then);
    /// offsets go to partitions of the consumed topic `input`, each value naming its
    /// transaction (index × 1000 + partition).
    pub fn generate(entropy: &mut Entropy, records: usize) -> Vec<Self> {
        let mut transactions = Vec::new();
        let mut start = 0;
        while start < records {
            // Sometimes an empty transaction first (commit and abort with nothing sent).
            let empty_before = transactions
                .last()
                .is_some_and(|t: &PlannedTransaction| t.records.is_empty());
            let size = if !empty_before && entropy.chance(50) {
                0
            } else {
                usize::try_from(entropy.range(1, 60)).unwrap_or(1)
            };
            let end = (start + size).min(records);
            let index = i64::try_from(transactions.len()).unwrap_or(0);
            let offsets = entropy.chance(300).then(|| {
                let partitions = entropy.range(1, 3);
                let offsets = (0..partitions)
                    .map(|p| {
                        let partition = i32::try_from(p).unwrap_or(0);
                        (
                            TopicPartition::new("input", partition),
                            index * 1000 + i64::from(partition),
                        )
                    })
                    .collect();
                (offsets, entropy.chance(100))
            });
            transactions.push(PlannedTransaction {
                records: start..end,
                commit: entropy.chance(750),
                offsets,
                misuse: entropy.chance(100),
            });
            start = end;
        }
        transactions
    }
}

impl Workload {
    /// Adds `count` records to `partitions` (round robin), one every `spacing_ms` from `start`.
    pub fn burst(
        &mut self,
        start: Millis,
        partitions: &[TopicPartition],
        count: usize,
        spacing_ms: Millis,
    ) -> &mut Self {
        for (i, partition) in partitions.iter().cycle().take(count).enumerate() {
            let i = Millis::try_from(i).unwrap_or(Millis::MAX);
            self.records.push(PlannedRecord {
                at: start.saturating_add(i.saturating_mul(spacing_ms)),
                partition: partition.clone(),
                padding: 8,
            });
        }
        self
    }

    /// The value of record `id`: the id, then `padding` filler bytes.
    pub fn value(id: u64, padding: usize) -> Vec<u8> {
        let mut value = id.to_be_bytes().to_vec();
        value.resize(8 + padding, b'.');
        value
    }

    /// A random workload of `50..=400` records in one to four phases over `partitions`. A
    /// phase may start after a pause longer than `long_pause_ms` (long enough for producer
    /// state to expire and retention to delete what came before).
    pub fn generate(
        entropy: &mut Entropy,
        partitions: &[TopicPartition],
        long_pause_ms: Millis,
    ) -> Self {
        let mut workload = Workload {
            flush_at_end: entropy.chance(500),
            ..Workload::default()
        };
        let total = usize::try_from(entropy.range(50, 400)).unwrap_or(50);
        let phases = entropy.range(1, 4);
        let mut at: Millis = 0;
        for phase in 0..phases {
            let remaining = total.saturating_sub(workload.records.len());
            let count = if phase + 1 == phases {
                remaining
            } else {
                usize::try_from(entropy.range(0, u64::try_from(remaining).unwrap_or(0)))
                    .unwrap_or(0)
            };
            if phase > 0 {
                at += if entropy.chance(300) {
                    long_pause_ms + entropy.range(0, long_pause_ms)
                } else {
                    entropy.range(0, 500)
                };
            }
            // A phase uses all partitions or a few (so others sit idle through its faults).
            let used: Vec<TopicPartition> = if entropy.chance(500) {
                partitions.to_vec()
            } else {
                let keep = entropy.range(1, u64::try_from(partitions.len()).unwrap_or(1));
                partitions
                    .iter()
                    .filter(|_| entropy.chance(500))
                    .take(usize::try_from(keep).unwrap_or(1))
                    .cloned()
                    .collect()
            };
            let used = if used.is_empty() {
                partitions.iter().take(1).cloned().collect()
            } else {
                used
            };
            let max_gap = entropy.range(0, 20);
            for _ in 0..count {
                at += entropy.range(0, max_gap);
                let Some(partition) = entropy.pick(&used).cloned() else {
                    break;
                };
                workload.records.push(PlannedRecord {
                    at,
                    partition,
                    padding: usize::try_from(entropy.range(0, 100)).unwrap_or(0),
                });
            }
        }
        workload
    }

    /// When the last record is sent.
    pub fn end_ms(&self) -> Millis {
        self.records.iter().map(|r| r.at).max().unwrap_or(0)
    }
}
