use bytes::{Bytes, BytesMut};

use super::*;
use crate::consumer::offsets::Committed;
use crate::protocol::messages::fetch::{FetchPartitionResponse, FetchTopicResponse};
use crate::protocol::messages::list_offsets::ListOffsetsResponse;
use crate::protocol::messages::offset_for_leader_epoch::OffsetForLeaderEpochResponse;
use crate::protocol::record_batch::BatchBuilder;

/// The broker every partition here is led by.
const BROKER: BrokerId = 1;

fn tp(p: i32) -> TopicPartition {
    TopicPartition::new("t", p)
}

/// The consumer's defaults, as its state hands them to the fetcher.
fn defaults() -> FetchConfig {
    FetchConfig {
        isolation: IsolationLevel::ReadCommitted,
        reset: OffsetReset::Latest,
        max_poll_records: 500,
        max_wait_ms: 500,
        min_bytes: 1,
        max_bytes: 52_428_800,
        partition_max_bytes: 1_048_576,
        list_timeout_ms: 30_000,
        rack: String::new(),
    }
}

fn fetcher(reset: OffsetReset) -> Fetcher {
    Fetcher::new(FetchConfig {
        reset,
        max_poll_records: 2,
        ..defaults()
    })
}

/// The partitions of `asked`.
fn partitions(asked: Vec<Asked>) -> Vec<TopicPartition> {
    asked.into_iter().map(|a| a.partition).collect()
}

/// Answers the OffsetFetch `f` asks for its partitions among `offsets` with them
/// (`None`: nothing committed), without leader epochs.
fn answer_committed(f: &mut Fetcher, offsets: Vec<(TopicPartition, Option<i64>)>) -> Followup {
    let wanted: Vec<TopicPartition> = offsets.iter().map(|(tp, _)| tp.clone()).collect();
    let answers = f
        .awaiting_committed(&wanted)
        .into_iter()
        .map(|a| {
            let offset = offsets
                .iter()
                .find(|(tp, _)| *tp == a.partition)
                .and_then(|(_, o)| *o);
            let committed = offset.map(|offset| Committed {
                offset,
                leader_epoch: None,
            });
            (a, Ok(committed))
        })
        .collect();
    f.apply_committed(answers)
}

fn batch(base: i64, n: usize) -> Bytes {
    let mut b = BatchBuilder::new(0, 64);
    for _ in 0..n {
        b.append(0, None, Some(b"v"), &[]);
    }
    let mut bytes = BytesMut::from(&b.seal(false).to_bytes()[..]);
    bytes[..8].copy_from_slice(&base.to_be_bytes());
    bytes.freeze()
}

fn answer(partition: i32, code: ErrorCode, records: Option<Bytes>) -> FetchResponse {
    FetchResponse {
        responses: vec![FetchTopicResponse {
            topic: "t".into(),
            partitions: vec![FetchPartitionResponse {
                partition_index: partition,
                error_code: code.0,
                last_stable_offset: 100,
                records,
                ..FetchPartitionResponse::default()
            }],
            ..FetchTopicResponse::default()
        }],
        ..FetchResponse::default()
    }
}

/// An answer from [`BROKER`] for each `(partition, records, end)`: the log (high
/// watermark and last stable offset) ends at `end`.
fn answers(parts: &[(i32, Option<Bytes>, i64)]) -> FetchResponse {
    let mut response = answer(0, ErrorCode::NONE, None);
    response.responses[0].partitions = parts
        .iter()
        .map(|(partition, records, end)| FetchPartitionResponse {
            partition_index: *partition,
            high_watermark: *end,
            last_stable_offset: *end,
            records: records.clone(),
            ..FetchPartitionResponse::default()
        })
        .collect();
    response
}

/// A fetcher handing out up to `max_poll_records` per poll.
fn fetcher_of(max_poll_records: usize) -> Fetcher {
    Fetcher::new(FetchConfig {
        reset: OffsetReset::Earliest,
        max_poll_records,
        ..defaults()
    })
}

/// Partitions 0 and 1 are led by [`BROKER`], 2 by broker 2.
fn leader(tp: &TopicPartition) -> Option<BrokerId> {
    Some(if tp.partition == 2 { 2 } else { BROKER })
}

/// The partitions and offsets of `round`'s fetch to `broker`, if it has one.
fn fetch_to(round: &FetchRound, broker: BrokerId) -> Option<Vec<(i32, i64)>> {
    round
        .fetches
        .iter()
        .find(|(b, _)| *b == broker)
        .map(|(_, fetched)| {
            fetched
                .iter()
                .map(|(tp, _, o)| (tp.partition, *o))
                .collect()
        })
}

#[test]
fn caught_up_partitions_wait_for_the_next_fetch_of_a_broker_being_read() {
    let mut f = fetcher_of(1_000);
    let all = [tp(0), tp(1), tp(2)];
    f.assigned(&all, true);
    answer_committed(
        &mut f,
        vec![(tp(0), Some(0)), (tp(1), Some(0)), (tp(2), Some(0))],
    );
    let first = f.fetch_round(&all, leader);
    assert_eq!(fetch_to(&first, BROKER), Some(vec![(0, 0), (1, 0)]));
    assert_eq!(fetch_to(&first, 2), Some(vec![(2, 0)]));
    let (_, fetched) = &first.fetches[0];
    // Partition 0 has a backlog; 1 and 2 are at their end.
    f.apply_fetch(
        BROKER,
        answers(&[(0, Some(batch(0, 4)), 100), (1, None, 0)]),
        fetched.clone(),
    );
    f.apply_fetch(2, answers(&[(2, None, 0)]), first.fetches[1].1.clone());
    let ahead = f.fetch_round(&all, leader);
    assert_eq!(
        fetch_to(&ahead, BROKER),
        Some(vec![(0, 4), (1, 0)]),
        "fetched ahead, the caught-up partition along"
    );
    assert_eq!(
        fetch_to(&ahead, 2),
        Some(vec![(2, 0)]),
        "nothing of broker 2 is being read: its fetch waits at the broker"
    );
    f.apply_fetch(
        BROKER,
        answers(&[(0, Some(batch(4, 4)), 100)]),
        ahead.fetches[0].1.clone(),
    );
    // Partition 0 holds two answers: a fetch of partition 1 alone would wait out
    // fetch.max.wait.ms at the broker while partition 0 needs its next one.
    let held = f.fetch_round(&all, leader);
    assert_eq!(fetch_to(&held, BROKER), None, "held back");
    assert_eq!(
        fetch_to(&held, 2),
        Some(vec![(2, 0)]),
        "another broker's goes"
    );
    assert!(!held.leaderless);
    // A paused partition is not being read: nothing to wait for.
    f.set_paused(&[tp(0)], true).unwrap();
    assert_eq!(
        fetch_to(&f.fetch_round(&all, leader), BROKER),
        Some(vec![(1, 0)])
    );
    f.set_paused(&[tp(0)], false).unwrap();
    // The first answer read: partition 0 is fetched ahead again, 1 goes with it.
    assert_eq!(f.take_records(&[tp(0)], 4).unwrap().len(), 4);
    let next = f.fetch_round(&all, leader);
    assert_eq!(fetch_to(&next, BROKER), Some(vec![(0, 8), (1, 0)]));
    // Everything fetched is at the end: held back until the records held are taken,
    // then it goes (the broker answers it when new data comes).
    f.apply_fetch(
        BROKER,
        answers(&[(0, None, 8), (1, None, 0)]),
        next.fetches[0].1.clone(),
    );
    assert_eq!(fetch_to(&f.fetch_round(&all, leader), BROKER), None);
    assert_eq!(f.take_records(&all, usize::MAX).unwrap().len(), 4);
    assert_eq!(
        fetch_to(&f.fetch_round(&all, leader), BROKER),
        Some(vec![(0, 8), (1, 0)]),
        "nothing held: a long poll"
    );
    // No leader known: left out, and the round says so.
    let round = f.fetch_round(&all, |tp| leader(tp).filter(|_| tp.partition != 1));
    assert!(round.leaderless);
    assert_eq!(fetch_to(&round, BROKER), Some(vec![(0, 8)]));
}

/// `f`'s partitions 0..4, each given one answer of `records` records from offset 0.
fn four_with_backlog(f: &mut Fetcher, records: &[usize; 4]) -> [TopicPartition; 4] {
    let all = [tp(0), tp(1), tp(2), tp(3)];
    with_backlog(f, &all, records);
    all
}

