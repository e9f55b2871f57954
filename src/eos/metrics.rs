//! The copy loop's observations through the `metrics` facade (see `crate::observe`), labelled
//! with its consumer's `client_id` and `group`. Like [`super::CopyLoopCounters`], the record
//! figures count only committed transactions.

use crate::observe::{self, Counter, Gauge, Histogram};

/// The copy loop's handles, resolved when the loop is made.
#[derive(Debug)]
pub(super) struct CopyLoopObserver {
    pub committed: Counter,
    pub aborted: Counter,
    pub records_in: Counter,
    pub records_out: Counter,
    pub records_dead_lettered: Counter,
    pub records_skipped: Counter,
    pub commit_latency: Histogram,
    pub source_lag: Gauge,
}

impl CopyLoopObserver {
    pub(super) fn new(client_id: &str, group: Option<&str>) -> Self {
        let labels = observe::client_labels(client_id, group);
        let counter = |name| observe::counter(name, &labels);
        Self {
            committed: counter("exactly.copy_loop.transactions-committed-total"),
            aborted: counter("exactly.copy_loop.transactions-aborted-total"),
            records_in: counter("exactly.copy_loop.records-in-total"),
            records_out: counter("exactly.copy_loop.records-out-total"),
            records_dead_lettered: counter("exactly.copy_loop.records-dead-lettered-total"),
            records_skipped: counter("exactly.copy_loop.records-skipped-total"),
            commit_latency: observe::histogram("exactly.copy_loop.commit-latency", &labels),
            source_lag: observe::gauge("exactly.copy_loop.source-lag", &labels),
        }
    }
}
