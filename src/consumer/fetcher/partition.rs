//! One owned partition's position and what it holds: the offset state a fetch starts from,
//! the records decoded and not yet delivered, the answers not read to their end, and the
//! token that makes an answer to an older request stale.

use std::collections::VecDeque;

use super::Position;
use crate::consumer::records::{ConsumerRecord, PartitionReader};
use crate::error::Error;
use crate::types::{BrokerId, IsolationLevel};

/// Where a partition's next fetch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Offset {
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

#[derive(Debug)]
pub(super) struct PartitionState {
    pub(super) offset: Offset,
    /// Fetched and decoded, not yet delivered; the front is the position.
    pub(super) buffered: VecDeque<ConsumerRecord>,
    /// The answers not read to their end yet, oldest first: the front one is being decoded,
    /// a second one was fetched from where the first ends ([`PartitionReader::end`], which
    /// `offset` is while they last). At most [`super::MAX_ANSWERS_HELD`].
    pub(super) readers: VecDeque<PartitionReader>,
    /// Bumped whenever the offset is set from outside a fetch answer, so an answer to an
    /// older request is not applied. It starts at the partition's incarnation (a count of the
    /// fetcher's new partitions) shifted past any bump, so an answer to a request made for an
    /// earlier assignment of the same partition is stale too.
    pub(super) token: u64,
    /// Paused by the application: neither fetched nor delivered (what is buffered is kept).
    pub(super) paused: bool,
    /// The log's end as the latest fetch answer reported it: (high watermark, last stable
    /// offset), for the lag.
    pub(super) log_end: Option<(i64, i64)>,
    /// The leader epoch of the log at `offset` when no answer held says (KIP-320's offset
    /// epoch): from a committed offset, or the last batch of an answer read to its end. A
    /// position from a seek or a reset has none, and is not validated (as the Java consumer's).
    pub(super) epoch: Option<i32>,
    /// The partition leader's epoch as the metadata last gave it: what fetches carry
    /// (`current_leader_epoch`, so a stale leader refuses them) and what the position is
    /// validated under.
    pub(super) leader_epoch: Option<i32>,
    /// The replica the leader named for this consumer's rack (KIP-392's preferred read
    /// replica): fetched from instead of the leader until it answers with an error or no
    /// answer, or the metadata is refreshed, whichever comes first; then the leader again,
    /// which names a replica anew.
    pub(super) read_replica: Option<BrokerId>,
    /// The position when the latest `poll` began: what the polls before it handed out, which
    /// the application has processed (what auto-commit commits).
    pub(super) processed: Option<Position>,
}

impl PartitionState {
    pub(super) fn new(offset: Offset, incarnation: u64) -> Self {
        Self {
            offset,
            buffered: VecDeque::new(),
            readers: VecDeque::new(),
            token: incarnation << 32,
            paused: false,
            log_end: None,
            epoch: None,
            leader_epoch: None,
            read_replica: None,
            processed: None,
        }
    }

    /// The offset of the next record to hand out: the first buffered one's, else where the
    /// next fetch starts. No answer stands undecoded behind an empty buffer (the buffer is
    /// refilled whenever it empties, by `take_into` and as an answer arrives, and an answer
    /// with nothing left to deliver is dropped there), so the offset is past every answer
    /// read; a decoded answer's filtered records and markers are behind it.
    pub(super) fn position(&self) -> Option<i64> {
        debug_assert!(
            !self.buffered.is_empty() || self.readers.is_empty(),
            "an answer waits undecoded behind an empty buffer"
        );
        match (self.buffered.front(), self.offset) {
            (Some(r), _) => Some(r.offset),
            (None, Offset::Ready(o) | Offset::Validate(o)) => Some(o),
            _ => None,
        }
    }

    /// Where a fetch for it starts, if one may go now: positioned, not paused, and holding
    /// fewer than [`super::MAX_ANSWERS_HELD`] answers.
    pub(super) fn fetch_offset(&self) -> Option<i64> {
        match self.offset {
            Offset::Ready(offset)
                if !self.paused && self.readers.len() < super::MAX_ANSWERS_HELD =>
            {
                Some(offset)
            }
            _ => None,
        }
    }

    /// Whether records are held for delivery: decoded, or in answers not read to their end.
    pub(super) fn holds_records(&self) -> bool {
        !self.buffered.is_empty() || !self.readers.is_empty()
    }

    /// Whether a fetch from `offset` would find nothing yet: the latest answer put the end of
    /// what this consumer may read there.
    pub(super) fn caught_up_at(&self, offset: i64, isolation: IsolationLevel) -> bool {
        self.log_end
            .is_some_and(|(high_watermark, last_stable_offset)| {
                offset >= readable_end(isolation, high_watermark, last_stable_offset)
            })
    }

    /// Moves up to `want` records into `out`, decoding further batches as it goes; then one
    /// batch ahead, so a used-up answer lets the next fetch start now. The records leave the
    /// buffer in bulk: no per-record work beyond the move.
    pub(super) fn take_into(
        &mut self,
        out: &mut Vec<ConsumerRecord>,
        want: usize,
    ) -> Result<(), Error> {
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
    pub(super) fn position_epoch(&self) -> Option<i32> {
        self.readers
            .front()
            .and_then(PartitionReader::last_epoch)
            .or(self.epoch)
    }

    /// The position as it is, with its epoch.
    pub(super) fn located(&self) -> Option<Position> {
        Some(Position {
            offset: self.position()?,
            leader_epoch: self.position_epoch(),
        })
    }

    /// Whether an answer to a request made under `token` may still move the position.
    pub(super) fn answers(&self, token: u64) -> bool {
        self.token == token
    }

    /// Sets the position from outside a fetch answer (`epoch`: the leader epoch of the log
    /// there, if known): what is held is dropped, and answers to earlier requests are stale.
    pub(super) fn set(&mut self, offset: Offset, epoch: Option<i32>) {
        self.buffered.clear();
        self.readers.clear();
        self.offset = offset;
        self.epoch = epoch;
        self.token += 1;
    }

    /// Drops the answers held and the fetch in flight (by token), and fetches from `offset`:
    /// what was fetched ahead started somewhere else.
    pub(super) fn fetch_again_from(&mut self, offset: i64) {
        self.epoch = self.position_epoch();
        self.readers.clear();
        self.offset = Offset::Ready(offset);
        self.token += 1;
    }

    /// The leader is now at `leader_epoch`: a position whose epoch is known is validated with
    /// it before it is fetched from again (what is held came from the old leader and is
    /// dropped); any other position stays, and answers to requests made of the old leader
    /// are stale. A position validated under an older epoch is validated again.
    pub(super) fn leader_moved(&mut self, leader_epoch: i32) {
        self.leader_epoch = Some(leader_epoch);
        // The new leader names the replica to read anew (KIP-392).
        self.read_replica = None;
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
    pub(super) fn refill(&mut self) -> Result<(), Error> {
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

/// The end of what a reader at `isolation` can read: the last stable offset under
/// read_committed (when the broker gave one), else the high watermark.
pub(super) fn readable_end(
    isolation: IsolationLevel,
    high_watermark: i64,
    last_stable_offset: i64,
) -> i64 {
    match isolation {
        IsolationLevel::ReadCommitted if last_stable_offset >= 0 => last_stable_offset,
        _ => high_watermark,
    }
}