/// `all` assigned from offset 0, partition i answered with `records[i]` records.
fn with_backlog(f: &mut Fetcher, all: &[TopicPartition], records: &[usize]) {
    f.assigned(all, true);
    answer_committed(f, all.iter().map(|tp| (tp.clone(), Some(0))).collect());
    let fetched = f.to_fetch(all);
    let parts: Vec<(i32, Option<Bytes>, i64)> = records
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(p, n)| (p as i32, Some(batch(0, *n)), 1_000))
        .collect();
    f.apply_fetch(BROKER, answers(&parts), fetched);
}

/// The records of each partition in `taken`, by partition: their offsets in order.
fn by_partition(taken: &[ConsumerRecord]) -> BTreeMap<i32, Vec<i64>> {
    let mut out: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for r in taken {
        out.entry(r.partition).or_default().push(r.offset);
    }
    out
}

#[test]
fn every_partition_gets_its_share_of_each_poll() {
    // 130 records a poll among 4: shares of 33, 33, 32 and 32, the larger ones moving on.
    let mut f = fetcher_of(130);
    let all = four_with_backlog(&mut f, &[400; 4]);
    let mut delivered: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for poll in 1..=8 {
        let taken = f.take_records(&all, usize::MAX).unwrap();
        assert_eq!(taken.len(), 130, "a full poll");
        let shares = by_partition(&taken);
        assert_eq!(
            shares.len(),
            4,
            "every partition in poll {poll}: {shares:?}"
        );
        for (p, offsets) in shares {
            delivered.entry(p).or_default().extend(offsets);
        }
        let counts: Vec<usize> = delivered.values().map(Vec::len).collect();
        let spread = counts.iter().max().unwrap() - counts.iter().min().unwrap();
        assert!(spread <= 2, "poll {poll}: {counts:?}");
        if poll % 4 == 0 {
            assert!(counts.iter().all(|n| *n == poll / 4 * 130), "{counts:?}");
        }
    }
    for offsets in delivered.values() {
        assert_eq!(*offsets, (0..260).collect::<Vec<i64>>(), "in order, once");
    }
    // One record a poll: the partitions take turns.
    let mut f = fetcher_of(1);
    let all = four_with_backlog(&mut f, &[10; 4]);
    let turns: Vec<i32> = (0..8)
        .map(|_| f.take_records(&all, usize::MAX).unwrap()[0].partition)
        .collect();
    assert_eq!(turns, vec![0, 1, 2, 3, 0, 1, 2, 3]);
}

#[test]
fn a_poll_with_less_room_than_partitions_serves_them_a_run_at_a_time() {
    // 40 partitions behind by 100 records each, 64 records a poll (shares of 2): two runs of
    // 32 a poll,
    // the partitions in turn, so every one has been served once after 20 polls and their
    // progress never differs by more than a run.
    let mut f = fetcher_of(64);
    let all: Vec<TopicPartition> = (0..40).map(tp).collect();
    with_backlog(&mut f, &all, &[100; 40]);
    let mut delivered: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for poll in 1..=60 {
        let taken = f.take_records(&all, usize::MAX).unwrap();
        assert_eq!(taken.len(), 64, "a full poll");
        let runs = by_partition(&taken);
        assert!(
            runs.values().all(|offsets| offsets.len() == 32),
            "poll {poll}: {:?}",
            runs.iter().map(|(p, o)| (*p, o.len())).collect::<Vec<_>>()
        );
        for (p, offsets) in runs {
            delivered.entry(p).or_default().extend(offsets);
        }
        let counts: Vec<usize> = (0..40)
            .map(|p| delivered.get(&p).map_or(0, Vec::len))
            .collect();
        let spread = counts.iter().max().unwrap() - counts.iter().min().unwrap();
        assert!(spread <= 32, "poll {poll}: {counts:?}");
        if poll % 20 == 0 {
            assert!(counts.iter().all(|n| *n == poll / 20 * 32), "{counts:?}");
        }
    }
    for offsets in delivered.values() {
        assert_eq!(*offsets, (0..96).collect::<Vec<i64>>(), "in order, once");
    }
}

#[test]
fn shares_are_cut_among_the_partitions_holding_records_only() {
    // 100 records a poll, two of four partitions holding records: halves of 50 (runs of 32
    // would be the crowded case, which counting the two empty ones would wrongly make it).
    let mut f = fetcher_of(100);
    let all = four_with_backlog(&mut f, &[200, 0, 200, 0]);
    let taken = f.take_records(&all, usize::MAX).unwrap();
    let counts: Vec<(i32, usize)> = by_partition(&taken)
        .into_iter()
        .map(|(p, offsets)| (p, offsets.len()))
        .collect();
    assert_eq!(counts, vec![(0, 50), (2, 50)]);
}

#[test]
fn room_a_share_leaves_goes_to_a_partition_served_before() {
    // 100 records a poll, partition 0 with 200 and partition 1 with 10: halves of 50, of
    // which partition 1 fills 10; the 40 left go back to partition 0 in the second round.
    let mut f = fetcher_of(100);
    let all = four_with_backlog(&mut f, &[200, 10, 0, 0]);
    let taken = f.take_records(&all, usize::MAX).unwrap();
    let shares = by_partition(&taken);
    assert_eq!(
        shares[&0],
        (0..90).collect::<Vec<i64>>(),
        "a full poll, in order"
    );
    assert_eq!(shares[&1], (0..10).collect::<Vec<i64>>());
}

#[test]
fn shares_of_exactly_a_run_are_not_crowded() {
    // 64 records a poll between two: shares of 32, the crowded run's length but not shorter,
    // so the next poll starts one partition on, as uncrowded polls do.
    let mut f = fetcher_of(64);
    let all = [tp(0), tp(1)];
    with_backlog(&mut f, &all, &[200, 200]);
    let firsts: Vec<i32> = (0..3)
        .map(|_| f.take_records(&all, usize::MAX).unwrap()[0].partition)
        .collect();
    assert_eq!(firsts, vec![0, 1, 0]);
}

#[test]
fn fetchable_lists_in_any_order_are_served_alike() {
    // The membership hands its partitions sorted, a manual assignment in the user's order,
    // and either may name partitions the fetcher no longer holds: the same partitions are
    // fetched and served, the turns following the list's order.
    let mut f = fetcher_of(1);
    let all = four_with_backlog(&mut f, &[10, 10, 0, 10]);
    let unsorted = [tp(3), tp(9), tp(1), tp(0), tp(2)];
    let sorted = [tp(0), tp(1), tp(2), tp(3), tp(9)];
    let turns: Vec<i32> = (0..6)
        .map(|_| f.take_records(&unsorted, usize::MAX).unwrap()[0].partition)
        .collect();
    // More partitions hold records than a poll has room for: each poll starts after the one
    // the last served, down the list (3, 9, 1, 0, 2, then 3 again).
    assert_eq!(turns, vec![3, 1, 0, 3, 1, 0], "{turns:?}");
    let partitions = |fetched: Vec<Fetched>| -> Vec<i32> {
        let mut p: Vec<i32> = fetched.iter().map(|(tp, _, _)| tp.partition).collect();
        p.sort_unstable();
        p
    };
    assert_eq!(
        partitions(f.to_fetch(&unsorted)),
        partitions(f.to_fetch(&sorted))
    );
    assert_eq!(partitions(f.to_fetch(&sorted)), vec![0, 1, 2, 3]);
    let by_broker = |round: FetchRound| -> Vec<(BrokerId, Vec<i32>)> {
        round
            .fetches
            .into_iter()
            .map(|(b, fetched)| (b, partitions(fetched)))
            .collect()
    };
    assert_eq!(
        by_broker(f.fetch_round(&unsorted, leader)),
        by_broker(f.fetch_round(&sorted, leader))
    );
    assert_eq!(all.len(), 4);
}

#[test]
fn the_room_a_partition_leaves_goes_to_the_others() {
    let mut f = fetcher_of(8);
    // Partition 0 has one record, 1 a backlog, 2 and 3 nothing.
    let all = four_with_backlog(&mut f, &[1, 100, 0, 0]);
    let taken = f.take_records(&all, usize::MAX).unwrap();
    assert_eq!(taken.len(), 8, "the poll is filled");
    let shares = by_partition(&taken);
    assert_eq!(shares[&0], vec![0]);
    assert_eq!(shares[&1], (0..7).collect::<Vec<i64>>());
    // Starting at partition 1 this time: it takes its share, 0 has nothing left, and the
    // room left goes back to 1, in order.
    let taken = f.take_records(&all, usize::MAX).unwrap();
    assert_eq!(by_partition(&taken)[&1], (7..15).collect::<Vec<i64>>());
    // A limit below max.poll.records is kept.
    assert_eq!(f.take_records(&all, 3).unwrap().len(), 3);
    assert!(f.take_records(&all, 0).is_none());
}

