//! Which open transactions are hanging: the decision behind
//! [`Admin::find_hanging_transactions`](crate::Admin::find_hanging_transactions), kept apart
//! from the calls that gather its inputs so every case is a unit test.
//!
//! A partition's leader knows each producer's open transaction by the offset it started at
//! (DescribeProducers); the transaction coordinator knows which partitions it will write a
//! marker to (DescribeTransactions). A transaction is hanging when the partition has one open
//! and the coordinator will never end it there: the shape of KAFKA-12671, where a produce
//! request retried after its transaction had ended opened a new one the coordinator never
//! heard of, and the partition's last stable offset stopped for good (KIP-664).

use std::collections::BTreeMap;
use std::time::Duration;

use super::{ActiveProducer, HangingTransaction, TransactionDescription};
use crate::types::TopicPartition;

/// A producer's open transaction on one partition that is older than the search's bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HangingCandidate {
    pub(crate) partition: TopicPartition,
    pub(crate) producer: ActiveProducer,
    pub(crate) age: Duration,
}

/// The open transactions among `producers` (by partition, as their leaders describe them)
/// whose producer last wrote more than `older_than` before `now_ms`.
///
/// The age is measured from the producer's last record timestamp, the only clock the
/// partition keeps for it: a transaction still written to is young however long ago it
/// began, and a live transaction cannot outlast its timeout anyway, which is at most the
/// broker's `transaction.max.timeout.ms`.
pub(crate) fn open_transactions_older_than(
    producers: &BTreeMap<TopicPartition, Vec<ActiveProducer>>,
    now_ms: i64,
    older_than: Duration,
) -> Vec<HangingCandidate> {
    let bound_ms = i64::try_from(older_than.as_millis()).unwrap_or(i64::MAX);
    producers
        .iter()
        .flat_map(|(partition, states)| states.iter().map(move |s| (partition, s)))
        .filter(|(_, state)| state.current_txn_start_offset.is_some())
        .filter_map(|(partition, state)| {
            let age_ms = now_ms.saturating_sub(state.last_timestamp_ms);
            (age_ms > bound_ms).then(|| HangingCandidate {
                partition: partition.clone(),
                producer: state.clone(),
                age: Duration::from_millis(age_ms.max(0).unsigned_abs()),
            })
        })
        .collect()
}

/// Whether the coordinator's `description` will still end `producer`'s open transaction on
/// `partition` with a marker: the same
/// producer id, an epoch not older than the partition's (a marker with a newer epoch also
/// closes the transaction), a state that still writes markers, and the partition among those
/// it writes to.
pub(super) fn coordinator_tracks(
    partition: &TopicPartition,
    producer: &ActiveProducer,
    description: &TransactionDescription,
) -> bool {
    description.producer_id == producer.producer_id
        && description.producer_epoch >= producer.producer_epoch
        && description.state.writes_markers()
        && description.partitions.contains(partition)
}

