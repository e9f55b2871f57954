//! Positions and fetching, sans-I/O: where each owned partition's next fetch starts, the
//! requests that find out (committed offset, `auto.offset.reset`) and that fetch, and what
//! their answers change. The driver sends the requests and feeds the answers back.
//!
//! Rules: a position moves only by the newest request (every request that may move one, a
//! Fetch, a ListOffsets for a reset or a `seek_to_*`, an OffsetFetch of the committed offset,
//! an OffsetForLeaderEpoch validation, carries the partition's token, and its answer is applied
//! only while the token is unchanged: a seek, a revocation, a reset or a new assignment since
//! makes it stale); a record is delivered once per position; an error never moves a position (a
//! new leader is asked from the same offset, so nothing is skipped or repeated), and one no
//! retry can fix is handed to the application naming what it concerns; after a leader change a
//! position is validated with the new leader before it is fetched from (KIP-320), and a log
//! truncated under it is reported, never read past or read again silently; memory is bounded
//! (a partition holds at most two answers: one being read, and one fetched ahead from where
//! the first ends, so the next answer is on its way while the application takes the records
//! of the last one; an answer is decoded a batch at a time as its records are taken, so at
//! most one batch per partition is held decoded: a revocation or a loss drops the rest
//! undecoded).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use tracing::debug;

use super::fetch_session::{FetchSessionCounts, FetchSessions, Fetched};
use super::records::{ConsumerRecord, PartitionReader};
use super::vocabulary::OffsetReset;
use crate::error::Error;
use crate::protocol::error_code::ErrorCode;
use crate::protocol::messages::fetch::{
    FetchPartition, FetchRequest, FetchResponse, FetchTopic, ForgottenTopic,
};
use crate::types::{BrokerId, IsolationLevel, TopicPartition};

/// ListOffsets timestamps: the log start, and the end (the LSO under read_committed).
pub(crate) const EARLIEST_TIMESTAMP: i64 = -2;
pub(crate) const LATEST_TIMESTAMP: i64 = -1;

mod lookups;
mod partition;

use lookups::current_leader_epoch;
use partition::{Offset, PartitionState, readable_end};

/// A position: the next offset to deliver, and the leader epoch of the log there when known
/// (what a commit of it carries, KIP-320).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// The next offset to deliver.
    pub offset: i64,
    /// The leader epoch of the last batch read before it (or of its committed offset).
    pub leader_epoch: Option<i32>,
}

/// A partition a request that may move its position was made for, and the token it was made
/// under: the answer applies only while the partition's token is the same.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Asked {
    /// The partition.
    pub partition: TopicPartition,
    /// Its token when the request was made.
    pub token: u64,
}

/// The answers a partition holds at most: one being read and one fetched ahead of it. More
/// would only add memory: one answer ahead already hides the round trip as long as the
/// application takes an answer's records more slowly than the broker sends them.
const MAX_ANSWERS_HELD: usize = 2;

/// The fewest records a partition gets in a poll whose even shares would be smaller (see
/// [`Fetcher::take_records`]): small beside a poll (`max.poll.records` is 500 by default),
/// large enough that per-run work is spread over many records.
const CROWDED_RUN: usize = 32;

/// The fetches [`Fetcher::fetch_round`] chose.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FetchRound {
    /// Per broker (in id order), the partitions to fetch from it.
    pub fetches: Vec<(BrokerId, Vec<Fetched>)>,
    /// Some partition to fetch has no known leader: the metadata is to be refreshed.
    pub leaderless: bool,
}

/// What an answer asks of the driver.
#[derive(Debug, Default)]
pub struct Followup {
    /// Refresh the metadata (a leader moved, a topic is unknown).
    pub refresh_metadata: bool,
    /// Back off before asking again.
    pub retry: bool,
    /// Errors for the user's next polls, one per partition concerned.
    pub errors: Vec<Error>,
}

