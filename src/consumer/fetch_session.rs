//! Incremental fetch sessions (KIP-227), sans-I/O: per broker, the partitions the broker
//! remembers for this consumer and the offsets and leader epochs it remembers them at, so a
//! Fetch names only the partitions whose offset or leader epoch moved (or that join the
//! session) and lists those that leave it
//! as forgotten; the broker answers only the partitions with something new (records, a moved
//! high watermark, last stable offset or log start, an error). With many partitions and most
//! of them idle, a fetch stops costing every partition on both sides.
//!
//! The leader epoch counts as a move (as in the Java client's `FetchSessionHandler`, which
//! compares the whole partition entry): the broker checks a partition against the
//! `current_leader_epoch` it remembers, so a partition not named again after its leader epoch
//! moved would be answered FENCED_LEADER_EPOCH for as long as the session lasts (KIP-320).
//!
//! The session always holds exactly the partitions of the last request: the broker fetches
//! every partition of a session, at the offset it remembers, whether or not a request names
//! it; a partition the consumer does not want fetched now (paused, two answers held, revoked,
//! led elsewhere) is forgotten, and named again, at its offset, when it is wanted back.
//!
//! What a fetch costs here does not grow with the session's size beyond one walk: the
//! session's partitions are kept sorted, and the wanted ones (sorted as the fetcher walks its
//! partitions, or sorted here) are compared with them side by side, with no look-up and no
//! map rebuilt per fetch (a consumer of a thousand partitions fetches many times a second).
//!
//! Epochs: a new session starts with a full fetch at epoch 0 (session id 0, or the old id to
//! close it); each answered incremental fetch moves the epoch on by one, wrapping to 1 after
//! `i32::MAX` as the broker does. FETCH_SESSION_ID_NOT_FOUND (the broker evicted or lost the
//! session) and INVALID_FETCH_SESSION_EPOCH make the next fetch a full one in a new session;
//! so does a fetch that got no answer (whether the broker applied it is unknown), closing
//! the old session by its id. The Java client's `FetchSessionHandler` keeps the same rules.

use std::collections::HashMap;

use tracing::debug;

use crate::protocol::error_code::ErrorCode;
use crate::types::{BrokerId, TopicPartition};

/// A partition in a fetch request: which partition, the token it was asked under, the offset.
pub type Fetched = (TopicPartition, u64, i64);

/// The epoch of a fetch that starts a session (KIP-227's `INITIAL_EPOCH`).
const INITIAL_EPOCH: i32 = 0;

/// What the broker remembers of one session, as far as this consumer knows.
#[derive(Debug, Default)]
struct Session {
    /// The broker's id for it; 0 before the broker gave one.
    id: i32,
    /// The epoch of the next fetch: [`INITIAL_EPOCH`] for a full fetch.
    epoch: i32,
    /// The partitions in the session, in order, with the offsets the broker fetches them from
    /// and the leader epochs it checks them against.
    partitions: Vec<(TopicPartition, (i64, i32))>,
    /// The partitions of the fetch in flight, as the session holds them once it is answered.
    sent: Option<Vec<(TopicPartition, (i64, i32))>>,
}

/// One fetch of a session: what to put in the request.
#[derive(Debug, PartialEq, Eq)]
pub struct SessionFetch {
    /// The request's session id.
    pub session_id: i32,
    /// The request's session epoch.
    pub epoch: i32,
    /// Indexes into the wanted partitions of those the request names (all of them in a full
    /// fetch; in an incremental one, those new to the session or at a new offset).
    pub named: Vec<usize>,
    /// The partitions leaving the session.
    pub forgotten: Vec<TopicPartition>,
}

/// What the fetch sessions did, for the metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FetchSessionCounts {
    /// Sessions a broker opened.
    pub opened: u64,
    /// Incremental fetches answered.
    pub incremental: u64,
    /// Answers that said the session was gone or out of step (FETCH_SESSION_ID_NOT_FOUND,
    /// INVALID_FETCH_SESSION_EPOCH).
    pub errors: u64,
}

/// The fetch sessions of one consumer, one per broker it fetches from.
#[derive(Debug, Default)]
pub struct FetchSessions {
    sessions: HashMap<BrokerId, Session>,
    counts: FetchSessionCounts,
}