#[test]
fn committed_then_fetch_then_deliver_in_polls() {
    let mut f = fetcher(OffsetReset::Earliest);
    f.assigned(&[tp(0), tp(1)], true);
    let all = [tp(0), tp(1)];
    assert_eq!(partitions(f.awaiting_committed(&all)), all.to_vec());
    assert!(f.to_fetch(&all).is_empty(), "no position yet");
    answer_committed(&mut f, vec![(tp(0), Some(10)), (tp(1), None)]);
    assert_eq!(f.position(&tp(0)), Some(10));
    let listing = f.awaiting_reset(&HashSet::new());
    assert_eq!(partitions(listing.clone()), vec![tp(1)]);
    let reset = f.reset_request(&listing);
    assert_eq!(reset.topics[0].partitions[0].timestamp, -2);
    // read_committed (KIP-98) needs v2: refused at v1 rather than read uncommitted.
    assert_eq!(crate::protocol::generated::lowest_version(&reset), 2);
    let fetched = f.to_fetch(&all);
    assert_eq!(fetched.len(), 1);
    let request = f.fetch_request(BROKER, &fetched);
    assert_eq!(request.topics[0].partitions[0].fetch_offset, 10);
    assert_eq!(request.isolation_level, 1, "read_committed by default");
    let followup = f.apply_fetch(
        BROKER,
        answer(0, ErrorCode::NONE, Some(batch(10, 3))),
        fetched,
    );
    assert!(!followup.retry && !followup.refresh_metadata && followup.errors.is_empty());
    // max.poll.records = 2: the position moves as records are handed over.
    assert_eq!(f.take_records(&all, usize::MAX).unwrap().len(), 2);
    assert_eq!(f.position(&tp(0)), Some(12));
    let ahead = f.to_fetch(&all);
    assert_eq!(
        ahead,
        vec![(tp(0), f.partitions[&tp(0)].token, 13)],
        "fetched ahead from the answer's end while its records wait"
    );
    assert_eq!(f.take_records(&all, usize::MAX).unwrap().len(), 1);
    assert_eq!(f.position(&tp(0)), Some(13));
}

#[test]
fn lag_is_the_log_end_less_the_position_as_records_are_handed_out() {
    for (isolation, end) in [
        (IsolationLevel::ReadCommitted, 100),
        (IsolationLevel::ReadUncommitted, 120),
    ] {
        let mut f = Fetcher::new(FetchConfig {
            isolation,
            max_poll_records: 2,
            ..defaults()
        });
        f.assigned(&[tp(0), tp(1)], true);
        let all = [tp(0), tp(1)];
        answer_committed(&mut f, vec![(tp(0), Some(10)), (tp(1), Some(0))]);
        assert_eq!(f.lag(&tp(0)), None, "no fetch answer yet");
        let fetched = f.to_fetch(&all);
        let mut response = answer(0, ErrorCode::NONE, Some(batch(10, 3)));
        response.responses[0].partitions[0].high_watermark = 120;
        f.apply_fetch(BROKER, response, fetched);
        let lag = f.lag(&tp(0)).unwrap();
        assert_eq!(
            (lag.position, lag.high_watermark, lag.last_stable_offset),
            (10, 120, 100)
        );
        // Under read_committed the end is the last stable offset (what it can read).
        assert_eq!(lag.lag, end - 10, "{isolation:?}");
        f.take_records(&all, usize::MAX).unwrap();
        assert_eq!(f.lag(&tp(0)).unwrap().lag, end - 12);
        assert_eq!(f.max_lag(), end - 12, "tp(1) has no answer: no lag");
        assert_eq!(f.lags().len(), 1);
    }
}

/// `caught_up` (what the copy loop's commit-when-caught-up waits for) holds only once every
/// owned partition's records are handed out and its position is the log's end, and never
/// for a consumer that owns nothing.
#[test]
fn caught_up_means_every_owned_partition_is_read_to_its_end() {
    let mut f = fetcher_of(10);
    assert!(!f.caught_up(), "owns nothing");
    f.assigned(&[tp(0)], true);
    answer_committed(&mut f, vec![(tp(0), Some(0))]);
    assert!(!f.caught_up(), "no fetch answer yet: the end is unknown");
    let fetched = f.to_fetch(&[tp(0)]);
    f.apply_fetch(BROKER, answers(&[(0, Some(batch(0, 3)), 3)]), fetched);
    assert!(!f.caught_up(), "records fetched but not handed out");
    assert_eq!(f.take_records(&[tp(0)], usize::MAX).unwrap().len(), 3);
    assert!(f.caught_up(), "position 3 at the log's end 3");
}

#[test]
fn stale_answers_and_errors_never_move_the_position() {
    let mut f = fetcher(OffsetReset::Latest);
    f.assigned(&[tp(0)], true);
    answer_committed(&mut f, vec![(tp(0), Some(5))]);
    let all = [tp(0)];
    let fetched = f.to_fetch(&all);
    // A seek while the fetch is in flight: its answer is dropped.
    f.seek(&tp(0), 2).unwrap();
    f.apply_fetch(
        BROKER,
        answer(0, ErrorCode::NONE, Some(batch(5, 2))),
        fetched,
    );
    assert_eq!(f.position(&tp(0)), Some(2));
    assert!(f.take_records(&all, usize::MAX).is_none());
    // A leader change: refresh metadata, same offset again.
    let fetched = f.to_fetch(&all);
    let followup = f.apply_fetch(
        BROKER,
        answer(0, ErrorCode::NOT_LEADER_OR_FOLLOWER, None),
        fetched.clone(),
    );
    assert!(followup.refresh_metadata && followup.retry);
    assert_eq!(f.to_fetch(&all), fetched);
    // Out of range: reset per auto.offset.reset.
    f.apply_fetch(
        BROKER,
        answer(0, ErrorCode::OFFSET_OUT_OF_RANGE, None),
        fetched,
    );
    assert_eq!(f.position(&tp(0)), None);
    let listing = f.awaiting_reset(&HashSet::new());
    assert_eq!(partitions(listing.clone()), vec![tp(0)]);
    assert_eq!(
        f.reset_request(&listing).topics[0].partitions[0].timestamp,
        -1
    );
}

#[test]
fn an_answer_is_stale_once_its_request_or_its_offset_is_past() {
    let mut f = fetcher(OffsetReset::Latest);
    f.assigned(&[tp(0)], true);
    answer_committed(&mut f, vec![(tp(0), Some(5))]);
    let all = [tp(0)];
    // A seek to the very offset in flight still makes the answer stale: the seek's own fetch
    // brings the records.
    let fetched = f.to_fetch(&all);
    f.seek(&tp(0), 5).unwrap();
    f.apply_fetch(
        BROKER,
        answer(0, ErrorCode::NONE, Some(batch(5, 2))),
        fetched,
    );
    assert!(f.take_records(&all, usize::MAX).is_none());
    assert_eq!(f.position(&tp(0)), Some(5));
    // The same request answered twice (under the same token): the second answer starts
    // where the first did, behind the position it moved, and is dropped.
    let fetched = f.to_fetch(&all);
    for _ in 0..2 {
        f.apply_fetch(
            BROKER,
            answer(0, ErrorCode::NONE, Some(batch(5, 2))),
            fetched.clone(),
        );
    }
    let offsets: Vec<i64> = f
        .take_records(&all, usize::MAX)
        .unwrap()
        .iter()
        .map(|r| r.offset)
        .collect();
    assert_eq!(offsets, vec![5, 6]);
}

#[test]
fn revocation_rewinds_to_the_first_undelivered_record() {
    let mut f = fetcher(OffsetReset::Earliest);
    f.assigned(&[tp(0)], true);
    answer_committed(&mut f, vec![(tp(0), Some(0))]);
    let all = [tp(0)];
    let fetched = f.to_fetch(&all);
    f.apply_fetch(
        BROKER,
        answer(0, ErrorCode::NONE, Some(batch(0, 5))),
        fetched,
    );
    assert_eq!(f.take_records(&all, usize::MAX).unwrap().len(), 2);
    f.revoked(&all);
    assert_eq!(
        f.position(&tp(0)),
        Some(2),
        "commit this: 2 was never delivered"
    );
    assert!(f.take_records(&all, usize::MAX).is_none());
    f.retain(&HashSet::new());
    assert_eq!(f.position(&tp(0)), None);
    assert!(f.seek(&tp(0), 1).is_err(), "not owned any more");
}