impl Followup {
    /// A partition's answer was `code`, an error: asked again after the back-off (after a
    /// metadata refresh where the leader may have moved); one no retry can fix (Kafka's
    /// retriable flag for the code) is also reported, naming the partition and the request.
    fn partition_failed(&mut self, api: &'static str, tp: &TopicPartition, code: ErrorCode) {
        self.retry = true;
        if code.is_retriable() {
            self.refresh_metadata |= code.invalidates_metadata();
            debug!("{api} of {tp:?} answered {code}: again after the back-off");
        } else {
            self.errors.push(Error::TopicRefused {
                topic: tp.topic.to_string(),
                partition: Some(tp.partition),
                api,
                code,
            });
        }
    }
}

/// What the fetcher takes from the consumer's settings, built once from them by the consumer
/// state: the fetcher is a sans-I/O core and reads no configuration of its own (as Java's
/// `FetchConfig` is cut from its `ConsumerConfig`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchConfig {
    /// `isolation.level`: how far a partition can be read (the LSO under read_committed).
    pub isolation: IsolationLevel,
    /// `auto.offset.reset`: where a partition without a usable offset starts.
    pub reset: OffsetReset,
    /// `max.poll.records`: the most records one poll hands out.
    pub max_poll_records: usize,
    /// `fetch.max.wait.ms`: how long a broker may hold a Fetch for `min_bytes`.
    pub max_wait_ms: i32,
    /// `fetch.min.bytes`.
    pub min_bytes: i32,
    /// `fetch.max.bytes`: the most one Fetch answer holds.
    pub max_bytes: i32,
    /// `max.partition.fetch.bytes`: the most one partition's part of an answer holds.
    pub partition_max_bytes: i32,
    /// `request.timeout.ms`, the timeout ListOffsets requests carry.
    pub list_timeout_ms: i32,
    /// `client.rack` (empty: none). Sent in every Fetch (v11+), so a leader whose brokers run
    /// a rack-aware `replica.selector.class` names a replica in the same rack to fetch from
    /// (KIP-392): cross-zone traffic is what a cloud deployment pays for.
    pub rack: String,
}

/// One partition's position against the log's end, as of its latest fetch answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartitionLag {
    /// The consumer's position: the offset of the next record `poll` hands out.
    pub position: i64,
    /// The high watermark the latest fetch answer reported.
    pub high_watermark: i64,
    /// The last stable offset the latest fetch answer reported (-1 when the broker sent none).
    pub last_stable_offset: i64,
    /// `records-lag`: `high_watermark - position`, or `last_stable_offset - position` under
    /// `read_committed` (what such a consumer can still read), never below 0.
    pub lag: i64,
}

/// The positions of the owned partitions.
#[derive(Debug)]
pub struct Fetcher {
    config: FetchConfig,
    partitions: BTreeMap<TopicPartition, PartitionState>,
    /// Partitions made so far (each new one's tokens start from its count).
    incarnations: u64,
    /// A batch that failed to decode while records were taken, for the next `poll`.
    decode_error: Option<Error>,
    /// The incremental fetch session with each broker (KIP-227).
    sessions: FetchSessions,
    /// Where in the fetchable partitions the next [`Fetcher::take_records`] starts, so the
    /// rounding of each poll's shares favours a different partition each time.
    next_start: usize,
}

impl Fetcher {
    /// No partitions yet.
    pub fn new(config: FetchConfig) -> Self {
        Self {
            config,
            partitions: BTreeMap::new(),
            incarnations: 0,
            decode_error: None,
            sessions: FetchSessions::default(),
            next_start: 0,
        }
    }

    /// Newly owned partitions: with a group, their committed offsets are looked up first;
    /// without one (manual assignment, no `group.id`), `auto.offset.reset` applies at once
    /// (`none`: an error until the application seeks).
    pub fn assigned(&mut self, partitions: &[TopicPartition], has_group: bool) -> Followup {
        let mut followup = Followup::default();
        for tp in partitions {
            if self.partitions.contains_key(tp) {
                continue;
            }
            let start = if has_group {
                Offset::Committed
            } else {
                let reset = self.reset_offset();
                if reset == Offset::Missing {
                    followup.errors.push(no_offset_error(tp, "no group.id"));
                }
                reset
            };
            self.incarnations += 1;
            self.partitions
                .insert(tp.clone(), PartitionState::new(start, self.incarnations));
        }
        followup
    }