impl FetchSessions {
    /// The next fetch to `broker` for `wanted` (each partition once), each carrying the
    /// leader epoch `leader_epoch` gives it: a full fetch in a new session, or an incremental
    /// one. One fetch per broker is in flight at a time; its outcome comes back through
    /// [`FetchSessions::answered`] or [`FetchSessions::failed`].
    pub fn next_fetch(
        &mut self,
        broker: BrokerId,
        wanted: &[Fetched],
        leader_epoch: impl Fn(&TopicPartition) -> i32,
    ) -> SessionFetch {
        let session = self.sessions.entry(broker).or_default();
        // `wanted` in partition order: as given when it is (the fetcher walks its sorted
        // partitions), else sorted here (a manual assignment's own order).
        let mut order: Vec<usize> = (0..wanted.len()).collect();
        if !wanted.is_sorted_by(|a, b| a.0 < b.0) {
            order.sort_by(|&a, &b| wanted[a].0.cmp(&wanted[b].0));
        }
        let now: Vec<(TopicPartition, (i64, i32))> = order
            .iter()
            .map(|&i| {
                let (tp, _, offset) = &wanted[i];
                (tp.clone(), (*offset, leader_epoch(tp)))
            })
            .collect();
        let fetch = if session.epoch == INITIAL_EPOCH {
            SessionFetch {
                session_id: session.id,
                epoch: INITIAL_EPOCH,
                named: (0..wanted.len()).collect(),
                forgotten: Vec::new(),
            }
        } else {
            // One walk beside the session's partitions: those before a wanted one are no
            // longer wanted (forgotten); a wanted one is named unless the session holds it
            // at the same offset and leader epoch.
            let mut named = Vec::new();
            let mut forgotten = Vec::new();
            let mut held = session.partitions.iter().peekable();
            for (&i, (tp, at)) in order.iter().zip(&now) {
                while let Some((gone, _)) = held.next_if(|(h, _)| h < tp) {
                    forgotten.push(gone.clone());
                }
                match held.next_if(|(h, _)| h == tp) {
                    Some((_, was)) if was == at => {}
                    _ => named.push(i),
                }
            }
            forgotten.extend(held.map(|(tp, _)| tp.clone()));
            named.sort_unstable();
            SessionFetch {
                session_id: session.id,
                epoch: session.epoch,
                named,
                forgotten,
            }
        };
        session.sent = Some(now);
        fetch
    }

    /// The answer to the fetch in flight to `broker`: its top-level error and session id.
    /// Returns whether the answer belongs to the session (a session error: its partitions
    /// carry nothing, and the next fetch is a full one).
    pub fn answered(&mut self, broker: BrokerId, error: ErrorCode, session_id: i32) -> bool {
        let session = self.sessions.entry(broker).or_default();
        let sent = session.sent.take().unwrap_or_default();
        match error {
            ErrorCode::NONE => {
                if session.epoch == INITIAL_EPOCH {
                    session.id = session_id;
                    if session_id != 0 {
                        self.counts.opened += 1;
                        debug!("broker {broker} opened fetch session {session_id}");
                    }
                } else {
                    self.counts.incremental += 1;
                }
                if session.id == 0 || session_id != session.id {
                    // No session (the broker's cache is full, or sessions are off): every
                    // fetch is a full one, each asking for a session again.
                    *session = Session::default();
                } else {
                    session.partitions = sent;
                    session.epoch = next_epoch(session.epoch);
                }
                true
            }
            ErrorCode::FETCH_SESSION_ID_NOT_FOUND | ErrorCode::INVALID_FETCH_SESSION_EPOCH => {
                *session = Session::default();
                self.counts.errors += 1;
                false
            }
            _ => {
                // Another top-level error: start over, closing the session the broker may
                // still hold.
                self.failed(broker);
                true
            }
        }
    }

    /// What the sessions did so far.
    pub fn counts(&self) -> FetchSessionCounts {
        self.counts
    }

    /// The fetch in flight to `broker` got no answer (or `broker` went away): whether the
    /// broker applied it is unknown, so the next fetch is a full one that closes the old
    /// session by its id.
    pub fn failed(&mut self, broker: BrokerId) {
        if let Some(session) = self.sessions.get_mut(&broker) {
            *session = Session {
                id: session.id,
                ..Session::default()
            };
        }
    }
}