#[test]
fn an_answer_is_decoded_a_batch_at_a_time_and_a_revocation_drops_the_rest() {
    let mut f = fetcher(OffsetReset::Earliest);
    f.assigned(&[tp(0)], true);
    answer_committed(&mut f, vec![(tp(0), Some(0))]);
    let all = [tp(0)];
    let fetched = f.to_fetch(&all);
    let answer_bytes = [batch(0, 3), batch(3, 3), batch(6, 3)].concat();
    f.apply_fetch(
        BROKER,
        answer(0, ErrorCode::NONE, Some(Bytes::from(answer_bytes))),
        fetched,
    );
    let state = &f.partitions[&tp(0)];
    assert_eq!(state.buffered.len(), 3, "only the first batch is decoded");
    let ahead = f.to_fetch(&all);
    assert_eq!(ahead.len(), 1);
    assert_eq!(ahead[0].2, 9, "fetched ahead from where the answer ends");
    f.apply_fetch(
        BROKER,
        answer(0, ErrorCode::NONE, Some(batch(9, 3))),
        ahead.clone(),
    );
    assert!(
        f.to_fetch(&all).is_empty(),
        "two answers held: not fetched again"
    );
    let taken: Vec<i64> = f
        .take_records(&all, usize::MAX)
        .unwrap()
        .iter()
        .map(|r| r.offset)
        .collect();
    assert_eq!(taken, vec![0, 1]);
    let next: Vec<i64> = f
        .take_records(&all, usize::MAX)
        .unwrap()
        .iter()
        .map(|r| r.offset)
        .collect();
    assert_eq!(next, vec![2, 3], "across the batch boundary");
    assert_eq!(
        f.partitions[&tp(0)].buffered.len(),
        2,
        "the second batch's rest"
    );
    f.revoked(&all);
    assert_eq!(
        f.position(&tp(0)),
        Some(4),
        "the undecoded rest and the answer ahead are dropped"
    );
    assert!(f.take_records(&all, usize::MAX).is_none());
    // An answer to the fetch ahead that arrives after the revocation is stale.
    f.apply_fetch(BROKER, answer(0, ErrorCode::NONE, Some(batch(9, 3))), ahead);
    assert!(f.take_records(&all, usize::MAX).is_none());
    assert_eq!(f.position(&tp(0)), Some(4));
}

/// Every record of `f`'s partition 0 it hands out, `limit` at a time, until none is left.
fn drain(f: &mut Fetcher, limit: usize) -> Vec<i64> {
    let mut offsets = Vec::new();
    for _ in 0..1_000 {
        match f.take_records(&[tp(0)], limit) {
            Some(records) => offsets.extend(records.iter().map(|r| r.offset)),
            None => break,
        }
    }
    offsets
}

#[test]
fn answers_fetched_ahead_are_delivered_in_order_exactly_once() {
    let mut f = fetcher(OffsetReset::Earliest);
    f.assigned(&[tp(0)], true);
    answer_committed(&mut f, vec![(tp(0), Some(0))]);
    let all = [tp(0)];
    let first = f.to_fetch(&all);
    f.apply_fetch(BROKER, answer(0, ErrorCode::NONE, Some(batch(0, 4))), first);
    let ahead = f.to_fetch(&all);
    assert_eq!(ahead[0].2, 4);
    f.apply_fetch(BROKER, answer(0, ErrorCode::NONE, Some(batch(4, 4))), ahead);
    assert_eq!(drain(&mut f, 3), (0..8).collect::<Vec<i64>>());
    assert_eq!(f.to_fetch(&all)[0].2, 8);
}

#[test]
fn a_fetch_ahead_from_the_wrong_offset_is_dropped_and_fetched_again() {
    // The answer's end as the headers give it: the last stable offset (6) cuts the batch.
    let mut f = fetcher(OffsetReset::Earliest);
    f.assigned(&[tp(0)], true);
    answer_committed(&mut f, vec![(tp(0), Some(0))]);
    let all = [tp(0)];
    let first = f.to_fetch(&all);
    let mut response = answer(0, ErrorCode::NONE, Some(batch(0, 10)));
    response.responses[0].partitions[0].last_stable_offset = 6;
    f.apply_fetch(BROKER, response, first);
    let ahead = f.to_fetch(&all);
    assert_eq!(ahead[0].2, 6, "not past the last stable offset");
    f.apply_fetch(BROKER, answer(0, ErrorCode::NONE, Some(batch(6, 4))), ahead);
    assert_eq!(drain(&mut f, 4), (0..10).collect::<Vec<i64>>());

    // An answer ahead that does not start where the first one really ended (a reader
    // stopped by a corrupt batch) is dropped, and the partition fetched again from there.
    let mut f = fetcher(OffsetReset::Earliest);
    f.assigned(&[tp(0)], true);
    answer_committed(&mut f, vec![(tp(0), Some(0))]);
    let first = f.to_fetch(&all);
    let mut corrupt = BytesMut::from(&batch(3, 3)[..]);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    let bytes = [batch(0, 3), corrupt.freeze()].concat();
    f.apply_fetch(
        BROKER,
        answer(0, ErrorCode::NONE, Some(Bytes::from(bytes))),
        first,
    );
    let ahead = f.to_fetch(&all);
    assert_eq!(ahead[0].2, 6, "the headers end past the corrupt batch");
    f.apply_fetch(
        BROKER,
        answer(0, ErrorCode::NONE, Some(batch(6, 2))),
        ahead.clone(),
    );
    assert_eq!(
        drain(&mut f, 10),
        vec![0, 1, 2],
        "nothing past the corrupt batch"
    );
    assert!(f.take_decode_error().is_some());
    assert_eq!(f.position(&tp(0)), Some(3));
    let again = f.to_fetch(&all);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].2, 3, "fetched again from the corrupt batch");
    assert_ne!(again[0].1, ahead[0].1, "under a new token");
}

/// The fetcher is built from its `FetchConfig` alone, and what it asks of the brokers carries
/// those settings: the Fetch bounds and isolation, the ListOffsets reset, isolation and timeout.
#[test]
fn a_fetcher_is_built_from_its_fetch_config_alone() {
    let mut f = Fetcher::new(FetchConfig {
        isolation: IsolationLevel::ReadUncommitted,
        reset: OffsetReset::Earliest,
        max_poll_records: 3,
        max_wait_ms: 250,
        min_bytes: 7,
        max_bytes: 9_000,
        partition_max_bytes: 900,
        list_timeout_ms: 1_234,
        rack: "eu-west-1a".into(),
    });
    let all = [tp(0)];
    f.assigned(&all, false);
    let asked = f.awaiting_reset(&HashSet::new());
    let listing = f.reset_request(&asked);
    assert_eq!(listing.timeout_ms, 1_234);
    assert_eq!(
        listing.isolation_level,
        IsolationLevel::ReadUncommitted.wire()
    );
    assert_eq!(
        listing.topics[0].partitions[0].timestamp, EARLIEST_TIMESTAMP,
        "auto.offset.reset=earliest lists the log start"
    );
    f.seek(&tp(0), 0).unwrap();
    let fetched = f.to_fetch(&all);
    let request = f.fetch_request(BROKER, &fetched);
    assert_eq!(
        (request.max_wait_ms, request.min_bytes, request.max_bytes),
        (250, 7, 9_000)
    );
    assert_eq!(
        request.isolation_level,
        IsolationLevel::ReadUncommitted.wire()
    );
    assert_eq!(request.topics[0].partitions[0].partition_max_bytes, 900);
    assert_eq!(request.rack_id, "eu-west-1a", "client.rack (KIP-392)");
    f.apply_fetch(
        BROKER,
        answer(0, ErrorCode::NONE, Some(batch(0, 10))),
        fetched,
    );
    let taken = f.take_records(&all, usize::MAX).unwrap();
    assert_eq!(taken.len(), 3, "max.poll.records bounds a poll");
}

