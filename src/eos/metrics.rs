//! The copy loop's observations through the `metrics` facade (see `crate::observe`), labelled
//! with its consumer's `client_id` and `group`. Like [`super::CopyLoopCounters`], the record
//! figures count only committed transactions. The crate's own series sit under `exactly.*`
//! in the OpenTelemetry naming style (dots, no `-total`, which exporters add themselves);
//! the processing of each poll is also the conventions' `messaging.process.duration`.

use crate::observe::semconv::{self, Operation};
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
    /// Seconds.
    pub commit_duration: Histogram,
    pub source_lag: Gauge,
    /// `messaging.process.duration`, seconds: one poll's records transformed and sent.
    pub process_duration: Histogram,
}

impl CopyLoopObserver {
    pub(super) fn new(client_id: &str, group: Option<&str>) -> Self {
        semconv::describe();
        let labels = observe::client_labels(client_id, group);
        let counter = |name| observe::counter(name, &labels);
        Self {
            committed: counter("exactly.copy_loop.transactions.committed"),
            aborted: counter("exactly.copy_loop.transactions.aborted"),
            records_in: counter("exactly.copy_loop.records.in"),
            records_out: counter("exactly.copy_loop.records.out"),
            records_dead_lettered: counter("exactly.copy_loop.records.dead_lettered"),
            records_skipped: counter("exactly.copy_loop.records.skipped"),
            commit_duration: observe::histogram("exactly.copy_loop.commit.duration", &labels),
            source_lag: observe::gauge("exactly.copy_loop.source.lag", &labels),
            process_duration: observe::histogram(
                semconv::PROCESS_DURATION,
                &semconv::operation_labels(client_id, Operation::Process, group),
            ),
        }
    }
}