/// The epoch after `epoch`: 1 after `i32::MAX`, since 0 would start a new session.
fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX { 1 } else { epoch + 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    /// Leader epochs unknown (-1) everywhere.
    fn no_epochs(_: &TopicPartition) -> i32 {
        -1
    }

    #[test]
    fn a_partition_whose_leader_epoch_moved_is_named_again() {
        let mut s = FetchSessions::default();
        let b = 1;
        let all = wanted(&[(0, 10), (1, 20)]);
        s.next_fetch(b, &all, |_| 4);
        s.answered(b, ErrorCode::NONE, 42);
        let same = s.next_fetch(b, &all, |_| 4);
        assert!(same.named.is_empty());
        s.answered(b, ErrorCode::NONE, 42);
        // Partition 1's leader moved on: named again at the same offset, with the new epoch.
        let moved = s.next_fetch(b, &all, |tp| if tp.partition == 1 { 5 } else { 4 });
        assert_eq!(moved.named, vec![1]);
    }

    fn wanted(offsets: &[(i32, i64)]) -> Vec<Fetched> {
        offsets.iter().map(|&(p, o)| (tp(p), 0, o)).collect()
    }

    #[test]
    fn a_session_names_only_what_moved_and_forgets_what_left() {
        let mut s = FetchSessions::default();
        let b: BrokerId = 1;
        let first = s.next_fetch(b, &wanted(&[(0, 10), (1, 20), (2, 30)]), no_epochs);
        assert_eq!((first.session_id, first.epoch), (0, INITIAL_EPOCH));
        assert_eq!(
            first.named,
            vec![0, 1, 2],
            "a full fetch names every partition"
        );
        assert!(s.answered(b, ErrorCode::NONE, 77));
        // Partition 0 got records (its offset moved), 1 is idle, 2 left (paused).
        let next = s.next_fetch(b, &wanted(&[(0, 15), (1, 20)]), no_epochs);
        assert_eq!((next.session_id, next.epoch), (77, 1));
        assert_eq!(next.named, vec![0], "only the partition whose offset moved");
        assert_eq!(next.forgotten, vec![tp(2)]);
        assert!(s.answered(b, ErrorCode::NONE, 77));
        // Partition 2 comes back: named again, at its offset.
        let again = s.next_fetch(b, &wanted(&[(0, 15), (1, 20), (2, 30)]), no_epochs);
        assert_eq!(again.epoch, 2);
        assert_eq!(again.named, vec![2]);
        assert!(again.forgotten.is_empty());
        assert_eq!(
            s.counts(),
            FetchSessionCounts {
                opened: 1,
                incremental: 1,
                errors: 0
            }
        );
    }

    #[test]
    fn wanted_partitions_in_any_order_are_compared_alike() {
        // A manual assignment fetches in the user's order; the session compares by partition.
        let mut s = FetchSessions::default();
        let b: BrokerId = 1;
        s.next_fetch(b, &wanted(&[(3, 30), (0, 10), (5, 50), (1, 10)]), no_epochs);
        assert!(s.answered(b, ErrorCode::NONE, 9));
        // 5 and 1 stay, 0 moved, 3 left, 4 joins.
        let next = s.next_fetch(b, &wanted(&[(5, 50), (4, 40), (0, 11), (1, 10)]), no_epochs);
        assert_eq!(next.named, vec![1, 2], "partitions 4 (new) and 0 (moved)");
        assert_eq!(next.forgotten, vec![tp(3)]);
        assert!(s.answered(b, ErrorCode::NONE, 9));
        let same = s.next_fetch(b, &wanted(&[(0, 11), (1, 10), (4, 40), (5, 50)]), no_epochs);
        assert!(same.named.is_empty() && same.forgotten.is_empty());
    }

    #[test]
    fn session_errors_and_lost_answers_start_a_full_fetch() {
        let mut s = FetchSessions::default();
        let b: BrokerId = 1;
        let all = wanted(&[(0, 10), (1, 20)]);
        s.next_fetch(b, &all, no_epochs);
        s.answered(b, ErrorCode::NONE, 5);
        s.next_fetch(b, &all, no_epochs);
        assert!(
            !s.answered(b, ErrorCode::FETCH_SESSION_ID_NOT_FOUND, 0),
            "a session error's answer carries nothing"
        );
        let full = s.next_fetch(b, &all, no_epochs);
        assert_eq!((full.session_id, full.epoch), (0, INITIAL_EPOCH));
        assert_eq!(full.named, vec![0, 1]);
        s.answered(b, ErrorCode::NONE, 6);
        s.next_fetch(b, &all, no_epochs);
        assert!(!s.answered(b, ErrorCode::INVALID_FETCH_SESSION_EPOCH, 0));
        assert_eq!(s.next_fetch(b, &all, no_epochs).epoch, INITIAL_EPOCH);
        s.answered(b, ErrorCode::NONE, 7);
        // No answer: the next full fetch closes session 7 by its id.
        s.next_fetch(b, &all, no_epochs);
        s.failed(b);
        let reopen = s.next_fetch(b, &all, no_epochs);
        assert_eq!((reopen.session_id, reopen.epoch), (7, INITIAL_EPOCH));
        assert_eq!(reopen.named, vec![0, 1]);
        assert_eq!(s.counts().errors, 2);
        assert_eq!(s.counts().opened, 3);
    }

    #[test]
    fn without_a_session_from_the_broker_every_fetch_is_full() {
        let mut s = FetchSessions::default();
        let b: BrokerId = 1;
        let all = wanted(&[(0, 10)]);
        for _ in 0..3 {
            let fetch = s.next_fetch(b, &all, no_epochs);
            assert_eq!((fetch.session_id, fetch.epoch), (0, INITIAL_EPOCH));
            assert_eq!(fetch.named, vec![0]);
            s.answered(b, ErrorCode::NONE, 0);
        }
    }

    #[test]
    fn the_epoch_wraps_to_one() {
        assert_eq!(next_epoch(1), 2);
        assert_eq!(next_epoch(i32::MAX), 1);
    }
}