#[test]
fn fetches_go_in_a_session_naming_only_what_moved() {
    let mut f = fetcher(OffsetReset::Earliest);
    let all = [tp(0), tp(1), tp(2)];
    f.assigned(&all, true);
    answer_committed(
        &mut f,
        vec![(tp(0), Some(0)), (tp(1), Some(5)), (tp(2), Some(7))],
    );
    let fetched = f.to_fetch(&all);
    let full = f.fetch_request(BROKER, &fetched);
    assert_eq!(
        (full.session_id, full.session_epoch),
        (0, 0),
        "opens a session"
    );
    let opened: Vec<(i32, i64)> = full.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition, p.fetch_offset))
        .collect();
    assert_eq!(opened, [(0, 0), (1, 5), (2, 7)], "each at its position");
    assert!(
        full.topics[0]
            .partitions
            .iter()
            .all(|p| p.current_leader_epoch == -1),
        "no leader epoch known yet: none checked (KIP-320)"
    );
    let mut response = answer(0, ErrorCode::NONE, Some(batch(0, 3)));
    response.session_id = 42;
    f.apply_fetch(BROKER, response, fetched);
    // Partition 0 moved (fetched ahead from 3), 1 is idle, 2 is paused: forgotten.
    f.set_paused(&[tp(2)], true).unwrap();
    let fetched = f.to_fetch(&all);
    let incremental = f.fetch_request(BROKER, &fetched);
    assert_eq!((incremental.session_id, incremental.session_epoch), (42, 1));
    let named: Vec<(i32, i64)> = incremental.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition, p.fetch_offset))
        .collect();
    assert_eq!(named, vec![(0, 3)], "only what moved");
    assert_eq!(incremental.forgotten_topics_data[0].partitions, vec![2]);
    // The broker answers partition 1 only (it has records); partition 0, left out, keeps
    // its position and its answer.
    let mut response = answer(1, ErrorCode::NONE, Some(batch(5, 2)));
    response.session_id = 42;
    f.apply_fetch(BROKER, response, fetched);
    assert_eq!(f.position(&tp(0)), Some(0));
    assert_eq!(f.position(&tp(1)), Some(5));
    // The broker lost the session: nothing in the answer is applied, no back-off, and the
    // next fetch is a full one naming every partition wanted.
    let fetched = f.to_fetch(&all);
    f.fetch_request(BROKER, &fetched);
    let mut lost = answer(1, ErrorCode::NONE, Some(batch(7, 2)));
    lost.error_code = ErrorCode::FETCH_SESSION_ID_NOT_FOUND.0;
    let followup = f.apply_fetch(BROKER, lost, fetched);
    assert!(!followup.retry && !followup.refresh_metadata && followup.errors.is_empty());
    assert_eq!(f.take_records(&[tp(1)], usize::MAX).unwrap().len(), 2);
    assert!(
        f.take_records(&[tp(1)], usize::MAX).is_none(),
        "7 and 8 were not applied"
    );
    let fetched = f.to_fetch(&all);
    let full = f.fetch_request(BROKER, &fetched);
    assert_eq!((full.session_id, full.session_epoch), (0, 0));
    assert_eq!(full.topics[0].partitions.len(), fetched.len());
    assert_eq!(f.session_counts().errors, 1);
    // A fetch without an answer: the next full fetch closes session 43 by its id.
    let mut response = answer(1, ErrorCode::NONE, None);
    response.session_id = 43;
    f.apply_fetch(BROKER, response, fetched);
    let fetched = f.to_fetch(&all);
    f.fetch_request(BROKER, &fetched);
    f.fetch_failed(BROKER);
    let reopen = f.fetch_request(BROKER, &fetched);
    assert_eq!((reopen.session_id, reopen.session_epoch), (43, 0));
}

#[test]
fn reset_none_is_an_error_for_the_user() {
    let mut f = fetcher(OffsetReset::None);
    f.assigned(&[tp(0)], true);
    let followup = answer_committed(&mut f, vec![(tp(0), None)]);
    assert!(matches!(followup.errors[..], [Error::InvalidState(_)]));
    assert!(f.awaiting_reset(&HashSet::new()).is_empty());
    f.seek(&tp(0), 3).unwrap();
    assert_eq!(f.to_fetch(&[tp(0)]).len(), 1);
}

#[test]
fn a_paused_partition_is_neither_fetched_nor_delivered_and_keeps_its_buffer() {
    let mut f = fetcher(OffsetReset::Earliest);
    f.assigned(&[tp(0), tp(1)], true);
    answer_committed(&mut f, vec![(tp(0), Some(0)), (tp(1), Some(0))]);
    let all = [tp(0), tp(1)];
    let fetched: Vec<Fetched> = f
        .to_fetch(&all)
        .into_iter()
        .filter(|x| x.0 == tp(0))
        .collect();
    f.apply_fetch(
        BROKER,
        answer(0, ErrorCode::NONE, Some(batch(0, 3))),
        fetched,
    );
    assert!(
        f.set_paused(&[tp(0), tp(5)], true).is_err(),
        "tp 5 is not owned"
    );
    assert!(f.paused().is_empty(), "a refused pause changes nothing");
    f.set_paused(&[tp(0), tp(1)], true).unwrap();
    assert_eq!(f.paused(), vec![tp(0), tp(1)]);
    assert!(f.to_fetch(&all).is_empty(), "paused: not fetched");
    assert!(
        f.take_records(&all, usize::MAX).is_none(),
        "paused: nothing delivered"
    );
    assert_eq!(f.position(&tp(0)), Some(0), "the position does not move");
    f.set_paused(&[tp(0)], false).unwrap();
    assert_eq!(f.paused(), vec![tp(1)]);
    let taken = f.take_records(&all, 1).unwrap();
    assert_eq!(taken.len(), 1, "the limit is kept");
    assert_eq!(
        (taken[0].partition, taken[0].offset),
        (0, 0),
        "the buffer was kept"
    );
    // Losing the partition ends its pause: owned again, it is not paused.
    f.retain(&HashSet::from([tp(0)]));
    f.assigned(&[tp(1)], true);
    assert!(f.paused().is_empty());
}

#[test]
fn seek_to_beginning_and_end_list_the_log_edges() {
    let mut f = fetcher(OffsetReset::Latest);
    f.assigned(&[tp(0), tp(1)], true);
    answer_committed(&mut f, vec![(tp(0), Some(7)), (tp(1), Some(7))]);
    let fetched = f.to_fetch(&[tp(0)]);
    assert!(f.seek_to(&[tp(9)], EARLIEST_TIMESTAMP).is_err());
    f.seek_to(&[tp(0)], EARLIEST_TIMESTAMP).unwrap();
    f.seek_to(&[tp(1)], LATEST_TIMESTAMP).unwrap();
    assert_eq!(f.position(&tp(0)), None, "looked up first");
    // The answer to a fetch from before the seek is dropped.
    f.apply_fetch(
        BROKER,
        answer(0, ErrorCode::NONE, Some(batch(7, 2))),
        fetched,
    );
    assert!(f.take_records(&[tp(0)], usize::MAX).is_none());
    let listing = f.awaiting_reset(&HashSet::new());
    assert_eq!(partitions(listing.clone()), vec![tp(0), tp(1)]);
    let request = f.reset_request(&listing);
    let timestamps: Vec<i64> = request.topics[0]
        .partitions
        .iter()
        .map(|p| p.timestamp)
        .collect();
    assert_eq!(timestamps, vec![EARLIEST_TIMESTAMP, LATEST_TIMESTAMP]);
}

#[test]
fn without_a_group_partitions_start_from_auto_offset_reset() {
    let mut f = fetcher(OffsetReset::Earliest);
    assert!(f.assigned(&[tp(0)], false).errors.is_empty());
    assert!(
        f.awaiting_committed(&[tp(0)]).is_empty(),
        "no group: nothing to look up"
    );
    assert_eq!(partitions(f.awaiting_reset(&HashSet::new())), vec![tp(0)]);
    let mut none = fetcher(OffsetReset::None);
    assert_eq!(none.assigned(&[tp(0)], false).errors.len(), 1);
    assert!(none.awaiting_reset(&HashSet::new()).is_empty());
}

/// A ListOffsets answer for partition 0 at `offset`.
fn listed(offset: i64, code: ErrorCode) -> ListOffsetsResponse {
    use crate::protocol::messages::list_offsets::{
        ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
    };
    ListOffsetsResponse {
        topics: vec![ListOffsetsTopicResponse {
            name: "t".into(),
            partitions: vec![ListOffsetsPartitionResponse {
                partition_index: 0,
                error_code: code.0,
                offset,
                ..ListOffsetsPartitionResponse::default()
            }],
        }],
        ..ListOffsetsResponse::default()
    }
}

#[test]
fn seek_to_end_then_to_beginning_counts_though_its_answer_comes_first() {
    let mut f = fetcher(OffsetReset::Earliest);
    f.assigned(&[tp(0)], false);
    f.apply_listed(
        listed(0, ErrorCode::NONE),
        &f.awaiting_reset(&HashSet::new()),
    );
    f.seek_to(&[tp(0)], LATEST_TIMESTAMP).unwrap();
    let to_end = f.awaiting_reset(&HashSet::new());
    f.seek_to(&[tp(0)], EARLIEST_TIMESTAMP).unwrap();
    // The second lookup goes at once, beside the first still in flight.
    let in_flight: HashSet<u64> = to_end.iter().map(|a| a.token).collect();
    let to_beginning = f.awaiting_reset(&in_flight);
    assert_eq!(partitions(to_beginning.clone()), vec![tp(0)]);
    assert_ne!(to_beginning[0].token, to_end[0].token);
    assert_eq!(
        f.reset_request(&to_beginning).topics[0].partitions[0].timestamp,
        EARLIEST_TIMESTAMP
    );
    f.apply_listed(listed(0, ErrorCode::NONE), &to_beginning);
    // The answer to seek_to_end arrives last: stale, it moves nothing.
    let followup = f.apply_listed(listed(1_000, ErrorCode::NONE), &to_end);
    assert!(!followup.retry && followup.errors.is_empty());
    assert_eq!(f.position(&tp(0)), Some(0));
    assert_eq!(f.to_fetch(&[tp(0)])[0].2, 0);
}

