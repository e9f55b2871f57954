//! Offset commits in [`ConsumerState`]: generation holds (a commit carries the generation
//! or member epoch, KIP-447, so no request that may move it starts while one is held, for at
//! most a heartbeat interval), commits the coordinator refused because the member or its
//! generation is gone (acted on at once), and `enable.auto.commit`.

use std::collections::HashSet;
use std::sync::Arc;

use tokio::task::JoinSet;
use tracing::{debug, warn};

use super::{Completion, ConsumerState};
use crate::consumer::calls::call;
use crate::consumer::fetcher::Position;
use crate::consumer::metrics::elapsed_ms;
use crate::consumer::offsets::offset_commit_request;
use crate::error::Result;
use crate::net::connection::BrokerLink;
use crate::protocol::error_code::ErrorCode;
use crate::protocol::messages::offset_commit::OffsetCommitResponse;
use crate::types::{ConsumerGroupMetadata, Millis, OffsetToCommit, TopicPartition};

/// The shortest a generation hold lasts before liveness wins (see `ConsumerState::hold`).
const MIN_HOLD_MS: Millis = 1_000;

impl ConsumerState {
    /// Whether a request that may move the generation (member epoch) is in flight or under
    /// way: a KIP-848 heartbeat (the coordinator bumps the epoch when it processes one), or a
    /// classic JoinGroup / SyncGroup round.
    pub fn generation_moving(&self) -> bool {
        (self.membership_in_flight && self.uses_kip848()) || self.membership.joining()
    }

    /// Holds the generation for an offset commit unless a request that may move it is in
    /// flight (then `None`: wait for its answer and try again). The check and the hold are
    /// one step under the consumer's lock, and every membership request starts under that
    /// lock after checking the hold (`start_membership_request`), so none can start between
    /// the two: the metadata returned is the coordinator's.
    pub fn try_hold(&mut self, now: Millis) -> Option<ConsumerGroupMetadata> {
        (!self.generation_moving()).then(|| self.hold(now))
    }

    /// Holds the generation for an offset commit (see [`super::driver::GenerationHold`]):
    /// until `release_hold`, or for at most one heartbeat interval (at least a second), no
    /// request that may move the generation is started. Returns the metadata to commit with
    /// (the coordinator's only if nothing that may move it is in flight: see `try_hold`).
    pub fn hold(&mut self, now: Millis) -> ConsumerGroupMetadata {
        let limit = self.membership.heartbeat_interval_ms().max(MIN_HOLD_MS);
        let until = now.saturating_add(limit);
        self.hold_until = Some(self.hold_until.map_or(until, |t| t.max(until)));
        self.holds += 1;
        self.membership.group_metadata()
    }

    /// One hold ended.
    pub fn release_hold(&mut self) {
        self.holds = self.holds.saturating_sub(1);
        if self.holds == 0 {
            self.hold_until = None;
        }
    }

    /// Whether a hold keeps generation-moving requests back now.
    pub(super) fn generation_held(&self, now: Millis) -> bool {
        self.hold_until.is_some_and(|until| until > now)
            && self.membership.next_request_moves_generation()
    }

    /// An offset commit made with `metadata` was refused with `code`. When the refusal says
    /// the member is gone or its generation is (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
    /// ILLEGAL_GENERATION, classic REBALANCE_IN_PROGRESS), the membership acts on it now
    /// instead of at the next heartbeat, and what is buffered for partitions it no longer
    /// owns is dropped: nothing of them is delivered after a fenced commit. A refusal of a
    /// generation the member has already left is ignored. Returns whether it applied.
    pub fn commit_refused(
        &mut self,
        code: ErrorCode,
        metadata: &ConsumerGroupMetadata,
        now: Millis,
    ) -> bool {
        if self.membership.group_metadata() != *metadata {
            return false;
        }
        let applied = self.membership.commit_refused(code, now);
        if applied {
            debug!(%code, group = %metadata.group_id, "offset commit refused: membership acts on it");
            self.drop_unowned();
        }
        applied
    }

