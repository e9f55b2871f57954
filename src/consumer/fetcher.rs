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

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use tracing::debug;

use super::config::ConsumerConfig;
use super::fetch_session::{FetchSessionCounts, FetchSessions};
use super::metrics::PartitionLag;
use super::offsets::PartitionCommitted;
use super::records::{ConsumerRecord, PartitionReader};
use super::vocabulary::OffsetReset;
use crate::error::Error;
use crate::protocol::error_code::ErrorCode;
use crate::protocol::generated::topic_name;
use crate::protocol::messages::fetch::{
    FetchPartition, FetchRequest, FetchResponse, FetchTopic, ForgottenTopic,
};
use crate::protocol::messages::list_offsets::ListOffsetsResponse;
use crate::protocol::messages::offset_for_leader_epoch::OffsetForLeaderEpochResponse;
use crate::types::{BrokerId, IsolationLevel, TopicPartition};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{ListOffsetsRequest, OffsetForLeaderEpochRequest};

/// ListOffsets timestamps: the log start, and the end (the LSO under read_committed).
pub(crate) const EARLIEST_TIMESTAMP: i64 = -2;
pub(crate) const LATEST_TIMESTAMP: i64 = -1;

/// Where a partition's next fetch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Offset {
    /// Look up the committed offset.
    Committed,
    /// Ask the leader (ListOffsets) for the offset of this timestamp: [`EARLIEST_TIMESTAMP`]
    /// or [`LATEST_TIMESTAMP`] (`auto.offset.reset`, `seek_to_beginning`, `seek_to_end`).
    List(i64),
    /// `auto.offset.reset=none` and nothing committed (or the position is out of range, or
    /// the log was truncated under it): wait for a `seek`.
    Missing,
    /// Validate this position with the leader (OffsetForLeaderEpoch, KIP-320) before fetching
    /// from it: the leader changed since the records before it were read, or it is a committed
    /// offset with its epoch, and the new leader's log may not hold those records.
    Validate(i64),
    /// Fetch from here.
    Ready(i64),
}

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

#[derive(Debug)]
struct PartitionState {
    offset: Offset,
    /// Fetched and decoded, not yet delivered; the front is the position.
    buffered: VecDeque<ConsumerRecord>,
    /// The answers not read to their end yet, oldest first: the front one is being decoded,
    /// a second one was fetched from where the first ends ([`PartitionReader::end`], which
    /// `offset` is while they last). At most [`MAX_ANSWERS_HELD`].
    readers: VecDeque<PartitionReader>,
    /// Bumped whenever the offset is set from outside a fetch answer, so an answer to an
    /// older request is not applied. It starts at the partition's incarnation (a count of the
    /// fetcher's new partitions) shifted past any bump, so an answer to a request made for an
    /// earlier assignment of the same partition is stale too.
    token: u64,
    /// Paused by the application: neither fetched nor delivered (what is buffered is kept).
    paused: bool,
    /// The log's end as the latest fetch answer reported it: (high watermark, last stable
    /// offset), for the lag.
    log_end: Option<(i64, i64)>,
    /// The leader epoch of the log at `offset` when no answer held says (KIP-320's offset
    /// epoch): from a committed offset, or the last batch of an answer read to its end. A
    /// position from a seek or a reset has none, and is not validated (as the Java consumer's).
    epoch: Option<i32>,
    /// The partition leader's epoch as the metadata last gave it: what fetches carry
    /// (`current_leader_epoch`, so a stale leader refuses them) and what the position is
    /// validated under.
    leader_epoch: Option<i32>,
}

impl PartitionState {
    fn new(offset: Offset, incarnation: u64) -> Self {
        Self {
            offset,
            buffered: VecDeque::new(),
            readers: VecDeque::new(),
            token: incarnation << 32,
            paused: false,
            log_end: None,
            epoch: None,
            leader_epoch: None,
        }
    }

    fn position(&self) -> Option<i64> {
        match (self.buffered.front(), self.readers.front(), self.offset) {
            (Some(r), _, _) => Some(r.offset),
            // Past the batches decoded so far: what lies between was filtered or a marker.
            (None, Some(reader), _) => Some(reader.next_offset()),
            (None, None, Offset::Ready(o) | Offset::Validate(o)) => Some(o),
            _ => None,
        }
    }