/// A lookup answered without error but without an offset (-1: none known yet, as for a
/// timestamp past the last record) sets no position; it is asked again.
#[test]
fn a_listed_answer_without_an_offset_is_asked_again() {
    let mut f = fetcher(OffsetReset::Earliest);
    f.assigned(&[tp(0)], false);
    let asked = f.awaiting_reset(&HashSet::new());
    let followup = f.apply_listed(listed(-1, ErrorCode::NONE), &asked);
    assert!(followup.retry && followup.errors.is_empty());
    assert_eq!(f.position(&tp(0)), None);
    assert_eq!(partitions(f.awaiting_reset(&HashSet::new())), vec![tp(0)]);
}

#[test]
fn seek_to_beginning_then_to_end_counts_though_its_answer_comes_last() {
    let mut f = fetcher(OffsetReset::Earliest);
    f.assigned(&[tp(0)], false);
    f.seek_to(&[tp(0)], EARLIEST_TIMESTAMP).unwrap();
    let to_beginning = f.awaiting_reset(&HashSet::new());
    f.seek_to(&[tp(0)], LATEST_TIMESTAMP).unwrap();
    let to_end = f.awaiting_reset(&HashSet::new());
    // The first answer, to the older seek, arrives first: stale, the position waits.
    f.apply_listed(listed(0, ErrorCode::NONE), &to_beginning);
    assert_eq!(f.position(&tp(0)), None);
    assert!(f.to_fetch(&[tp(0)]).is_empty());
    f.apply_listed(listed(1_000, ErrorCode::NONE), &to_end);
    assert_eq!(f.position(&tp(0)), Some(1_000));
    // A fetch answer from before the seeks changes nothing either.
    assert_eq!(f.to_fetch(&[tp(0)])[0].2, 1_000);
}

#[test]
fn a_committed_offset_looked_up_for_an_earlier_assignment_is_stale() {
    let mut f = fetcher(OffsetReset::Earliest);
    f.assigned(&[tp(0)], true);
    let first = f.awaiting_committed(&[tp(0)]);
    // Lost and assigned again while the lookup flies (another member may have committed).
    f.retain(&HashSet::new());
    f.assigned(&[tp(0)], true);
    let old = Ok(Some(Committed {
        offset: 3,
        leader_epoch: None,
    }));
    f.apply_committed(vec![(first[0].clone(), old)]);
    assert_eq!(f.position(&tp(0)), None, "the old answer is not applied");
    let second = f.awaiting_committed(&[tp(0)]);
    assert_ne!(second[0].token, first[0].token);
    let new = Ok(Some(Committed {
        offset: 9,
        leader_epoch: None,
    }));
    f.apply_committed(vec![(second[0].clone(), new)]);
    assert_eq!(f.position(&tp(0)), Some(9));
    // And a seek while a lookup flies wins over its answer.
    f.assigned(&[tp(1)], true);
    let asked = f.awaiting_committed(&[tp(1)]);
    f.seek(&tp(1), 4).unwrap();
    f.apply_committed(vec![(asked[0].clone(), Ok(None))]);
    assert_eq!(f.position(&tp(1)), Some(4));
}

#[test]
fn errors_no_retry_can_fix_name_the_partition_and_retriable_ones_stay_quiet() {
    let mut f = fetcher(OffsetReset::Earliest);
    f.assigned(&[tp(0)], true);
    answer_committed(&mut f, vec![(tp(0), Some(5))]);
    let all = [tp(0)];
    let fetched = f.to_fetch(&all);
    let followup = f.apply_fetch(
        BROKER,
        answer(0, ErrorCode::TOPIC_AUTHORIZATION_FAILED, None),
        fetched.clone(),
    );
    assert!(followup.retry && !followup.refresh_metadata);
    let texts: Vec<String> = followup.errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        texts,
        vec!["Fetch of t-0 refused: TOPIC_AUTHORIZATION_FAILED (29)"]
    );
    assert_eq!(
        f.to_fetch(&all),
        fetched,
        "asked again from the same offset"
    );
    let followup = f.apply_fetch(
        BROKER,
        answer(0, ErrorCode::UNKNOWN_LEADER_EPOCH, None),
        fetched,
    );
    assert!(followup.retry && followup.errors.is_empty());
    // ListOffsets and OffsetFetch the same way.
    f.seek_to(&all, LATEST_TIMESTAMP).unwrap();
    let asked = f.awaiting_reset(&HashSet::new());
    let followup = f.apply_listed(listed(-1, ErrorCode::TOPIC_AUTHORIZATION_FAILED), &asked);
    assert!(followup.retry);
    assert!(matches!(
        &followup.errors[..],
        [Error::TopicRefused {
            api: "ListOffsets",
            partition: Some(0),
            ..
        }]
    ));
    let followup = f.apply_listed(listed(-1, ErrorCode::NOT_LEADER_OR_FOLLOWER), &asked);
    assert!(followup.retry && followup.refresh_metadata && followup.errors.is_empty());
    assert_eq!(partitions(f.awaiting_reset(&HashSet::new())), vec![tp(0)]);
    f.assigned(&[tp(1)], true);
    let asked = f.awaiting_committed(&[tp(1)]);
    let followup = f.apply_committed(vec![(
        asked[0].clone(),
        Err(ErrorCode::TOPIC_AUTHORIZATION_FAILED),
    )]);
    assert!(matches!(
        &followup.errors[..],
        [Error::TopicRefused {
            api: "OffsetFetch",
            ..
        }]
    ));
    let followup = f.apply_committed(vec![(
        asked[0].clone(),
        Err(ErrorCode::UNSTABLE_OFFSET_COMMIT),
    )]);
    assert!(followup.retry && followup.errors.is_empty());
    assert_eq!(partitions(f.awaiting_committed(&[tp(1)])), vec![tp(1)]);
}

#[test]
fn out_of_range_under_reset_none_names_the_partition_and_the_offsets() {
    let mut f = fetcher(OffsetReset::None);
    f.assigned(&[tp(0)], true);
    answer_committed(&mut f, vec![(tp(0), Some(50))]);
    let fetched = f.to_fetch(&[tp(0)]);
    let mut response = answer(0, ErrorCode::OFFSET_OUT_OF_RANGE, None);
    response.responses[0].partitions[0].log_start_offset = 60;
    response.responses[0].partitions[0].high_watermark = 90;
    let followup = f.apply_fetch(BROKER, response, fetched);
    match &followup.errors[..] {
        [
            Error::OffsetOutOfRange {
                partition,
                offset: 50,
                log_start_offset: Some(60),
                high_watermark: Some(90),
            },
        ] => assert_eq!(*partition, tp(0)),
        other => panic!("{other:?}"),
    }
    assert_eq!(f.position(&tp(0)), None, "waits for a seek");
    assert!(f.to_fetch(&[tp(0)]).is_empty());
}

/// A batch of `n` records at `base`, appended under leader epoch `epoch`.
fn batch_in_epoch(base: i64, n: usize, epoch: i32) -> Bytes {
    let mut bytes = BytesMut::from(&batch(base, n)[..]);
    // PartitionLeaderEpoch follows the base offset and length, outside the CRC.
    bytes[12..16].copy_from_slice(&epoch.to_be_bytes());
    bytes.freeze()
}

/// An OffsetForLeaderEpoch answer for partition 0: `epoch` ends at `end_offset`.
fn epoch_end(code: ErrorCode, epoch: i32, end_offset: i64) -> OffsetForLeaderEpochResponse {
    use crate::protocol::messages::offset_for_leader_epoch::{
        EpochEndOffset, OffsetForLeaderTopicResult,
    };
    OffsetForLeaderEpochResponse {
        throttle_time_ms: 0,
        topics: vec![OffsetForLeaderTopicResult {
            topic: "t".into(),
            partitions: vec![EpochEndOffset {
                error_code: code.0,
                partition: 0,
                leader_epoch: epoch,
                end_offset,
            }],
        }],
    }
}