    /// `what` (a call on `partitions`) refused unless every one of them is owned.
    fn check_owned(&self, partitions: &[TopicPartition], what: &str) -> Result<(), Error> {
        match partitions
            .iter()
            .find(|tp| !self.partitions.contains_key(*tp))
        {
            Some(tp) => Err(not_assigned(what, tp)),
            None => Ok(()),
        }
    }

    /// Where `auto.offset.reset` starts a partition without a usable offset.
    fn reset_offset(&self) -> Offset {
        match self.config.reset {
            OffsetReset::Earliest => Offset::List(EARLIEST_TIMESTAMP),
            OffsetReset::Latest => Offset::List(LATEST_TIMESTAMP),
            OffsetReset::None => Offset::Missing,
        }
    }

    /// Pauses (`true`) or resumes `partitions`: a paused partition is neither fetched nor
    /// delivered, and its position does not move; what it has buffered is delivered after it
    /// resumes. The pause lasts as long as the partition is owned. Every partition must be
    /// owned (else nothing changes).
    pub fn set_paused(&mut self, partitions: &[TopicPartition], paused: bool) -> Result<(), Error> {
        self.check_owned(partitions, if paused { "pause" } else { "resume" })?;
        for tp in partitions {
            if let Some(state) = self.partitions.get_mut(tp) {
                state.paused = paused;
            }
        }
        Ok(())
    }

    /// The paused partitions.
    pub fn paused(&self) -> Vec<TopicPartition> {
        self.partitions
            .iter()
            .filter(|(_, s)| s.paused)
            .map(|(tp, _)| tp.clone())
            .collect()
    }

    /// Moves `partitions` to the log start ([`EARLIEST_TIMESTAMP`]) or end
    /// ([`LATEST_TIMESTAMP`], the last stable offset under read_committed), looked up at the
    /// next turn of the background task. Every partition must be owned (else nothing moves).
    pub fn seek_to(&mut self, partitions: &[TopicPartition], timestamp: i64) -> Result<(), Error> {
        self.check_owned(partitions, "seek")?;
        for tp in partitions {
            if let Some(state) = self.partitions.get_mut(tp) {
                state.set(Offset::List(timestamp), None);
            }
        }
        Ok(())
    }

    /// Every owned partition's position, where known, with its leader epoch.
    pub fn positions(&self) -> impl Iterator<Item = (&TopicPartition, Position)> {
        self.partitions
            .iter()
            .filter_map(|(tp, s)| Some((tp, s.located()?)))
    }

    /// A `poll` begins: each partition's position now is what the application has processed
    /// (the polls before this one handed it out). Kept in each partition's state, so a poll
    /// copies no partition's name and hashes nothing, however many partitions there are.
    pub fn mark_processed(&mut self) {
        for state in self.partitions.values_mut() {
            state.processed = state.located();
        }
    }

    /// The positions [`Fetcher::mark_processed`] marked, of the partitions still held.
    pub fn processed(&self) -> impl Iterator<Item = (&TopicPartition, Position)> {
        self.partitions
            .iter()
            .filter_map(|(tp, s)| Some((tp, s.processed?)))
    }

    /// Fresh metadata: each partition's leader is asked again which replica to read (KIP-392;
    /// the Java consumer lets its choice expire after `metadata.max.age.ms`, the interval
    /// metadata is refreshed at), so a replica that moved or fell behind is not kept.
    pub fn metadata_refreshed(&mut self) {
        for state in self.partitions.values_mut() {
            state.read_replica = None;
        }
    }

    /// The leader epochs the metadata gives (`epoch_of`, `None` where it gives none): a
    /// partition whose leader epoch moved has its position validated with the new leader
    /// before it is fetched from again (KIP-320; the Java consumer's
    /// `maybeValidatePositionForCurrentLeader`).
    pub fn leader_epochs(&mut self, epoch_of: impl Fn(&TopicPartition) -> Option<i32>) {
        for (tp, state) in &mut self.partitions {
            if let Some(epoch) = epoch_of(tp)
                && state.leader_epoch != Some(epoch)
            {
                state.leader_moved(epoch);
            }
        }
    }