    /// Whether records are held for delivery: decoded, or in answers not read to their end.
    fn holds_records(&self) -> bool {
        !self.buffered.is_empty() || !self.readers.is_empty()
    }

    /// Whether a fetch from `offset` would find nothing yet: the latest answer put the end of
    /// what this consumer may read there.
    fn caught_up_at(&self, offset: i64, isolation: IsolationLevel) -> bool {
        self.log_end
            .is_some_and(|(high_watermark, last_stable_offset)| {
                offset >= readable_end(isolation, high_watermark, last_stable_offset)
            })
    }

    /// Moves up to `want` records into `out`, decoding further batches as it goes; then one
    /// batch ahead, so a used-up answer lets the next fetch start now. The records leave the
    /// buffer in bulk: no per-record work beyond the move.
    fn take_into(&mut self, out: &mut Vec<ConsumerRecord>, want: usize) -> Result<(), Error> {
        let mut taken = 0;
        while taken < want {
            if self.buffered.is_empty() {
                self.refill()?;
                if self.buffered.is_empty() {
                    break;
                }
            }
            let n = (want - taken).min(self.buffered.len());
            out.extend(self.buffered.drain(..n));
            taken += n;
        }
        if self.buffered.is_empty() {
            self.refill()?;
        }
        Ok(())
    }

    /// The leader epoch of the log at the position, when known: that of the last batch read
    /// (the buffered records are of the front answer's last batch), else the one kept.
    fn position_epoch(&self) -> Option<i32> {
        self.readers
            .front()
            .and_then(PartitionReader::last_epoch)
            .or(self.epoch)
    }

    /// The position as it is, with its epoch.
    fn located(&self) -> Option<Position> {
        Some(Position {
            offset: self.position()?,
            leader_epoch: self.position_epoch(),
        })
    }

    /// Whether an answer to a request made under `token` may still move the position.
    fn answers(&self, token: u64) -> bool {
        self.token == token
    }

    /// Sets the position from outside a fetch answer (`epoch`: the leader epoch of the log
    /// there, if known): what is held is dropped, and answers to earlier requests are stale.
    fn set(&mut self, offset: Offset, epoch: Option<i32>) {
        self.buffered.clear();
        self.readers.clear();
        self.offset = offset;
        self.epoch = epoch;
        self.token += 1;
    }

    /// Drops the answers held and the fetch in flight (by token), and fetches from `offset`:
    /// what was fetched ahead started somewhere else.
    fn fetch_again_from(&mut self, offset: i64) {
        self.epoch = self.position_epoch();
        self.readers.clear();
        self.offset = Offset::Ready(offset);
        self.token += 1;
    }

    /// The leader is now at `leader_epoch`: a position whose epoch is known is validated with
    /// it before it is fetched from again (what is held came from the old leader and is
    /// dropped); any other position stays, and answers to requests made of the old leader
    /// are stale. A position validated under an older epoch is validated again.
    fn leader_moved(&mut self, leader_epoch: i32) {
        self.leader_epoch = Some(leader_epoch);
        match self.offset {
            Offset::Ready(_) | Offset::Validate(_) => {
                let Some(position) = self.located() else {
                    return;
                };
                let next = match position.leader_epoch {
                    Some(_) => Offset::Validate(position.offset),
                    None => Offset::Ready(position.offset),
                };
                self.set(next, position.leader_epoch);
            }
            Offset::Committed | Offset::List(_) | Offset::Missing => {}
        }
    }

    /// Decodes the front answer's next batch with records into the (empty) buffer, going on
    /// to the next answer when one is used up. An answer fetched ahead is read only if it
    /// starts exactly where the one before it ended; otherwise (a prediction that did not
    /// hold) it is dropped and the partition fetched again from the real end, so nothing is
    /// skipped or delivered twice.
    fn refill(&mut self) -> Result<(), Error> {
        while let Some(reader) = self.readers.front_mut() {
            match reader.next_batch() {
                Ok(Some(records)) => {
                    // The buffer is empty here: take the batch's records as they are (a
                    // Vec becomes a VecDeque without moving its elements).
                    self.buffered = VecDeque::from(records);
                    return Ok(());
                }
                Ok(None) => {
                    let ended = reader.next_offset();
                    let epoch = reader.last_epoch();
                    self.readers.pop_front();
                    self.epoch = epoch.or(self.epoch);
                    let next = self
                        .readers
                        .front()
                        .map_or(self.offset, |r| Offset::Ready(r.fetch_offset()));
                    if next != Offset::Ready(ended) {
                        self.fetch_again_from(ended);
                        return Ok(());
                    }
                }
                Err(e) => {
                    // A corrupt batch is not skipped over: fetch again from it and report it.
                    let at = reader.next_offset();
                    self.fetch_again_from(at);
                    return Err(Error::Decode(e));
                }
            }
        }
        Ok(())
    }
}