#[test]
fn a_leader_change_validates_the_position_before_it_is_fetched_from() {
    let mut f = fetcher(OffsetReset::Earliest);
    f.assigned(&[tp(0)], false);
    f.leader_epochs(|_| Some(3));
    f.apply_listed(
        listed(0, ErrorCode::NONE),
        &f.awaiting_reset(&HashSet::new()),
    );
    let fetched = f.to_fetch(&[tp(0)]);
    f.apply_fetch(
        BROKER,
        answer(0, ErrorCode::NONE, Some(batch_in_epoch(0, 5, 3))),
        fetched,
    );
    let taken = f.take_records(&[tp(0)], 2).unwrap();
    assert_eq!(
        taken[0].leader_epoch,
        Some(3),
        "records carry their batch's epoch"
    );
    let ahead = f.to_fetch(&[tp(0)]);
    assert_eq!(f.positions().next().unwrap().1.leader_epoch, Some(3));
    // The leader moves: what is held is dropped, the fetch ahead is stale, and nothing
    // is fetched until the position is validated.
    f.leader_epochs(|_| Some(4));
    assert_eq!(f.position(&tp(0)), Some(2));
    assert!(f.to_fetch(&[tp(0)]).is_empty());
    f.apply_fetch(
        BROKER,
        answer(0, ErrorCode::NONE, Some(batch_in_epoch(5, 2, 3))),
        ahead,
    );
    assert!(f.take_records(&[tp(0)], 10).is_none());
    let asked = f.awaiting_validation(&HashSet::new());
    let request = f.validation_request(&asked);
    let p = &request.topics[0].partitions[0];
    assert_eq!(
        (p.current_leader_epoch, p.leader_epoch, request.replica_id.0),
        (4, 3, -1)
    );
    // The same leader epoch again asks nothing more.
    f.leader_epochs(|_| Some(4));
    assert_eq!(f.awaiting_validation(&HashSet::new()), asked);
    // Epoch 3 ends past the position: nothing was truncated; fetched on from it.
    let followup = f.apply_validated(epoch_end(ErrorCode::NONE, 3, 5), &asked);
    assert!(followup.errors.is_empty() && !followup.retry);
    let fetched = f.to_fetch(&[tp(0)]);
    assert_eq!(fetched[0].2, 2);
    assert_eq!(
        f.fetch_request(BROKER, &fetched).topics[0].partitions[0].current_leader_epoch,
        4
    );
}

/// A fetcher under `reset` whose partition 0 read records 0..5 (epoch 3), delivered 0..4
/// (position 4), and then saw its leader move to epoch 4: the validation asked for.
fn validating_after_a_leader_change(reset: OffsetReset) -> (Fetcher, Vec<Asked>) {
    let mut f = fetcher(reset);
    f.assigned(&[tp(0)], false);
    f.leader_epochs(|_| Some(3));
    f.seek(&tp(0), 0).unwrap();
    let fetched = f.to_fetch(&[tp(0)]);
    f.apply_fetch(
        BROKER,
        answer(0, ErrorCode::NONE, Some(batch_in_epoch(0, 5, 3))),
        fetched,
    );
    f.take_records(&[tp(0)], 2).unwrap();
    f.take_records(&[tp(0)], 2).unwrap();
    f.leader_epochs(|_| Some(4));
    let asked = f.awaiting_validation(&HashSet::new());
    assert_eq!(partitions(asked.clone()), vec![tp(0)]);
    (f, asked)
}

#[test]
fn a_log_truncated_under_the_position_is_reported_and_never_read_past() {
    // auto.offset.reset=none: reported with the offsets, and nothing read until a seek.
    let (mut f, asked) = validating_after_a_leader_change(OffsetReset::None);
    let followup = f.apply_validated(epoch_end(ErrorCode::NONE, 3, 2), &asked);
    match &followup.errors[..] {
        [
            Error::LogTruncation {
                partition,
                offset: 4,
                divergent_offset: Some(2),
                reset: false,
            },
        ] => assert_eq!(*partition, tp(0)),
        other => panic!("{other:?}"),
    }
    assert_eq!(f.position(&tp(0)), None);
    assert!(f.to_fetch(&[tp(0)]).is_empty());
    // earliest / latest: read on from where the logs diverge, as Java does, and say so.
    for reset in [OffsetReset::Earliest, OffsetReset::Latest] {
        let (mut f, asked) = validating_after_a_leader_change(reset);
        let followup = f.apply_validated(epoch_end(ErrorCode::NONE, 3, 2), &asked);
        assert!(matches!(
            &followup.errors[..],
            [Error::LogTruncation {
                offset: 4,
                divergent_offset: Some(2),
                reset: true,
                ..
            }]
        ));
        assert_eq!(f.to_fetch(&[tp(0)])[0].2, 2, "{reset:?}");
        assert_eq!(f.positions().next().unwrap().1.leader_epoch, Some(3));
    }
    // The leader knows no epoch that old: reset per auto.offset.reset.
    let (mut f, asked) = validating_after_a_leader_change(OffsetReset::Earliest);
    let followup = f.apply_validated(epoch_end(ErrorCode::NONE, -1, -1), &asked);
    assert!(matches!(
        &followup.errors[..],
        [Error::LogTruncation {
            divergent_offset: None,
            reset: true,
            ..
        }]
    ));
    let listing = f.awaiting_reset(&HashSet::new());
    assert_eq!(
        f.reset_request(&listing).topics[0].partitions[0].timestamp,
        EARLIEST_TIMESTAMP
    );
}

/// Either half of the answer undefined (UNDEFINED_EPOCH or UNDEFINED_EPOCH_OFFSET, -1) means
/// the leader knows no such epoch, as the Java consumer reads it: reset per
/// auto.offset.reset, never a divergence at the other half's value.
#[test]
fn a_half_undefined_epoch_end_is_no_epoch_known() {
    for (epoch, end_offset) in [(-1, 2), (3, -1)] {
        let (mut f, asked) = validating_after_a_leader_change(OffsetReset::Earliest);
        let followup = f.apply_validated(epoch_end(ErrorCode::NONE, epoch, end_offset), &asked);
        assert!(
            matches!(
                &followup.errors[..],
                [Error::LogTruncation {
                    divergent_offset: None,
                    reset: true,
                    ..
                }]
            ),
            "({epoch}, {end_offset}): {:?}",
            followup.errors
        );
        assert_eq!(partitions(f.awaiting_reset(&HashSet::new())), vec![tp(0)]);
    }
}

#[test]
fn validation_answers_that_are_stale_or_failed_move_nothing() {
    let (mut f, asked) = validating_after_a_leader_change(OffsetReset::None);
    // A stale leader: refresh, ask again.
    let followup = f.apply_validated(epoch_end(ErrorCode::FENCED_LEADER_EPOCH, -1, -1), &asked);
    assert!(followup.retry && followup.refresh_metadata && followup.errors.is_empty());
    assert_eq!(f.awaiting_validation(&HashSet::new()), asked);
    // The leader moved again while the validation flew: its answer is stale.
    f.leader_epochs(|_| Some(5));
    let followup = f.apply_validated(epoch_end(ErrorCode::NONE, 3, 2), &asked);
    assert!(followup.errors.is_empty());
    assert_eq!(f.position(&tp(0)), Some(4));
    let again = f.awaiting_validation(&HashSet::new());
    assert_ne!(again, asked);
    assert_eq!(
        f.validation_request(&again).topics[0].partitions[0].current_leader_epoch,
        5
    );
    // A seek meanwhile wins: a sought position is not validated.
    f.seek(&tp(0), 1).unwrap();
    f.apply_validated(epoch_end(ErrorCode::NONE, 3, 0), &again);
    assert_eq!(f.to_fetch(&[tp(0)])[0].2, 1);
    // A leader that cannot validate leaves the position as it is.
    let (mut f, asked) = validating_after_a_leader_change(OffsetReset::None);
    f.validation_unsupported(&asked);
    assert_eq!(f.to_fetch(&[tp(0)])[0].2, 4);
    // A partition the leader left out of its answer is asked again after the back-off.
    let (mut f, asked) = validating_after_a_leader_change(OffsetReset::None);
    let mut empty = epoch_end(ErrorCode::NONE, 3, 9);
    empty.topics.clear();
    assert!(f.apply_validated(empty, &asked).retry);
}