    /// Revoked partitions stay owned until the next poll, but nothing more is delivered for
    /// them: what is buffered is dropped and the position is the first record not delivered.
    pub fn revoked(&mut self, partitions: &[TopicPartition]) {
        for tp in partitions {
            if let Some(state) = self.partitions.get_mut(tp)
                && let Some(position) = state.located()
            {
                state.set(Offset::Ready(position.offset), position.leader_epoch);
            }
        }
    }

    /// Keeps only the partitions in `owned`.
    pub fn retain(&mut self, owned: &HashSet<TopicPartition>) {
        self.partitions.retain(|tp, _| owned.contains(tp));
    }

    /// The owned partitions.
    pub fn partitions(&self) -> impl Iterator<Item = &TopicPartition> {
        self.partitions.keys()
    }

    /// The next offset to deliver.
    pub fn position(&self, partition: &TopicPartition) -> Option<i64> {
        self.partitions.get(partition)?.position()
    }

    /// Delivers from `offset` on.
    pub fn seek(&mut self, partition: &TopicPartition, offset: i64) -> Result<(), Error> {
        let state = self
            .partitions
            .get_mut(partition)
            .ok_or_else(|| not_assigned("seek", partition))?;
        if offset < 0 {
            return Err(Error::InvalidState(format!(
                "seek: negative offset {offset}"
            )));
        }
        state.set(Offset::Ready(offset), None);
        Ok(())
    }

    /// Up to `limit` (at most `max.poll.records`) buffered records of the `fetchable`
    /// partitions that are not paused, decoding further batches of their answers as it goes.
    ///
    /// Every partition holding records gets its share of the poll: the room is split evenly
    /// among them (what one cannot fill goes to those after it), starting one partition
    /// further each poll, and room still left after that round goes to whoever has more. So
    /// under a backlog the partitions drain together and their lags stay even; filling each
    /// poll from the first partition with records, as the Java consumer does (KAFKA-3932,
    /// KIP-387), drains them one after another while fetch-ahead keeps the first one full. A
    /// partition's records stay in offset order; it appears in at most two runs of a poll.
    ///
    /// When the shares would be shorter than [`CROWDED_RUN`] records (a thousand partitions
    /// behind, 500 records a poll), each partition served gets a run of up to that many
    /// instead, and the next poll starts after the last one served: the
    /// partitions take turns a run at a time, so their progress stays within a run of each
    /// other, and the poll pays its per-partition work (a look-up, a metrics update) once per
    /// run rather than once per record.
    pub fn take_records(
        &mut self,
        fetchable: &[TopicPartition],
        limit: usize,
    ) -> Option<Vec<ConsumerRecord>> {
        let limit = limit.min(self.config.max_poll_records);
        if fetchable.is_empty() || limit == 0 {
            return None;
        }
        let start = self.next_start % fetchable.len();
        self.next_start = start + 1;
        // Those holding records, found in one walk; the rounds below visit only them, from
        // the `start`-th fetchable partition on, then from the first.
        let mut holders: Vec<(usize, &TopicPartition)> = self
            .fetchable_states(fetchable)
            .filter(|(_, _, s)| !s.paused && s.holds_records())
            .map(|(i, tp, _)| (i, tp))
            .collect();
        let first = holders.partition_point(|(i, _)| *i < start);
        holders.rotate_left(first);
        let mut sharing = holders.len();
        if sharing == 0 {
            return None;
        }
        let crowded = limit.div_ceil(sharing) < CROWDED_RUN;
        let mut out = Vec::with_capacity(limit);
        // The even round, then one without shares for the room left.
        for even in [true, false] {
            for &(index, tp) in &holders {
                let room = limit - out.len();
                if room == 0 {
                    break;
                }
                // A partition the even round drained is visited again by the second one and
                // takes nothing there (`take_into` stops at an empty buffer without answers).
                let Some(state) = self.partitions.get_mut(tp) else {
                    continue;
                };
                let want = if crowded {
                    if even {
                        self.next_start = index + 1;
                    }
                    room.min(CROWDED_RUN)
                } else if even {
                    let share = room.div_ceil(sharing);
                    sharing -= 1;
                    share
                } else {
                    room
                };
                if let Err(e) = state.take_into(&mut out, want) {
                    self.decode_error = Some(e);
                }
            }
            if out.len() >= limit {
                break;
            }
        }
        (!out.is_empty()).then_some(out)
    }

