//! One partition of a Fetch response turned into records: batches decoded (compressed ones
//! too, with the decoder's bound), records before the fetch offset dropped, and under
//! read_committed the transactional filter of KIP-98.
//!
//! read_committed: the broker answers up to the last stable offset and lists the aborted
//! transactions that overlap the answer (producer id, first offset). A transactional batch of
//! a producer whose aborted transaction began at or before the batch is skipped, until that
//! producer's ABORT marker; control batches (the markers) are never delivered. This is the
//! Java consumer's `CompletedFetch` logic, written from the KIP. Records at or past the last
//! stable offset are never delivered even if a broker sent them.
//!
//! [`ConsumerRecord`], what a record becomes for the application, lives here with the
//! decoding that makes it.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use bytes::Bytes;

use crate::protocol::DecodeError;
use crate::protocol::messages::fetch::AbortedTransaction;
use crate::protocol::record_batch::{
    ControlRecordKind, Header, TimestampType, decode_shared_batch,
};
use crate::types::{IsolationLevel, TopicPartition};

/// One consumed record.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumerRecord {
    /// The topic.
    pub topic: Arc<str>,
    /// The partition.
    pub partition: i32,
    /// The record's offset.
    pub offset: i64,
    /// The record's timestamp, in milliseconds since the epoch: see `timestamp_type`.
    pub timestamp: i64,
    /// What the timestamp is: the producer's create time, or the broker's log append time
    /// (topics with `message.timestamp.type=LogAppendTime`; the batch attributes' bit 3).
    pub timestamp_type: TimestampType,
    /// The key.
    pub key: Option<Bytes>,
    /// The value (`None`: a tombstone). Key and value are slices of the fetch answer they
    /// came in (of the decompressed batch, if compressed), not copies: a record kept keeps
    /// that buffer alive; copy the bytes out to keep a record past many answers.
    pub value: Option<Bytes>,
    /// The headers, in order.
    pub headers: Vec<Header>,
    /// The leader epoch of the partition when the record was appended (its batch's
    /// `PartitionLeaderEpoch`; `None` if the batch has none), as the Java consumer's
    /// `leaderEpoch()`: what a commit of the offset after it carries (KIP-320), so a later
    /// reader can tell whether the log was truncated under that offset.
    pub leader_epoch: Option<i32>,
}

impl ConsumerRecord {
    /// The record's topic and partition.
    pub fn topic_partition(&self) -> TopicPartition {
        TopicPartition::new(Arc::clone(&self.topic), self.partition)
    }

    /// Whether the record is of `partition` (compared in place: no name is copied).
    pub(crate) fn is_of(&self, partition: &TopicPartition) -> bool {
        self.partition == partition.partition && *self.topic == *partition.topic
    }
}

/// One fetched partition's answer, decoded a batch at a time as records are taken: a Fetch
/// answer can carry `max.partition.fetch.bytes` of records per partition (thousands), and
/// decoding it whole into the buffer would hold them all decoded at once and spend the
/// decoding on records a revocation or a loss then throws away.
#[derive(Debug)]
pub struct PartitionReader {
    topic: Arc<str>,
    partition: i32,
    bytes: Bytes,
    /// Where the next batch starts in `bytes`; `None` once the answer is used up.
    at: Option<usize>,
    fetch_offset: i64,
    committed_only: bool,
    last_stable_offset: i64,
    /// Aborted transactions by first offset, consumed as the batches pass them.
    pending_aborts: BTreeSet<(i64, i64)>,
    /// Producers whose aborted transaction is under way at the current batch.
    aborting: HashSet<i64>,
    next_offset: i64,
    /// Where the next fetch starts once the whole answer is read, from the batch headers
    /// alone ([`answer_end`]): a fetch from there can be in flight while this answer is read.
    end: i64,
    /// The leader epoch of the last batch read (delivered, filtered or a marker), KIP-320.
    last_epoch: Option<i32>,
}

