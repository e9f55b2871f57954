//! The application's side of [`ConsumerState`]: what a `poll` hands over (an error, a
//! rebalance event before any record, then records of the partitions this member may
//! deliver), what a rebalance event changes in the fetch positions, and the
//! `max.poll.interval.ms` budget between two polls (KIP-62), after which the member leaves
//! the group until its next `poll`.

use std::collections::HashSet;
use std::sync::Arc;

use tokio::task::JoinSet;
use tracing::{debug, warn};

use super::{Completion, ConsumerState, View};
use crate::consumer::calls::membership_call;
use crate::consumer::membership::MembershipEvent;
use crate::consumer::membership::MembershipOrRecords;
use crate::error::{Error, ErrorChain, Result};
use crate::types::{Millis, TopicPartition};

impl ConsumerState {
    /// A `poll` begins: revocations handed over at the previous one are given up now (the
    /// user had that whole time to commit them), the processing timer restarts
    /// (`max.poll.interval.ms`), and a member that left for exceeding it rejoins.
    pub fn begin_poll(&mut self, now: Millis) -> Result<()> {
        if let Some(e) = &self.fatal {
            return Err(e.clone());
        }
        if self.subscription.is_empty()
            && self.pattern.is_none()
            && self.membership.owned().is_empty()
        {
            return Err(Error::InvalidState(
                "poll before subscribe or assign: the consumer has no topics".into(),
            ));
        }
        self.membership.on_poll(now);
        self.drop_unowned();
        if self.config.enable_auto_commit {
            self.fetcher.mark_processed();
        }
        self.left_for_poll_timeout = false;
        self.polled_once = true;
        self.polls_in_progress += 1;
        self.last_poll = now;
        Ok(())
    }

    /// A `poll` ended (returned, or its future was dropped).
    pub fn end_poll(&mut self, now: Millis) {
        self.polls_in_progress = self.polls_in_progress.saturating_sub(1);
        self.last_poll = now;
    }

    /// What `poll` hands over now, if anything: an error, a rebalance event (always before
    /// records, so records of a partition that is revoked or lost are dropped first), or
    /// up to `limit` records of the partitions this member may deliver.
    pub fn next_for_user(&mut self, limit: usize) -> Result<Option<MembershipOrRecords>> {
        if let Some(e) = self.errors.pop() {
            return Err(e);
        }
        if let Some(e) = &self.fatal {
            return Err(e.clone());
        }
        let view = View {
            metadata: &self.metadata,
            ids: &self.topic_ids,
        };
        if let Some(event) = self.membership.next_event(&view) {
            self.apply_event(&event);
            return Ok(Some(MembershipOrRecords::Membership(event)));
        }
        let records = self
            .fetcher
            .take_records(&self.membership.fetchable(), limit);
        if let Some(records) = &records {
            // take_records hands a partition's records out in runs (at most two: its share,
            // then some of the room the others left): one count per run, with the lag its
            // position now has.
            for run in records
                .chunk_by(|a, b| a.partition == b.partition && Arc::ptr_eq(&a.topic, &b.topic))
            {
                let tp = TopicPartition::new(Arc::clone(&run[0].topic), run[0].partition);
                let lag = self.fetcher.lag(&tp);
                self.figures.consumed(&tp, run.len() as u64, lag);
            }
            self.figures.lag_max(self.fetcher.max_lag());
        }
        // A batch that failed to decode is reported after the records before it.
        if let Some(e) = self.fetcher.take_decode_error() {
            match records {
                Some(_) => self.errors.push(e),
                None => return Err(e),
            }
        }
        Ok(records.map(MembershipOrRecords::Records))
    }

    fn apply_event(&mut self, event: &MembershipEvent) {
        match event {
            MembershipEvent::Assigned(tps) => {
                self.figures.rebalanced();
                self.fetcher.assigned(tps, true);
                self.metadata_stale = true;
            }
            MembershipEvent::Revoked(tps) => self.fetcher.revoked(tps),
            MembershipEvent::Lost(tps) => {
                let lost: HashSet<&TopicPartition> = tps.iter().collect();
                let kept: HashSet<TopicPartition> = self
                    .fetcher
                    .partitions()
                    .filter(|tp| !lost.contains(tp))
                    .cloned()
                    .collect();
                // A lost partition's offsets must not be committed: its processed position
                // goes with it.
                self.fetcher.retain(&kept);
            }
        }
    }

    /// Drops what is buffered for partitions this member no longer owns, at once: a fenced
    /// member delivers nothing more of them (the partitions may be another member's already).
    pub(super) fn drop_unowned(&mut self) {
        // At almost every poll nothing is to drop: a check that copies and looks up no
        // partition (the fetcher's are in order).
        if self.membership.owns_all(self.fetcher.partitions()) {
            return;
        }
        let owned: HashSet<TopicPartition> = self.membership.owned().into_iter().collect();
        self.fetcher.retain(&owned);
    }

    /// `max.poll.interval.ms` is the application's processing budget (KIP-62): a member that
    /// has not called `poll` within it leaves the group, so its partitions move to a member
    /// that makes progress, and it learns `Lost` at its next `poll`, which rejoins. The Java
    /// consumer's heartbeat thread does the same ("consumer poll timeout has expired").
    pub(super) fn check_poll_interval(&mut self, now: Millis, tasks: &mut JoinSet<Completion>) {
        if self.polls_in_progress > 0 || !self.polled_once || self.left_for_poll_timeout {
            return;
        }
        if now.saturating_sub(self.last_poll) < self.config.max_poll_interval_ms {
            return;
        }
        warn!(
            group = %self.config.group_id,
            "no poll within max.poll.interval.ms ({} ms): leaving the group; the next poll \
             reports the partitions lost and rejoins",
            self.config.max_poll_interval_ms
        );
        self.left_for_poll_timeout = true;
        let leave = self.membership.leave_until_next_poll();
        self.drop_unowned();
        if let (Some(request), Some(link)) = (leave, self.coordinator.clone()) {
            // On the coordinator link, behind any heartbeat in flight, so the coordinator
            // sees the leave before the rejoin of the next poll.
            let timeout = self.config.request_timeout();
            let client_id = Arc::clone(&self.client_id);
            tasks.spawn(async move {
                if let Err(e) = membership_call(&link, request, client_id, timeout, timeout).await {
                    debug!(
                        "leaving the group after max.poll.interval.ms failed: {}",
                        ErrorChain(&e)
                    );
                }
                Completion::Left
            });
        }
    }
}