/// The hanging transactions among `candidates`.
///
/// `transactional_ids` maps a producer id to the transactional id the coordinators hold it
/// under (ListTransactions filtered by producer id); `descriptions` holds the coordinators'
/// description of each of those ids, absent when the coordinator no longer knows it. A
/// producer id no coordinator holds, an id without a description, and a description that
/// does not list the partition all leave the transaction hanging.
pub(crate) fn hanging(
    candidates: Vec<HangingCandidate>,
    transactional_ids: &BTreeMap<i64, String>,
    descriptions: &BTreeMap<String, TransactionDescription>,
) -> Vec<HangingTransaction> {
    candidates
        .into_iter()
        .filter_map(|open| {
            let transactional_id = transactional_ids.get(&open.producer.producer_id);
            let tracked = transactional_id
                .and_then(|id| descriptions.get(id))
                .is_some_and(|description| {
                    coordinator_tracks(&open.partition, &open.producer, description)
                });
            (!tracked).then(|| HangingTransaction {
                partition: open.partition,
                producer_id: open.producer.producer_id,
                producer_epoch: open.producer.producer_epoch,
                coordinator_epoch: open.producer.coordinator_epoch,
                start_offset: open.producer.current_txn_start_offset.unwrap_or_default(),
                last_timestamp_ms: open.producer.last_timestamp_ms,
                age: open.age,
                transactional_id: transactional_id.cloned(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::admin::transactions::TransactionState;

    const NOW: i64 = 1_000_000;
    const MINUTE: Duration = Duration::from_secs(60);

    fn tp(partition: i32) -> TopicPartition {
        TopicPartition::new("t", partition)
    }

    fn producer(id: i64, epoch: i16, start: Option<i64>, last_ms: i64) -> ActiveProducer {
        ActiveProducer {
            producer_id: id,
            producer_epoch: epoch,
            last_sequence: 4,
            last_timestamp_ms: last_ms,
            coordinator_epoch: Some(0),
            current_txn_start_offset: start,
        }
    }

    fn description(
        id: i64,
        epoch: i16,
        state: TransactionState,
        partitions: &[TopicPartition],
    ) -> TransactionDescription {
        TransactionDescription {
            transactional_id: "txn".into(),
            coordinator: 0,
            state,
            producer_id: id,
            producer_epoch: epoch,
            timeout: MINUTE,
            start_time_ms: Some(NOW - 600_000),
            partitions: partitions.iter().cloned().collect::<BTreeSet<_>>(),
        }
    }

    /// One open transaction of producer 7 epoch 3 on t-0, ten minutes old, judged against
    /// `description` (none: the coordinator does not know the id).
    fn judge(description: Option<TransactionDescription>) -> Vec<HangingTransaction> {
        let producers = BTreeMap::from([(tp(0), vec![producer(7, 3, Some(40), NOW - 600_000)])]);
        let candidates = open_transactions_older_than(&producers, NOW, MINUTE);
        assert_eq!(candidates.len(), 1);
        let ids = BTreeMap::from([(7, "txn".to_owned())]);
        let descriptions = description
            .into_iter()
            .map(|d| (d.transactional_id.clone(), d))
            .collect();
        hanging(candidates, &ids, &descriptions)
    }

    #[test]
    fn only_open_transactions_older_than_the_bound_are_candidates() {
        let producers = BTreeMap::from([
            (
                tp(0),
                vec![
                    // Idempotent or between transactions: nothing open.
                    producer(1, 0, None, NOW - 3_600_000),
                    // Open, written to 30 s ago: young.
                    producer(2, 0, Some(10), NOW - 30_000),
                    // Open, exactly at the bound: not older than it.
                    producer(3, 0, Some(11), NOW - 60_000),
                ],
            ),
            (tp(1), vec![producer(4, 1, Some(12), NOW - 60_001)]),
        ]);
        let candidates = open_transactions_older_than(&producers, NOW, MINUTE);
        assert_eq!(candidates.len(), 1);
        assert_eq!(candidates[0].partition, tp(1));
        assert_eq!(candidates[0].producer.producer_id, 4);
        assert_eq!(candidates[0].age, Duration::from_millis(60_001));
    }

    #[test]
    fn a_timestamp_from_the_future_is_age_zero() {
        let producers = BTreeMap::from([(tp(0), vec![producer(1, 0, Some(0), NOW + 5_000)])]);
        let candidates = open_transactions_older_than(&producers, NOW, Duration::ZERO);
        assert!(candidates.is_empty(), "age 0 is not older than 0");
    }

    #[test]
    fn a_transaction_the_coordinator_tracks_is_not_hanging() {
        for state in [
            TransactionState::Ongoing,
            TransactionState::PrepareCommit,
            TransactionState::PrepareAbort,
        ] {
            assert_eq!(judge(Some(description(7, 3, state, &[tp(0)]))), vec![]);
        }
        // A newer epoch's marker closes the older epoch's transaction too.
        let newer = description(7, 4, TransactionState::PrepareAbort, &[tp(0)]);
        assert_eq!(judge(Some(newer)), vec![]);
    }

    #[test]
    fn a_producer_id_no_coordinator_holds_is_hanging() {
        let producers = BTreeMap::from([(tp(0), vec![producer(7, 3, Some(40), NOW - 600_000)])]);
        let candidates = open_transactions_older_than(&producers, NOW, MINUTE);
        let found = hanging(candidates, &BTreeMap::new(), &BTreeMap::new());
        assert_eq!(
            found,
            vec![HangingTransaction {
                partition: tp(0),
                producer_id: 7,
                producer_epoch: 3,
                coordinator_epoch: Some(0),
                start_offset: 40,
                last_timestamp_ms: NOW - 600_000,
                age: Duration::from_secs(600),
                transactional_id: None,
            }]
        );
    }

    #[test]
    fn an_id_the_coordinator_no_longer_describes_is_hanging() {
        let found = judge(None);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].transactional_id.as_deref(), Some("txn"));
    }

    #[test]
    fn a_coordinator_that_will_write_no_marker_there_leaves_it_hanging() {
        let cases = [
            // KAFKA-12671's shape: the coordinator's transaction ended, the partition's did not.
            description(7, 3, TransactionState::CompleteCommit, &[]),
            description(7, 3, TransactionState::Empty, &[]),
            // A later transaction of the same producer, on other partitions only.
            description(7, 3, TransactionState::Ongoing, &[tp(1)]),
            // The id moved on to another producer id.
            description(8, 0, TransactionState::Ongoing, &[tp(0)]),
            // The partition's transaction is of a newer epoch than the coordinator's.
            description(7, 2, TransactionState::Ongoing, &[tp(0)]),
        ];
        for case in cases {
            let why = format!("{case:?}");
            assert_eq!(judge(Some(case)).len(), 1, "{why}");
        }
    }
}