/// The answers a partition holds at most: one being read and one fetched ahead of it. More
/// would only add memory: one answer ahead already hides the round trip as long as the
/// application takes an answer's records more slowly than the broker sends them.
const MAX_ANSWERS_HELD: usize = 2;

/// A partition in a fetch request: which partition, the token it was asked under, the offset.
pub type Fetched = (TopicPartition, u64, i64);

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

/// The positions of the owned partitions.
#[derive(Debug)]
pub struct Fetcher {
    isolation: IsolationLevel,
    reset: OffsetReset,
    max_poll_records: usize,
    max_wait_ms: i32,
    min_bytes: i32,
    max_bytes: i32,
    partition_max_bytes: i32,
    list_timeout_ms: i32,
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
    pub fn new(config: &ConsumerConfig) -> Self {
        Self {
            isolation: config.isolation_level,
            reset: config.auto_offset_reset,
            max_poll_records: config.max_poll_records,
            max_wait_ms: i32::try_from(config.fetch_max_wait_ms).unwrap_or(i32::MAX),
            min_bytes: config.fetch_min_bytes,
            max_bytes: config.fetch_max_bytes,
            partition_max_bytes: config.max_partition_fetch_bytes,
            list_timeout_ms: i32::try_from(config.request_timeout_ms).unwrap_or(i32::MAX),
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

    /// Where `auto.offset.reset` starts a partition without a usable offset.
    fn reset_offset(&self) -> Offset {
        match self.reset {
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
        if let Some(tp) = partitions
            .iter()
            .find(|tp| !self.partitions.contains_key(*tp))
        {
            return Err(not_assigned(if paused { "pause" } else { "resume" }, tp));
        }
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
        if let Some(tp) = partitions
            .iter()
            .find(|tp| !self.partitions.contains_key(*tp))
        {
            return Err(not_assigned("seek", tp));
        }
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
    pub fn take_records(
        &mut self,
        fetchable: &[TopicPartition],
        limit: usize,
    ) -> Option<Vec<ConsumerRecord>> {
        let limit = limit.min(self.max_poll_records);
        if fetchable.is_empty() || limit == 0 {
            return None;
        }
        let start = self.next_start % fetchable.len();
        self.next_start = start + 1;
        let (after, before) = fetchable.split_at(start);
        let order = || before.iter().chain(after);
        let holding = |tp: &TopicPartition| {
            self.partitions
                .get(tp)
                .is_some_and(|s| !s.paused && s.holds_records())
        };
        let mut sharing = order().filter(|tp| holding(tp)).count();
        if sharing == 0 {
            return None;
        }
        let mut out = Vec::with_capacity(limit);
        // The even round, then one without shares for the room left.
        for even in [true, false] {
            for tp in order() {
                let room = limit - out.len();
                if room == 0 {
                    break;
                }
                let Some(state) = self
                    .partitions
                    .get_mut(tp)
                    .filter(|s| !s.paused && s.holds_records())
                else {
                    continue;
                };
                let want = if even {
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

    /// The `fetchable` partitions whose committed offset is to be looked up.
    pub fn awaiting_committed(&self, fetchable: &[TopicPartition]) -> Vec<Asked> {
        self.awaiting(
            fetchable.iter(),
            |offset| offset == Offset::Committed,
            &HashSet::new(),
        )
    }

    /// Of `partitions`, those owned whose position is in a state `wanted` picks and for
    /// which no request is `in_flight` (by token), with their tokens.
    fn awaiting<'a>(
        &self,
        partitions: impl Iterator<Item = &'a TopicPartition>,
        wanted: impl Fn(Offset) -> bool,
        in_flight: &HashSet<u64>,
    ) -> Vec<Asked> {
        partitions
            .filter_map(|tp| {
                let state = self.partitions.get(tp)?;
                (wanted(state.offset) && !in_flight.contains(&state.token)).then(|| Asked {
                    partition: tp.clone(),
                    token: state.token,
                })
            })
            .collect()
    }

    /// The answer to an OffsetFetch of the committed offsets (each partition's, or its
    /// error). A committed offset with its leader epoch is validated with the leader before
    /// it is fetched from (KIP-320): the log may have been truncated under it since.
    pub fn apply_committed(&mut self, answers: Vec<(Asked, PartitionCommitted)>) -> Followup {
        let mut followup = Followup::default();
        let reset = self.reset_offset();
        for (asked, answer) in answers {
            let Some(state) = self.partitions.get_mut(&asked.partition) else {
                continue;
            };
            if !state.answers(asked.token) || state.offset != Offset::Committed {
                continue;
            }
            match answer {
                Ok(Some(committed)) => {
                    let offset = match (committed.leader_epoch, state.leader_epoch) {
                        (Some(_), Some(_)) => Offset::Validate(committed.offset),
                        // Validated once the leader's epoch is known (`leader_epochs`).
                        _ => Offset::Ready(committed.offset),
                    };
                    state.set(offset, committed.leader_epoch);
                }
                Ok(None) => {
                    if reset == Offset::Missing {
                        followup
                            .errors
                            .push(no_offset_error(&asked.partition, "no committed offset"));
                    }
                    state.set(reset, None);
                }
                Err(code) => followup.partition_failed("OffsetFetch", &asked.partition, code),
            }
        }
        followup
    }

    /// The partitions to reset (`auto.offset.reset`, `seek_to_beginning` / `_end`) for which
    /// no ListOffsets is `in_flight` (by token).
    pub fn awaiting_reset(&self, in_flight: &HashSet<u64>) -> Vec<Asked> {
        self.awaiting(
            self.partitions.keys(),
            |offset| matches!(offset, Offset::List(_)),
            in_flight,
        )
    }

    /// The ListOffsets request that resets `asked` (all led by one broker).
    pub fn reset_request(&self, asked: &[Asked]) -> ListOffsetsRequest {
        self.list_request(asked.iter().filter_map(|a| {
            match self.partitions.get(&a.partition)?.offset {
                Offset::List(timestamp) => Some((&a.partition, timestamp)),
                _ => None,
            }
        }))
    }

    /// The ListOffsets request for `(partition, timestamp)` pairs (all led by one broker):
    /// a timestamp in milliseconds asks for the first offset at or after it (KIP-79), the
    /// sentinels for the log start and end (the last stable offset under read_committed).
    /// An owned partition's request carries the leader epoch known, so a stale leader refuses
    /// it (FENCED_LEADER_EPOCH) rather than answer from a log that may be truncated.
    pub fn list_request<'a>(
        &self,
        queries: impl IntoIterator<Item = (&'a TopicPartition, i64)>,
    ) -> ListOffsetsRequest {
        let topics = by_topic(queries.into_iter().map(|(tp, timestamp)| {
            let partition = ListOffsetsPartition::default()
                .with_partition_index(tp.partition)
                .with_current_leader_epoch(self.leader_epoch(tp))
                .with_timestamp(timestamp);
            (&*tp.topic, partition)
        }));
        ListOffsetsRequest::default()
            .with_replica_id((-1).into())
            .with_isolation_level(self.isolation.wire())
            .with_topics(
                topics
                    .map(|(name, partitions)| {
                        ListOffsetsTopic::default()
                            .with_name(topic_name(name))
                            .with_partitions(partitions)
                    })
                    .collect(),
            )
            .with_timeout_ms(self.list_timeout_ms)
    }

    /// The leader epoch a request for `tp` carries: the one known, else -1 (no check).
    fn leader_epoch(&self, tp: &TopicPartition) -> i32 {
        self.partitions
            .get(tp)
            .and_then(|s| s.leader_epoch)
            .unwrap_or(-1)
    }

    /// The answer to a [`Fetcher::reset_request`] for `asked`.
    pub fn apply_listed(&mut self, response: ListOffsetsResponse, asked: &[Asked]) -> Followup {
        let mut followup = Followup::default();
        let mut unanswered: HashMap<&TopicPartition, u64> =
            asked.iter().map(|a| (&a.partition, a.token)).collect();
        for topic in response.topics {
            for p in topic.partitions {
                let tp = TopicPartition::new(topic.name.as_str(), p.partition_index);
                let Some(token) = unanswered.remove(&tp) else {
                    continue;
                };
                let Some(state) = self.partitions.get_mut(&tp) else {
                    continue;
                };
                if !state.answers(token) || !matches!(state.offset, Offset::List(_)) {
                    continue;
                }
                match ErrorCode(p.error_code) {
                    ErrorCode::NONE if p.offset >= 0 => state.set(Offset::Ready(p.offset), None),
                    ErrorCode::NONE => followup.retry = true,
                    code => followup.partition_failed("ListOffsets", &tp, code),
                }
            }
        }
        // A partition the broker left out is asked again, not at once.
        followup.retry |= !unanswered.is_empty();
        followup
    }

    /// The partitions whose position is to be validated with their leader (KIP-320) for
    /// which no OffsetForLeaderEpoch is `in_flight` (by token).
    pub fn awaiting_validation(&self, in_flight: &HashSet<u64>) -> Vec<Asked> {
        self.awaiting(
            self.partitions.keys(),
            |offset| matches!(offset, Offset::Validate(_)),
            in_flight,
        )
    }

    /// The OffsetForLeaderEpoch request that validates `asked` (all led by one broker): for
    /// each, the epoch of the log at the position, under the leader epoch known (so a stale
    /// leader refuses it). The leader answers where that epoch ends in its log.
    pub fn validation_request(&self, asked: &[Asked]) -> OffsetForLeaderEpochRequest {
        let topics = by_topic(asked.iter().filter_map(|a| {
            let state = self.partitions.get(&a.partition)?;
            let (Offset::Validate(_), Some(epoch)) = (state.offset, state.epoch) else {
                return None;
            };
            let partition = OffsetForLeaderPartition::default()
                .with_partition(a.partition.partition)
                .with_current_leader_epoch(state.leader_epoch.unwrap_or(-1))
                .with_leader_epoch(epoch);
            Some((&*a.partition.topic, partition))
        }));
        OffsetForLeaderEpochRequest::default()
            .with_replica_id((-1).into())
            .with_topics(
                topics
                    .map(|(name, partitions)| {
                        OffsetForLeaderTopic::default()
                            .with_topic(topic_name(name))
                            .with_partitions(partitions)
                    })
                    .collect(),
            )
    }

    /// The leader cannot validate positions (it has no OffsetForLeaderEpoch a consumer may
    /// send, v3+): `asked` are fetched from as they are, as the Java consumer does.
    pub fn validation_unsupported(&mut self, asked: &[Asked]) {
        for a in asked {
            if let Some(state) = self.partitions.get_mut(&a.partition)
                && state.answers(a.token)
                && let Offset::Validate(offset) = state.offset
            {
                let epoch = state.epoch;
                state.set(Offset::Ready(offset), epoch);
            }
        }
    }

    /// The answer to a [`Fetcher::validation_request`] for `asked`: where the epoch of each
    /// position ends in the leader's log. An end at or past the position validates it; an end
    /// before it means the log was truncated under it (the records from there on are not the
    /// ones read), which is reported as [`Error::LogTruncation`] and, under
    /// `auto.offset.reset` earliest or latest, moves the position to where the logs diverge
    /// (or resets it when the leader knows no epoch that old), as the Java consumer's
    /// `SubscriptionState.maybeCompleteValidation` does; under `none` the partition waits
    /// for a seek. Nothing is read past or read again without the application hearing of it.
    pub fn apply_validated(
        &mut self,
        response: OffsetForLeaderEpochResponse,
        asked: &[Asked],
    ) -> Followup {
        let mut followup = Followup::default();
        let reset = self.reset_offset();
        let mut unanswered: HashMap<&TopicPartition, u64> =
            asked.iter().map(|a| (&a.partition, a.token)).collect();
        for topic in response.topics {
            for p in topic.partitions {
                let tp = TopicPartition::new(topic.topic.as_str(), p.partition);
                let Some(token) = unanswered.remove(&tp) else {
                    continue;
                };
                let Some(state) = self.partitions.get_mut(&tp) else {
                    continue;
                };
                let Offset::Validate(offset) = state.offset else {
                    continue;
                };
                if !state.answers(token) {
                    continue;
                }
                let code = ErrorCode(p.error_code);
                if !code.is_ok() {
                    followup.partition_failed("OffsetForLeaderEpoch", &tp, code);
                    continue;
                }
                let divergent = (p.end_offset >= 0 && p.leader_epoch >= 0).then_some(p.end_offset);
                if divergent.is_some_and(|end| end >= offset) {
                    let epoch = state.epoch;
                    state.set(Offset::Ready(offset), epoch);
                    continue;
                }
                let moved_on = reset != Offset::Missing;
                match (divergent, moved_on) {
                    (Some(end), true) => state.set(Offset::Ready(end), Some(p.leader_epoch)),
                    (None, true) => state.set(reset, None),
                    (_, false) => state.set(Offset::Missing, None),
                }
                tracing::warn!(
                    topic = %tp.topic,
                    partition = tp.partition,
                    offset,
                    divergent_offset = ?divergent,
                    "log truncation detected (KIP-320)"
                );
                followup.errors.push(Error::LogTruncation {
                    partition: tp,
                    offset,
                    divergent_offset: divergent,
                    reset: moved_on,
                });
            }
        }
        followup.retry |= !unanswered.is_empty();
        followup
    }

    /// The `fetchable` partitions to fetch now: positioned, not paused, and holding fewer
    /// than [`MAX_ANSWERS_HELD`] answers (a partition whose answer is being read is fetched
    /// ahead from where that answer ends).
    pub fn to_fetch(&self, fetchable: &[TopicPartition]) -> Vec<Fetched> {
        fetchable
            .iter()
            .filter_map(|tp| {
                let state = self.partitions.get(tp)?;
                match state.offset {
                    Offset::Ready(offset)
                        if !state.paused && state.readers.len() < MAX_ANSWERS_HELD =>
                    {
                        Some((tp.clone(), state.token, offset))
                    }
                    _ => None,
                }
            })
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
    pub fn fetch_round(
        &self,
        fetchable: &[TopicPartition],
        leader: impl Fn(&TopicPartition) -> Option<BrokerId>,
    ) -> FetchRound {
        let mut round = FetchRound::default();
        let mut by_broker: BTreeMap<BrokerId, Vec<Fetched>> = BTreeMap::new();
        for fetched in self.to_fetch(fetchable) {
            match leader(&fetched.0) {
                Some(broker) => by_broker.entry(broker).or_default().push(fetched),
                None => round.leaderless = true,
            }
        }
        let reading: HashSet<BrokerId> = fetchable
            .iter()
            .filter(|tp| {
                self.partitions
                    .get(*tp)
                    .is_some_and(|s| !s.paused && s.holds_records())
            })
            .filter_map(&leader)
            .collect();
        for (broker, fetched) in by_broker {
            let would_wait = fetched.iter().all(|(tp, _, offset)| {
                self.partitions
                    .get(tp)
                    .is_some_and(|s| s.caught_up_at(*offset, self.isolation))
            });
            if !(would_wait && reading.contains(&broker)) {
                round.fetches.push((broker, fetched));
            }
        }
        round
    }

    /// The Fetch request for `fetched` (all led by `broker`), in the fetch session with
    /// `broker` (KIP-227): a full fetch that opens one, or an incremental one that names only
    /// the partitions that joined or moved and forgets those no longer fetched. Its answer
    /// goes to [`Fetcher::apply_fetch`], or [`Fetcher::fetch_failed`] if none came.
    pub fn fetch_request(&mut self, broker: BrokerId, fetched: &[Fetched]) -> FetchRequest {
        let partitions = &self.partitions;
        let leader_epoch = |tp: &TopicPartition| {
            partitions
                .get(tp)
                .and_then(|s| s.leader_epoch)
                .unwrap_or(-1)
        };
        let session = self.sessions.next_fetch(broker, fetched, leader_epoch);
        let mut topics: BTreeMap<String, Vec<FetchPartition>> = BTreeMap::new();
        for (tp, _, offset) in session.named.iter().filter_map(|&i| fetched.get(i)) {
            topics
                .entry(tp.topic.to_string())
                .or_default()
                .push(FetchPartition {
                    partition: tp.partition,
                    // KIP-320: a leader behind this epoch answers UNKNOWN_LEADER_EPOCH, one past
                    // it FENCED_LEADER_EPOCH (our metadata is stale), instead of records.
                    current_leader_epoch: self.leader_epoch(tp),
                    fetch_offset: *offset,
                    last_fetched_epoch: -1,
                    log_start_offset: -1,
                    partition_max_bytes: self.partition_max_bytes,
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
            max_wait_ms: self.max_wait_ms,
            min_bytes: self.min_bytes,
            max_bytes: self.max_bytes,
            isolation_level: self.isolation.wire(),
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
                    topic,
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
        let state = self.partitions.get(tp)?;
        let (high_watermark, last_stable_offset) = state.log_end?;
        let position = state.position()?;
        let end = readable_end(self.isolation, high_watermark, last_stable_offset);
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
                        .is_some_and(|p| s.caught_up_at(p, self.isolation))
            })
    }

    /// The largest [`Fetcher::lag`] of the owned partitions (0 when none has one).
    pub fn max_lag(&self) -> i64 {
        self.partitions
            .keys()
            .filter_map(|tp| self.lag(tp))
            .map(|l| l.lag)
            .max()
            .unwrap_or(0)
    }

    /// [`Fetcher::lag`] of every owned partition that has one.
    pub fn lags(&self) -> BTreeMap<TopicPartition, PartitionLag> {
        self.partitions
            .keys()
            .filter_map(|tp| Some((tp.clone(), self.lag(tp)?)))
            .collect()
    }

    /// The fetch to `broker` for `fetched` got no answer: its session starts over.
    pub fn fetch_failed(&mut self, broker: BrokerId) {
        self.sessions.failed(broker);
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
                let tp = TopicPartition::new(Arc::clone(&name), p.partition_index);
                let Some(&(token, offset)) = asked.get(&tp) else {
                    continue;
                };
                let Some(state) = self.partitions.get_mut(&tp) else {
                    continue;
                };
                // A seek, a revocation, a reset or a new leader since the request: its answer
                // is stale.
                if !state.answers(token) || state.offset != Offset::Ready(offset) {
                    continue;
                }
                match ErrorCode(p.error_code) {
                    ErrorCode::NONE => {
                        state.log_end = Some((p.high_watermark, p.last_stable_offset));
                    }
                    ErrorCode::OFFSET_OUT_OF_RANGE if self.reset == OffsetReset::None => {
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
                    &name,
                    tp.partition,
                    bytes.clone(),
                    offset,
                    self.isolation,
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

/// The end of what a reader at `isolation` can read: the last stable offset under
/// read_committed (when the broker gave one), else the high watermark.
fn readable_end(isolation: IsolationLevel, high_watermark: i64, last_stable_offset: i64) -> i64 {
    match isolation {
        IsolationLevel::ReadCommitted if last_stable_offset >= 0 => last_stable_offset,
        _ => high_watermark,
    }
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
mod tests {
    use bytes::{Bytes, BytesMut};

    use super::*;
    use crate::consumer::offsets::Committed;
    use crate::protocol::messages::fetch::{FetchPartitionResponse, FetchTopicResponse};
    use crate::protocol::record_batch::BatchBuilder;

    /// The broker every partition here is led by.
    const BROKER: BrokerId = 1;

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    fn fetcher(reset: OffsetReset) -> Fetcher {
        let config = ConsumerConfig {
            auto_offset_reset: reset,
            max_poll_records: 2,
            ..ConsumerConfig::default()
        };
        Fetcher::new(&config)
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
        Fetcher::new(&ConsumerConfig {
            auto_offset_reset: OffsetReset::Earliest,
            max_poll_records,
            ..ConsumerConfig::default()
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
        f.assigned(&all, true);
        answer_committed(f, all.iter().map(|tp| (tp.clone(), Some(0))).collect());
        let fetched = f.to_fetch(&all);
        let parts: Vec<(i32, Option<Bytes>, i64)> = records
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(p, n)| (p as i32, Some(batch(0, *n)), 1_000))
            .collect();
        f.apply_fetch(BROKER, answers(&parts), fetched);
        all
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
        let mut f = fetcher_of(6);
        let all = four_with_backlog(&mut f, &[100; 4]);
        let mut delivered: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
        for poll in 1..=8 {
            let taken = f.take_records(&all, usize::MAX).unwrap();
            assert_eq!(taken.len(), 6, "a full poll");
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
                assert!(counts.iter().all(|n| *n == poll / 4 * 6), "{counts:?}");
            }
        }
        for offsets in delivered.values() {
            assert_eq!(*offsets, (0..12).collect::<Vec<i64>>(), "in order, once");
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
            let config = ConsumerConfig {
                isolation_level: isolation,
                max_poll_records: 2,
                ..ConsumerConfig::default()
            };
            let mut f = Fetcher::new(&config);
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
        assert_eq!(full.topics[0].partitions.len(), 3);
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
}