#[test]
fn a_committed_offset_with_its_epoch_is_validated_before_it_is_read() {
    let committed = |offset, leader_epoch| {
        Ok(Some(Committed {
            offset,
            leader_epoch,
        }))
    };
    let mut f = fetcher(OffsetReset::None);
    f.assigned(&[tp(0), tp(1), tp(2)], true);
    f.leader_epochs(|tp| (tp.partition != 2).then_some(7));
    let asked = f.awaiting_committed(&[tp(0), tp(1), tp(2)]);
    f.apply_committed(vec![
        (asked[0].clone(), committed(10, Some(6))),
        (asked[1].clone(), committed(10, None)),
        (asked[2].clone(), committed(10, Some(6))),
    ]);
    let all = [tp(0), tp(1), tp(2)];
    // Without an epoch (an older committer): fetched from at once, as in Java.
    assert_eq!(
        partitions(f.awaiting_validation(&HashSet::new())),
        vec![tp(0)]
    );
    assert_eq!(f.to_fetch(&all)[0].0, tp(1));
    assert_eq!(f.to_fetch(&all).len(), 2);
    // Partition 2's leader epoch arrives: now it is validated too.
    f.leader_epochs(|_| Some(7));
    let asked = f.awaiting_validation(&HashSet::new());
    assert_eq!(partitions(asked.clone()), vec![tp(0), tp(2)]);
    assert_eq!(f.to_fetch(&all).len(), 1);
    let request = f.validation_request(&asked);
    let epochs: Vec<(i32, i32)> = request.topics[0]
        .partitions
        .iter()
        .map(|p| (p.current_leader_epoch, p.leader_epoch))
        .collect();
    assert_eq!(epochs, vec![(7, 6), (7, 6)]);
    let commits: Vec<(i64, Option<i32>)> = f
        .positions()
        .map(|(_, p)| (p.offset, p.leader_epoch))
        .collect();
    assert_eq!(commits, vec![(10, Some(6)), (10, None), (10, Some(6))]);
}

/// KIP-392: the leader's answer names a replica of the consumer's rack, which is fetched from
/// from then on; its errors (OFFSET_OUT_OF_RANGE there is no reason to reset), its silence and
/// fresh metadata each send the partition back to the leader, from the same offset.
#[test]
fn a_partition_is_read_from_the_replica_the_leader_names_until_it_fails() {
    const FOLLOWER: BrokerId = 3;
    let mut f = Fetcher::new(FetchConfig {
        reset: OffsetReset::Earliest,
        rack: "rack-3".into(),
        ..defaults()
    });
    let all = [tp(0)];
    f.assigned(&all, false);
    f.seek(&tp(0), 10).unwrap();
    let from_leader = |f: &Fetcher| fetch_to(&f.fetch_round(&all, leader), BROKER);
    let from_follower = |f: &Fetcher| fetch_to(&f.fetch_round(&all, leader), FOLLOWER);
    assert_eq!(from_leader(&f), Some(vec![(0, 10)]));
    let redirect = || {
        let mut response = answer(0, ErrorCode::NONE, None);
        response.responses[0].partitions[0].preferred_read_replica = FOLLOWER;
        response
    };
    let fetched = f.to_fetch(&all);
    assert_eq!(f.fetch_request(BROKER, &fetched).rack_id, "rack-3");
    let followup = f.apply_fetch(BROKER, redirect(), fetched);
    assert!(followup.errors.is_empty() && !followup.retry);
    assert_eq!(
        from_follower(&f),
        Some(vec![(0, 10)]),
        "the named replica next"
    );
    assert_eq!(from_leader(&f), None);

    // The replica reads like a leader.
    let fetched = f.to_fetch(&all);
    f.fetch_request(FOLLOWER, &fetched);
    f.apply_fetch(
        FOLLOWER,
        answer(0, ErrorCode::NONE, Some(batch(10, 2))),
        fetched,
    );
    assert_eq!(drain(&mut f, 10), vec![10, 11]);
    assert_eq!(from_follower(&f), Some(vec![(0, 12)]));

    // Out of range at a lagging replica: back to the leader, the position kept.
    let fetched = f.to_fetch(&all);
    f.fetch_request(FOLLOWER, &fetched);
    let followup = f.apply_fetch(
        FOLLOWER,
        answer(0, ErrorCode::OFFSET_OUT_OF_RANGE, None),
        fetched,
    );
    assert!(followup.errors.is_empty(), "{:?}", followup.errors);
    assert_eq!(f.position(&tp(0)), Some(12), "no reset");
    assert_eq!(from_leader(&f), Some(vec![(0, 12)]));

    // No answer from the replica, or fresh metadata: the leader again.
    for leave in [
        |f: &mut Fetcher| f.fetch_failed(FOLLOWER),
        |f: &mut Fetcher| f.metadata_refreshed(),
    ] {
        let fetched = f.to_fetch(&all);
        f.fetch_request(BROKER, &fetched);
        f.apply_fetch(BROKER, redirect(), fetched);
        assert_eq!(from_follower(&f), Some(vec![(0, 12)]));
        leave(&mut f);
        assert_eq!(from_leader(&f), Some(vec![(0, 12)]));
    }
}

/// What a poll marks processed (for auto-commit) is each partition's position when the poll
/// began: records handed out since are not processed until the next poll begins.
#[test]
fn a_poll_marks_the_positions_it_began_at_processed() {
    let mut f = fetcher_of(10);
    let all = four_with_backlog(&mut f, &[30, 0, 0, 0]);
    assert_eq!(f.processed().count(), 0, "nothing marked yet");
    f.take_records(&all, usize::MAX).unwrap();
    f.mark_processed();
    let processed = |f: &Fetcher| -> Vec<(i32, i64)> {
        f.processed()
            .map(|(tp, p)| (tp.partition, p.offset))
            .filter(|(p, _)| *p == 0)
            .collect()
    };
    assert_eq!(processed(&f), vec![(0, 10)]);
    f.take_records(&all, usize::MAX).unwrap();
    assert_eq!(
        processed(&f),
        vec![(0, 10)],
        "handed out, not yet processed"
    );
    f.mark_processed();
    assert_eq!(processed(&f), vec![(0, 20)]);
}

/// A partition whose answer still holds undecoded batches holds records, though the batch
/// decoded before was handed out to its last record: the next poll decodes the next batch.
#[test]
fn an_answer_read_to_a_batch_end_still_holds_records() {
    let mut f = fetcher_of(5);
    let all = [tp(0)];
    f.assigned(&all, true);
    answer_committed(&mut f, vec![(tp(0), Some(0))]);
    let fetched = f.to_fetch(&all);
    let two_batches = [batch(0, 5), batch(5, 5)].concat();
    let parts = [(0, Some(Bytes::from(two_batches)), 10)];
    f.apply_fetch(BROKER, answers(&parts), fetched);
    assert_eq!(f.take_records(&all, usize::MAX).unwrap().len(), 5);
    let next = f.take_records(&all, usize::MAX).expect("the second batch");
    assert_eq!(
        next.iter().map(|r| r.offset).collect::<Vec<_>>(),
        vec![5, 6, 7, 8, 9]
    );
}

/// Every change of position makes the answers to earlier requests stale for good: after a
/// seek to the offset in flight, and a corrupt batch in the seek's own answer that has the
/// partition fetched again from there, the answer to the request made before the seek is
/// still stale (its records are fetched again, under the newest request).
#[test]
fn an_answer_from_before_a_seek_stays_stale_after_a_refetch() {
    let mut f = fetcher(OffsetReset::Earliest);
    f.assigned(&[tp(0)], true);
    answer_committed(&mut f, vec![(tp(0), Some(0))]);
    let all = [tp(0)];
    let before_seek = f.to_fetch(&all);
    f.seek(&tp(0), 0).unwrap();
    let after_seek = f.to_fetch(&all);
    let mut corrupt = BytesMut::from(&batch(0, 2)[..]);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    let refused = f.apply_fetch(
        BROKER,
        answer(0, ErrorCode::NONE, Some(corrupt.freeze())),
        after_seek,
    );
    assert!(!refused.errors.is_empty(), "fetched again from 0");
    f.apply_fetch(
        BROKER,
        answer(0, ErrorCode::NONE, Some(batch(0, 5))),
        before_seek,
    );
    assert!(f.take_records(&all, usize::MAX).is_none());
    assert_eq!(f.position(&tp(0)), Some(0));
}

/// Under read_committed the readable end is the last stable offset, or the high watermark
/// when the broker gave none (-1: a Fetch version before KIP-98's field, or a partition it
/// could not compute it for); read_uncommitted reads to the high watermark.
#[test]
fn the_readable_end_falls_back_to_the_high_watermark_without_a_last_stable_offset() {
    use super::partition::readable_end;
    assert_eq!(readable_end(IsolationLevel::ReadCommitted, 10, 7), 7);
    assert_eq!(readable_end(IsolationLevel::ReadCommitted, 10, -1), 10);
    assert_eq!(readable_end(IsolationLevel::ReadUncommitted, 10, 7), 10);
}

/// The owned partitions are listed in partition order, whatever order they were assigned in:
/// the membership's `owns_all` walks them beside its own in one pass.
#[test]
fn the_owned_partitions_are_listed_in_order() {
    let mut f = fetcher(OffsetReset::Earliest);
    f.assigned(&[tp(3), tp(1), tp(2)], true);
    assert_eq!(
        f.partitions().cloned().collect::<Vec<_>>(),
        [tp(1), tp(2), tp(3)]
    );
    f.retain(&[tp(3), tp(1)].into_iter().collect());
    assert_eq!(f.partitions().cloned().collect::<Vec<_>>(), [tp(1), tp(3)]);
}