    /// `enable.auto.commit`: every `auto.commit.interval.ms`, the positions at the start of
    /// the latest poll (what earlier polls handed out) that changed since the last commit,
    /// committed with a generation hold (no heartbeat moves the epoch under it).
    pub(super) fn start_auto_commit(
        &mut self,
        coordinator: &BrokerLink,
        now: Millis,
        tasks: &mut JoinSet<Completion>,
    ) {
        if !self.config.enable_auto_commit
            || self.auto_commit_in_flight
            || now < self.auto_commit_at
            || self.generation_moving()
        {
            return;
        }
        self.auto_commit_at = now.saturating_add(self.config.auto_commit_interval_millis());
        let offsets = self.offsets_to_auto_commit(self.fetcher.processed());
        if offsets.is_empty() {
            return;
        }
        self.auto_commit_in_flight = true;
        let metadata = self.hold(now);
        let request = offset_commit_request(&metadata, &offsets);
        let link = coordinator.clone();
        let timeout = self.config.request_timeout();
        let client_id = Arc::clone(&self.client_id);
        tasks.spawn(async move {
            let started = std::time::Instant::now();
            let result = call(&link, request, None, client_id, timeout).await;
            Completion::AutoCommitted {
                offsets,
                metadata,
                result,
                latency_ms: elapsed_ms(started),
            }
        });
    }

    /// Of `positions`, those of owned partitions that differ from the last auto-commit, with
    /// their leader epochs (KIP-320).
    fn offsets_to_auto_commit<'a>(
        &self,
        positions: impl Iterator<Item = (&'a TopicPartition, Position)>,
    ) -> Vec<OffsetToCommit> {
        let owned: HashSet<TopicPartition> = self.membership.owned().into_iter().collect();
        let mut offsets: Vec<OffsetToCommit> = positions
            .filter(|(tp, position)| {
                owned.contains(*tp) && self.auto_committed.get(*tp) != Some(&position.offset)
            })
            .map(|(tp, position)| {
                OffsetToCommit::new(tp.clone(), position.offset)
                    .with_leader_epoch(position.leader_epoch)
            })
            .collect();
        offsets.sort_by(|a, b| a.partition.cmp(&b.partition));
        offsets
    }

    /// Auto-commit before partitions are given up (a poll that follows a `Revoked`) and at
    /// `close`: the current positions (every record handed out so far was processed), if
    /// auto-commit is on and, unless `closing`, a revocation is pending.
    pub fn auto_commit_now(&self, closing: bool) -> Option<Vec<OffsetToCommit>> {
        if !self.config.enable_auto_commit {
            return None;
        }
        let revoking = self.membership.in_group()
            && self.membership.owned().len() > self.membership.fetchable().len();
        if !closing && !revoking {
            return None;
        }
        let offsets = self.offsets_to_auto_commit(self.fetcher.positions());
        (!offsets.is_empty()).then_some(offsets)
    }

    /// Whether an auto-commit is in flight (an application-side one waits for it, so an
    /// older commit never lands after a newer one).
    pub fn auto_commit_in_flight(&self) -> bool {
        self.auto_commit_in_flight
    }

    /// `offsets` were committed.
    pub fn auto_committed(&mut self, offsets: &[OffsetToCommit]) {
        for o in offsets {
            self.auto_committed.insert(o.partition.clone(), o.offset);
        }
    }

    pub(super) fn apply_auto_commit(
        &mut self,
        offsets: Vec<OffsetToCommit>,
        metadata: &ConsumerGroupMetadata,
        result: Result<OffsetCommitResponse>,
        latency_ms: u64,
        now: Millis,
    ) {
        self.auto_commit_in_flight = false;
        self.release_hold();
        let refused = match result {
            Ok(response) => response
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .map(|p| ErrorCode(p.error_code))
                .find(|code| !code.is_ok()),
            Err(e) => {
                debug!("auto-commit failed: {e}");
                self.coordinator = None;
                self.auto_commit_at = self.after_backoff(now);
                return;
            }
        };
        match refused {
            None => {
                self.figures.committed(latency_ms);
                self.auto_committed(&offsets);
            }
            Some(
                code @ (ErrorCode::NOT_COORDINATOR
                | ErrorCode::COORDINATOR_NOT_AVAILABLE
                | ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
                | ErrorCode::STALE_MEMBER_EPOCH),
            ) => {
                debug!(%code, "auto-commit refused: again after the back-off");
                if code != ErrorCode::STALE_MEMBER_EPOCH {
                    self.coordinator = None;
                }
                self.auto_commit_at = self.after_backoff(now);
            }
            Some(code) => {
                warn!(%code, "auto-commit refused");
                self.commit_refused(code, metadata, now);
            }
        }
    }
}