    /// A batch that failed to decode in [`Fetcher::take_records`] (the partition is fetched
    /// again from it).
    pub fn take_decode_error(&mut self) -> Option<Error> {
        self.decode_error.take()
    }

    /// The states of the `fetchable` partitions this fetcher holds, in `fetchable`'s order.
    /// The membership hands `fetchable` sorted (a map's keys), so it and the partitions are
    /// walked side by side, without a look-up per partition: rounds and polls run at every
    /// turn, over thousands of partitions. An unsorted slice (a manual assignment in the
    /// user's order) is looked up partition by partition.
    fn fetchable_states<'s: 'b, 'f: 'b, 'b>(
        &'s self,
        fetchable: &'f [TopicPartition],
    ) -> Box<dyn Iterator<Item = (usize, &'f TopicPartition, &'s PartitionState)> + 'b> {
        let listed = fetchable.iter().enumerate();
        if !fetchable.is_sorted() {
            return Box::new(listed.filter_map(|(i, tp)| Some((i, tp, self.partitions.get(tp)?))));
        }
        let mut held = self.partitions.iter().peekable();
        Box::new(listed.filter_map(move |(i, tp)| {
            while held.next_if(|(key, _)| *key < tp).is_some() {}
            held.next_if(|(key, _)| *key == tp)
                .map(|(_, state)| (i, tp, state))
        }))
    }

    /// The `fetchable` partitions to fetch now: positioned, not paused, and holding fewer
    /// than [`MAX_ANSWERS_HELD`] answers (a partition whose answer is being read is fetched
    /// ahead from where that answer ends). What [`Fetcher::fetch_round`] chooses from; the
    /// tests read it.
    #[cfg(test)]
    pub fn to_fetch(&self, fetchable: &[TopicPartition]) -> Vec<Fetched> {
        self.fetchable_states(fetchable)
            .filter_map(|(_, tp, state)| Some((tp.clone(), state.token, state.fetch_offset()?)))
            .collect()
    }

    /// The fetches to send now, one per broker: [`Fetcher::to_fetch`] of `fetchable`, by
    /// `leader` (a partition without a known leader is left out, and the round says so).
    ///
    /// A fetch whose every partition is caught up (at the end the latest answer reported) is
    /// held back while another `fetchable`, unpaused partition of the same broker still holds
    /// records to deliver. The broker would keep such a fetch for `fetch.max.wait.ms` waiting
    /// for new data, and one fetch per broker is in flight (one incremental session, one epoch
    /// sequence: KIP-227), so the partitions being read could not be fetched ahead again until
    /// it returned: a copy with half its partitions at their end ran at a third of its rate.
    /// Held back, the caught-up partitions go in the next fetch the partitions with data make,
    /// which the broker answers at once, so new data on them is read within about one fetch
    /// round trip of the others; when nothing is held, the fetch goes and waits at the broker as
    /// a long poll should. Nothing is sent instead (no short-wait fetch loop), sessions stay as
    /// they are, and the answers held per partition stay at two. The Java consumer goes further
    /// and sends no fetch to a broker while any of its partitions has buffered data
    /// (KAFKA-17182), and franz-go fetches again from a broker only once its buffered fetch was
    /// taken; both give up the fetch ahead that keeps a steady read from waiting a round trip.
    ///
    /// A round that sends nothing (the usual turn of a consumer whose answers are all being
    /// read) allocates nothing: the fetches are listed only for the brokers that get one.
    pub fn fetch_round(
        &self,
        fetchable: &[TopicPartition],
        leader: impl Fn(&TopicPartition) -> Option<BrokerId>,
    ) -> FetchRound {
        /// What a round found of one broker's partitions.
        #[derive(Default)]
        struct BrokerRound {
            /// Some partition may be fetched from it.
            candidates: bool,
            /// Some candidate is not at the end the latest answer reported.
            behind: bool,
            /// Some partition's records from it are being read.
            reading: bool,
        }
        let mut round = FetchRound::default();
        let mut brokers: BTreeMap<BrokerId, BrokerRound> = BTreeMap::new();
        let source =
            |tp: &TopicPartition, state: &PartitionState| state.read_replica.or_else(|| leader(tp));
        for (_, tp, state) in self.fetchable_states(fetchable) {
            let reading = !state.paused && state.holds_records();
            let offset = state.fetch_offset();
            if !reading && offset.is_none() {
                continue;
            }
            let Some(broker) = source(tp, state) else {
                round.leaderless |= offset.is_some();
                continue;
            };
            let found = brokers.entry(broker).or_default();
            found.reading |= reading;
            if let Some(offset) = offset {
                found.candidates = true;
                found.behind |= !state.caught_up_at(offset, self.config.isolation);
            }
        }
        let sending: Vec<BrokerId> = brokers
            .into_iter()
            .filter(|(_, b)| b.candidates && (b.behind || !b.reading))
            .map(|(broker, _)| broker)
            .collect();
        if sending.is_empty() {
            return round;
        }
        let mut fetches: BTreeMap<BrokerId, Vec<Fetched>> =
            sending.into_iter().map(|b| (b, Vec::new())).collect();
        for (_, tp, state) in self.fetchable_states(fetchable) {
            if let (Some(offset), Some(broker)) = (state.fetch_offset(), source(tp, state))
                && let Some(fetched) = fetches.get_mut(&broker)
            {
                fetched.push((tp.clone(), state.token, offset));
            }
        }
        round.fetches = fetches.into_iter().collect();
        round
    }

    /// The Fetch request for `fetched` (all led by `broker`), in the fetch session with
    /// `broker` (KIP-227): a full fetch that opens one, or an incremental one that names only
    /// the partitions that joined or moved and forgets those no longer fetched. Its answer
    /// goes to [`Fetcher::apply_fetch`], or [`Fetcher::fetch_failed`] if none came.
    pub fn fetch_request(&mut self, broker: BrokerId, fetched: &[Fetched]) -> FetchRequest {
        let partitions = &self.partitions;
        let session = self
            .sessions
            .next_fetch(broker, fetched, |tp| current_leader_epoch(partitions, tp));
        let mut topics: BTreeMap<&str, Vec<FetchPartition>> = BTreeMap::new();
        for (tp, _, offset) in session.named.iter().filter_map(|&i| fetched.get(i)) {
            topics.entry(&tp.topic).or_default().push(FetchPartition {
                partition: tp.partition,
                // KIP-320: a leader behind this epoch answers UNKNOWN_LEADER_EPOCH, one past
                // it FENCED_LEADER_EPOCH (our metadata is stale), instead of records.
                current_leader_epoch: current_leader_epoch(&self.partitions, tp),
                fetch_offset: *offset,
                partition_max_bytes: self.config.partition_max_bytes,
                // The rest is the schema's default: no last fetched epoch, and log start
                // offset -1, which is what a consumer sends (only followers send theirs,
                // KIP-107).
                ..FetchPartition::default()
            });
        }
        let mut forgotten: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for tp in &session.forgotten {
            forgotten
                .entry(tp.topic.to_string())
                .or_default()
                .push(tp.partition);
        }
        FetchRequest {
            max_wait_ms: self.config.max_wait_ms,
            min_bytes: self.config.min_bytes,
            max_bytes: self.config.max_bytes,
            isolation_level: self.config.isolation.wire(),
            rack_id: self.config.rack.clone(),
            session_id: session.session_id,
            session_epoch: session.epoch,
            forgotten_topics_data: forgotten
                .into_iter()
                .map(|(topic, partitions)| ForgottenTopic {
                    topic,
                    topic_id: [0; 16],
                    partitions,
                })
                .collect(),
            topics: topics
                .into_iter()
                .map(|(topic, partitions)| FetchTopic {
                    topic: topic.to_owned(),
                    topic_id: [0; 16],
                    partitions,
                })
                .collect(),
            ..FetchRequest::default()
        }
    }

    /// The lag of `tp` as of its latest fetch answer: the log's end (the last stable offset
    /// under `read_committed`, what such a reader can reach) minus the position.
    pub fn lag(&self, tp: &TopicPartition) -> Option<PartitionLag> {
        self.lag_of(self.partitions.get(tp)?)
    }

    /// [`Fetcher::lag`] of a partition's state.
    fn lag_of(&self, state: &PartitionState) -> Option<PartitionLag> {
        let (high_watermark, last_stable_offset) = state.log_end?;
        let position = state.position()?;
        let end = readable_end(self.config.isolation, high_watermark, last_stable_offset);
        Some(PartitionLag {
            position,
            high_watermark,
            last_stable_offset,
            lag: (end - position).max(0),
        })
    }

    /// Whether this consumer has read all it can for now: it owns partitions, and each one it
    /// reads (not paused) holds no records and sits at the end of its log as its latest fetch
    /// answer gave it (the last stable offset under `read_committed`).
    pub fn caught_up(&self) -> bool {
        !self.partitions.is_empty()
            && self.partitions.values().filter(|s| !s.paused).all(|s| {
                !s.holds_records()
                    && s.position()
                        .is_some_and(|p| s.caught_up_at(p, self.config.isolation))
            })
    }

    /// The largest [`Fetcher::lag`] of the owned partitions (0 when none has one).
    pub fn max_lag(&self) -> i64 {
        self.partitions
            .values()
            .filter_map(|s| self.lag_of(s))
            .map(|l| l.lag)
            .max()
            .unwrap_or(0)
    }

    /// [`Fetcher::lag`] of every owned partition that has one.
    pub fn lags(&self) -> BTreeMap<TopicPartition, PartitionLag> {
        self.partitions
            .iter()
            .filter_map(|(tp, s)| Some((tp.clone(), self.lag_of(s)?)))
            .collect()
    }

    /// The fetch to `broker` for `fetched` got no answer: its session starts over.
    pub fn fetch_failed(&mut self, broker: BrokerId) {
        self.sessions.failed(broker);
        // A replica that did not answer is left for the leader (KIP-392's fallback).
        for state in self.partitions.values_mut() {
            if state.read_replica == Some(broker) {
                state.read_replica = None;
            }
        }
    }

    /// How the fetch sessions went, for the metrics.
    pub fn session_counts(&self) -> FetchSessionCounts {
        self.sessions.counts()
    }

    /// The answer from `broker` to a [`Fetcher::fetch_request`] for `fetched`. In an
    /// incremental session the broker leaves out the partitions with nothing new: they keep
    /// their positions and are fetched on.
    pub fn apply_fetch(
        &mut self,
        broker: BrokerId,
        response: FetchResponse,
        fetched: Vec<Fetched>,
    ) -> Followup {
        let mut followup = Followup::default();
        let top = ErrorCode(response.error_code);
        if !self.sessions.answered(broker, top, response.session_id) {
            // The session is gone or out of step: nothing in the answer; the next fetch, a
            // full one, opens a new session at once.
            debug!("fetch session with broker {broker} answered {top}: a full fetch next");
            return followup;
        }
        if !top.is_ok() {
            debug!("fetch answered {top}");
            followup.refresh_metadata = true;
            followup.retry = true;
            return followup;
        }
        let reset = self.reset_offset();
        let asked: HashMap<TopicPartition, (u64, i64)> = fetched
            .into_iter()
            .map(|(tp, token, offset)| (tp, (token, offset)))
            .collect();
        for topic in response.responses {
            let name: Arc<str> = Arc::from(topic.topic.as_str());
            for p in topic.partitions {
                let answered = TopicPartition::new(Arc::clone(&name), p.partition_index);
                // The asked key shares the owned partition's name, so the look-ups below
                // compare no names (see `TopicPartition`'s ordering).
                let Some((tp, &(token, offset))) = asked.get_key_value(&answered) else {
                    continue;
                };
                let tp = tp.clone();
                let Some(state) = self.partitions.get_mut(&tp) else {
                    continue;
                };
                // A seek, a revocation, a reset or a new leader since the request: its answer
                // is stale.
                if !state.answers(token) || state.offset != Offset::Ready(offset) {
                    continue;
                }
                let code = ErrorCode(p.error_code);
                if !code.is_ok() && state.read_replica == Some(broker) {
                    // Any error from the replica the leader named (it fell out of sync, was
                    // moved, or lags behind the position: OFFSET_OUT_OF_RANGE there is no
                    // reason to reset) sends the partition back to the leader, from the same
                    // offset, as the Java consumer does (KIP-392).
                    debug!(
                        "fetch of {tp:?} from read replica {broker} answered {code}: back to the leader"
                    );
                    state.read_replica = None;
                    continue;
                }
                match code {
                    ErrorCode::NONE => {
                        state.log_end = Some((p.high_watermark, p.last_stable_offset));
                        // The leader names a replica of the consumer's rack to read from; its
                        // answer then holds no records, and the next fetch goes there.
                        if p.preferred_read_replica >= 0 && p.preferred_read_replica != broker {
                            debug!(
                                "fetching {tp:?} from replica {} of the consumer's rack (KIP-392)",
                                p.preferred_read_replica
                            );
                            state.read_replica = Some(p.preferred_read_replica);
                        }
                    }
                    ErrorCode::OFFSET_OUT_OF_RANGE if self.config.reset == OffsetReset::None => {
                        state.set(Offset::Missing, None);
                        followup.errors.push(Error::OffsetOutOfRange {
                            log_start_offset: (p.log_start_offset >= 0)
                                .then_some(p.log_start_offset),
                            high_watermark: (p.high_watermark >= 0).then_some(p.high_watermark),
                            partition: tp,
                            offset,
                        });
                        continue;
                    }
                    ErrorCode::OFFSET_OUT_OF_RANGE => {
                        state.set(reset, None);
                        continue;
                    }
                    code => {
                        // NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION,
                        // ...: find the new leader and fetch again from the same offset, so
                        // nothing is skipped or repeated (the new leader's epoch validates the
                        // position first). TOPIC_AUTHORIZATION_FAILED and the like reach the
                        // application, and are asked again after the back-off too.
                        followup.partition_failed("Fetch", &tp, code);
                        if code.is_retriable() {
                            followup.refresh_metadata = true;
                        }
                        continue;
                    }
                }
                let Some(bytes) = p.records.as_ref() else {
                    continue;
                };
                let reader = PartitionReader::new(
                    &tp.topic,
                    tp.partition,
                    bytes.clone(),
                    offset,
                    self.config.isolation,
                    p.last_stable_offset,
                    p.aborted_transactions.as_deref(),
                );
                // The next fetch starts where this answer ends, while it is read.
                state.offset = Offset::Ready(reader.end());
                state.readers.push_back(reader);
                // The first batch now, so an answer with nothing deliverable (markers,
                // aborted records) moves the position without waiting for a poll.
                if state.buffered.is_empty()
                    && let Err(e) = state.refill()
                {
                    followup.errors.push(e);
                    followup.retry = true;
                }
            }
        }
        followup
    }
}

/// `(topic, partition entry)` pairs grouped by topic, topics in name order: the topic level
/// of a request.
fn by_topic<'a, P>(
    entries: impl IntoIterator<Item = (&'a str, P)>,
) -> impl Iterator<Item = (&'a str, Vec<P>)> {
    let mut topics: BTreeMap<&str, Vec<P>> = BTreeMap::new();
    for (topic, entry) in entries {
        topics.entry(topic).or_default().push(entry);
    }
    topics.into_iter()
}

/// The error of an operation on a partition this consumer does not own.
fn not_assigned(what: &str, partition: &TopicPartition) -> Error {
    Error::InvalidState(format!(
        "{what}: {partition:?} is not assigned to this consumer"
    ))
}

/// The error of `auto.offset.reset=none` for a partition without an offset.
fn no_offset_error(partition: &TopicPartition, why: &str) -> Error {
    Error::InvalidState(format!(
        "{why} for {partition:?} and auto.offset.reset=none: seek first"
    ))
}

#[cfg(test)]
mod tests;