/// Where the next fetch starts after `bytes` (a partition's `Records`, fetched from
/// `fetch_offset`) is read to its end, from the batch headers (base offset, length, last
/// offset delta) without decoding a record: past the last whole batch, but not past the
/// last stable offset under read_committed (a batch from there on is fetched again; between
/// the last record before it and it there is none). This is the offset
/// [`PartitionReader::next_offset`] reaches when the answer decodes cleanly; the fetcher
/// checks the two agree before it applies an answer fetched from here.
fn answer_end(
    bytes: &[u8],
    fetch_offset: i64,
    committed_only: bool,
    last_stable_offset: i64,
) -> i64 {
    /// Base offset and length (the log overhead), then epoch, magic, CRC, attributes, and
    /// the last offset delta.
    const LOG_OVERHEAD: usize = 12;
    const LAST_OFFSET_DELTA_END: usize = 27;
    let stable_end = (committed_only && last_stable_offset >= 0).then_some(last_stable_offset);
    let mut end = fetch_offset;
    let mut at = 0usize;
    while let Some(header) = bytes.get(at..at.saturating_add(LAST_OFFSET_DELTA_END)) {
        let field = |from: usize, to: usize| header.get(from..to).unwrap_or_default();
        let base = i64::from_be_bytes(field(0, 8).try_into().unwrap_or_default());
        let length = i32::from_be_bytes(field(8, 12).try_into().unwrap_or_default());
        let delta = i32::from_be_bytes(field(23, 27).try_into().unwrap_or_default());
        let Some(total) = usize::try_from(length)
            .ok()
            .map(|l| l.saturating_add(LOG_OVERHEAD))
            .filter(|t| at.saturating_add(*t) <= bytes.len() && *t >= LAST_OFFSET_DELTA_END)
        else {
            // A tail the broker cut (or a broken frame, which the decoder reports).
            break;
        };
        at += total;
        let last = base.saturating_add(i64::from(delta));
        if last < fetch_offset {
            continue;
        }
        if stable_end.is_some_and(|lso| base >= lso) {
            break;
        }
        end = end.max(last.saturating_add(1));
    }
    match stable_end {
        Some(lso) => end.min(lso).max(fetch_offset),
        None => end,
    }
}

impl PartitionReader {
    /// A reader of `bytes` (a partition's `Records`) fetched from `fetch_offset`.
    pub fn new(
        topic: &Arc<str>,
        partition: i32,
        bytes: Bytes,
        fetch_offset: i64,
        isolation: IsolationLevel,
        last_stable_offset: i64,
        aborted: Option<&[AbortedTransaction]>,
    ) -> Self {
        let committed_only = isolation == IsolationLevel::ReadCommitted;
        Self {
            end: answer_end(&bytes, fetch_offset, committed_only, last_stable_offset),
            topic: Arc::clone(topic),
            partition,
            bytes,
            at: Some(0),
            fetch_offset,
            committed_only,
            last_stable_offset,
            pending_aborts: aborted
                .unwrap_or_default()
                .iter()
                .map(|a| (a.first_offset, a.producer_id))
                .collect(),
            aborting: HashSet::new(),
            next_offset: fetch_offset,
            last_epoch: None,
        }
    }

    /// The leader epoch of the last batch read so far (`None` before the first, or when its
    /// batches carry none): the epoch of the log at [`PartitionReader::next_offset`], which a
    /// position validated after a leader change is checked under (KIP-320).
    pub fn last_epoch(&self) -> Option<i32> {
        self.last_epoch
    }

    /// The next offset to fetch once this answer is used up: past every batch read so far
    /// (delivered, filtered or a marker).
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }

    /// The offset this answer was fetched from.
    pub fn fetch_offset(&self) -> i64 {
        self.fetch_offset
    }

    /// Where the next fetch starts once this answer is read to its end (see [`answer_end`]).
    pub fn end(&self) -> i64 {
        self.end
    }

    /// The deliverable records of the next batch that has any; `None` when the answer is used
    /// up (or the rest is past the last stable offset: fetched again later).
    pub fn next_batch(&mut self) -> Result<Option<Vec<ConsumerRecord>>, DecodeError> {
        while let Some(at) = self.at {
            // Keys and values stay slices of the fetched buffer: no copy per batch. `at` never
            // passes the end: it moves on by a batch `decode_shared_batch` found whole.
            let rest = self.bytes.slice(at..);
            let Some((batch, len)) = decode_shared_batch(&rest)? else {
                self.at = None;
                break;
            };
            self.at = Some(at + len);
            let last = batch.last_offset();
            if last < self.fetch_offset {
                continue;
            }
            let epoch = leader_epoch(batch.partition_leader_epoch);
            if self.committed_only
                && self.last_stable_offset >= 0
                && batch.base_offset >= self.last_stable_offset
            {
                // Not stable yet: fetch it again later.
                self.at = None;
                break;
            }
            self.last_epoch = epoch.or(self.last_epoch);
            if self.committed_only && batch.is_transactional() {
                while let Some(&(first, producer)) = self.pending_aborts.first() {
                    if first > last {
                        break;
                    }
                    self.pending_aborts.pop_first();
                    self.aborting.insert(producer);
                }
            }
            if batch.is_control() {
                if let Some(marker) = batch.control()
                    && marker.kind == ControlRecordKind::Abort
                {
                    self.aborting.remove(&batch.producer_id);
                }
                self.next_offset = last + 1;
                continue;
            }
            if self.committed_only
                && batch.is_transactional()
                && self.aborting.contains(&batch.producer_id)
            {
                self.next_offset = last + 1;
                continue;
            }
            let mut records = Vec::with_capacity(batch.records.len());
            let mut stopped = false;
            for record in &batch.records {
                let offset = batch.record_offset(record);
                if offset < self.fetch_offset {
                    continue;
                }
                if self.committed_only
                    && self.last_stable_offset >= 0
                    && offset >= self.last_stable_offset
                {
                    stopped = true;
                    break;
                }
                records.push(ConsumerRecord {
                    topic: Arc::clone(&self.topic),
                    partition: self.partition,
                    offset,
                    timestamp: batch.record_timestamp(record),
                    timestamp_type: batch.timestamp_type(),
                    key: record.key.clone(),
                    value: record.value.clone(),
                    headers: record.headers.clone(),
                    leader_epoch: epoch,
                });
                self.next_offset = offset + 1;
            }
            if stopped {
                self.at = None;
            } else {
                self.next_offset = self.next_offset.max(last + 1);
            }
            if !records.is_empty() {
                return Ok(Some(records));
            }
        }
        // Read cleanly to the end: past what lies between the last record and the last
        // stable offset too, where a fetch ahead of this reader started.
        self.next_offset = self.next_offset.max(self.end);
        Ok(None)
    }
}

/// A batch's `PartitionLeaderEpoch`, `None` when it has none (-1: written before KIP-101, or
/// by a client that left it unset).
fn leader_epoch(field: i32) -> Option<i32> {
    (field >= 0).then_some(field)
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;

    use super::*;
    use crate::protocol::record_batch::{BatchBuilder, ControlRecord, encode_control_batch};

    #[test]
    fn a_record_is_of_its_own_topic_and_partition_only() {
        let record = ConsumerRecord {
            topic: Arc::from("a"),
            partition: 1,
            offset: 0,
            timestamp: 0,
            timestamp_type: crate::TimestampType::CreateTime,
            key: None,
            value: None,
            headers: Vec::new(),
            leader_epoch: None,
        };
        assert!(record.is_of(&TopicPartition::new("a", 1)));
        assert!(!record.is_of(&TopicPartition::new("a", 0)));
        assert!(!record.is_of(&TopicPartition::new("b", 1)));
    }

    /// The records of one fetched partition, and where the next fetch starts.
    #[derive(Debug, Default)]
    struct PartitionRecords {
        /// Deliverable records, in offset order.
        pub records: Vec<ConsumerRecord>,
        /// The next offset to fetch: past every batch read (delivered, filtered or a marker).
        pub next_offset: i64,
    }

    /// Decodes `bytes` (a partition's `Records`) fetched from `fetch_offset`, all at once.
    fn partition_records(
        topic: &Arc<str>,
        partition: i32,
        bytes: &Bytes,
        fetch_offset: i64,
        isolation: IsolationLevel,
        last_stable_offset: i64,
        aborted: Option<&[AbortedTransaction]>,
    ) -> Result<PartitionRecords, DecodeError> {
        let mut reader = PartitionReader::new(
            topic,
            partition,
            bytes.clone(),
            fetch_offset,
            isolation,
            last_stable_offset,
            aborted,
        );
        let mut records = Vec::new();
        while let Some(batch) = reader.next_batch()? {
            records.extend(batch);
        }
        Ok(PartitionRecords {
            records,
            next_offset: reader.next_offset(),
        })
    }

    /// A reader of partition 0 of `t` over `bytes`, fetched from offset 0.
    fn reader_of_t0(
        bytes: Bytes,
        isolation: IsolationLevel,
        last_stable_offset: i64,
        aborted: Option<&[AbortedTransaction]>,
    ) -> PartitionReader {
        let topic: Arc<str> = Arc::from("t");
        PartitionReader::new(&topic, 0, bytes, 0, isolation, last_stable_offset, aborted)
    }

    fn batch(base_offset: i64, values: &[&str], producer: Option<i64>) -> Bytes {
        let mut b = BatchBuilder::new(1000, 256);
        for v in values {
            b.append(0, None, Some(v.as_bytes()), &[]);
        }
        let mut sealed = b.seal(producer.is_some());
        if let Some(pid) = producer {
            sealed.stamp(pid, 0, 0);
        } else {
            sealed.stamp(-1, -1, -1);
        }
        let mut bytes = BytesMut::from(&sealed.to_bytes()[..]);
        bytes[..8].copy_from_slice(&base_offset.to_be_bytes());
        bytes.freeze()
    }

    fn marker(offset: i64, producer: i64, commit: bool) -> Bytes {
        let kind = if commit {
            ControlRecordKind::Commit
        } else {
            ControlRecordKind::Abort
        };
        let b = encode_control_batch(
            ControlRecord {
                kind,
                coordinator_epoch: 0,
            },
            1000,
            producer,
            0,
        );
        let mut bytes = BytesMut::from(&b.to_bytes()[..]);
        bytes[..8].copy_from_slice(&offset.to_be_bytes());
        bytes.freeze()
    }

    fn log(parts: &[Bytes]) -> Bytes {
        let mut out = BytesMut::new();
        for p in parts {
            out.extend_from_slice(p);
        }
        out.freeze()
    }

    /// Every record of partition 0 of `t` in `bytes` from `fetch_offset`, read_uncommitted.
    fn read_uncommitted(bytes: &Bytes, fetch_offset: i64) -> PartitionRecords {
        let topic: Arc<str> = Arc::from("t");
        partition_records(
            &topic,
            0,
            bytes,
            fetch_offset,
            IsolationLevel::ReadUncommitted,
            -1,
            None,
        )
        .unwrap()
    }

    fn values(r: &PartitionRecords) -> Vec<(i64, String)> {
        r.records
            .iter()
            .map(|r| {
                (
                    r.offset,
                    String::from_utf8(r.value.as_ref().unwrap().to_vec()).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn read_committed_skips_aborted_transactions_and_markers() {
        // 0-1 committed txn of pid 1, 2 commit marker, 3-4 aborted txn of pid 2, 5 abort
        // marker, 6 plain record, 7 committed txn of pid 2 (its abort marker ended the
        // aborted one: what pid 2 writes next is read), 8 commit marker.
        let bytes = log(&[
            batch(0, &["a", "b"], Some(1)),
            marker(2, 1, true),
            batch(3, &["x", "y"], Some(2)),
            marker(5, 2, false),
            batch(6, &["c"], None),
            batch(7, &["z"], Some(2)),
            marker(8, 2, true),
        ]);
        let aborted = [AbortedTransaction {
            producer_id: 2,
            first_offset: 3,
        }];
        let topic: Arc<str> = Arc::from("t");
        let committed = partition_records(
            &topic,
            0,
            &bytes,
            0,
            IsolationLevel::ReadCommitted,
            9,
            Some(&aborted),
        )
        .unwrap();
        assert_eq!(
            values(&committed),
            vec![
                (0, "a".into()),
                (1, "b".into()),
                (6, "c".into()),
                (7, "z".into())
            ]
        );
        assert_eq!(committed.next_offset, 9);
        let all = read_uncommitted(&bytes, 0);
        assert_eq!(all.records.len(), 6, "markers are never records");
        // From the middle: records before the fetch offset are dropped.
        let from = read_uncommitted(&bytes, 4);
        assert_eq!(
            values(&from),
            vec![(4, "y".into()), (6, "c".into()), (7, "z".into())]
        );
    }

    /// A batch that fails its CRC stops the reader with an error, and the fetch starts again
    /// right after what was read before it: past a marker, and past an aborted transaction's
    /// batch, never back at a record already handed out.
    #[test]
    fn a_corrupt_batch_is_fetched_again_from_past_what_was_read() {
        let corrupt = |base| {
            let mut bytes = BytesMut::from(&batch(base, &["c"], None)[..]);
            let last = bytes.len() - 1;
            bytes[last] ^= 0xff;
            bytes.freeze()
        };
        let aborted = [AbortedTransaction {
            producer_id: 2,
            first_offset: 3,
        }];
        let fetch_again_from = |parts: &[Bytes]| {
            let committed_only = IsolationLevel::ReadCommitted;
            let mut reader = reader_of_t0(log(parts), committed_only, 10, Some(&aborted));
            assert_eq!(reader.next_batch().unwrap().unwrap().len(), 2);
            assert!(reader.next_batch().is_err(), "the CRC fails");
            reader.next_offset()
        };
        let committed = [batch(0, &["a", "b"], Some(1)), marker(2, 1, true)];
        let after_committed = |tail: &[Bytes]| [&committed[..], tail].concat();
        assert_eq!(fetch_again_from(&after_committed(&[corrupt(3)])), 3);
        let aborted_batch = batch(3, &["x"], Some(2));
        assert_eq!(
            fetch_again_from(&after_committed(&[aborted_batch, corrupt(4)])),
            4
        );
    }

    /// A batch whose last records compaction removed keeps its last offset delta (the v2
    /// batch format keeps a batch's offset range through compaction, KIP-98): the position
    /// after its records is past that range, not after its last record.
    #[test]
    fn a_batch_compacted_at_its_end_is_read_past_its_last_offset() {
        let mut compacted = BytesMut::from(&batch(0, &["a", "b"], None)[..]);
        // Offsets 2 and 3 compacted away: last offset delta 3, then the CRC over attributes on.
        compacted[23..27].copy_from_slice(&3i32.to_be_bytes());
        let crc = crc32c::crc32c(&compacted[21..]);
        compacted[17..21].copy_from_slice(&crc.to_be_bytes());
        let bytes = log(&[compacted.freeze(), batch(4, &["c"], None)]);
        let mut reader = reader_of_t0(bytes, IsolationLevel::ReadUncommitted, -1, None);
        assert_eq!(reader.next_batch().unwrap().unwrap().len(), 2);
        assert_eq!(
            reader.next_offset(),
            4,
            "past the compacted offsets 2 and 3"
        );
        assert_eq!(reader.next_batch().unwrap().unwrap()[0].offset, 4);
        assert_eq!(reader.next_batch().unwrap(), None);
        assert_eq!(reader.next_offset(), 5);
    }

    /// A producer's committed transaction, then its aborted one, in one answer: the abort
    /// hides records from the aborted transaction's first offset on, none before it.
    #[test]
    fn an_aborted_transaction_hides_nothing_before_its_first_offset() {
        let bytes = log(&[
            batch(0, &["a", "b"], Some(2)),
            marker(2, 2, true),
            batch(3, &["x", "y"], Some(2)),
            marker(5, 2, false),
        ]);
        let aborted = [AbortedTransaction {
            producer_id: 2,
            first_offset: 3,
        }];
        let topic: Arc<str> = Arc::from("t");
        let r = partition_records(
            &topic,
            0,
            &bytes,
            0,
            IsolationLevel::ReadCommitted,
            6,
            Some(&aborted),
        )
        .unwrap();
        assert_eq!(values(&r), vec![(0, "a".into()), (1, "b".into())]);
        assert_eq!(r.next_offset, 6);
    }

    /// Fetched from a batch's last record: that record is read, and the answer ends past it.
    #[test]
    fn an_answer_fetched_from_a_batch_s_last_record_ends_past_it() {
        let bytes = batch(0, &["a", "b", "c"], None);
        let topic: Arc<str> = Arc::from("t");
        let reader = PartitionReader::new(
            &topic,
            0,
            bytes.clone(),
            2,
            IsolationLevel::ReadUncommitted,
            -1,
            None,
        );
        assert_eq!(reader.end(), 3);
        assert_eq!(values(&read_uncommitted(&bytes, 2)), vec![(2, "c".into())]);
    }

    #[test]
    fn nothing_at_or_past_the_last_stable_offset() {
        let bytes = log(&[batch(0, &["a"], None), batch(1, &["open"], Some(9))]);
        let topic: Arc<str> = Arc::from("t");
        let r = partition_records(
            &topic,
            0,
            &bytes,
            0,
            IsolationLevel::ReadCommitted,
            1,
            Some(&[]),
        )
        .unwrap();
        assert_eq!(values(&r), vec![(0, "a".into())]);
        assert_eq!(
            r.next_offset, 1,
            "the open transaction is fetched again later"
        );
        // A cut-off tail is not an error.
        let cut = bytes.slice(..bytes.len() - 3);
        let r = read_uncommitted(&cut, 0);
        assert_eq!(r.next_offset, 1);
    }

    /// A last stable offset inside a batch stops the read there: the records before it are
    /// delivered and the next fetch starts at the first one not delivered.
    #[test]
    fn a_last_stable_offset_inside_a_batch_stops_the_read_there() {
        let bytes = log(&[batch(0, &["a", "b", "c", "d"], None)]);
        let mut reader = reader_of_t0(bytes, IsolationLevel::ReadCommitted, 2, Some(&[]));
        let read = reader.next_batch().unwrap().expect("the stable records");
        let offsets: Vec<i64> = read.iter().map(|r| r.offset).collect();
        assert_eq!(offsets, vec![0, 1]);
        assert_eq!(
            reader.next_offset(),
            2,
            "right after the batch, not only at the end"
        );
        assert_eq!(reader.next_batch().unwrap(), None);
        assert_eq!(reader.next_offset(), 2);
    }
}
