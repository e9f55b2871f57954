//! What the consumer tells the application besides records: its hooks (the shape of the Java
//! client's `ConsumerInterceptor.onConsume` and its `ConsumerRebalanceListener`, and of
//! franz-go's fetch hooks), and its spans, named and attributed as the OpenTelemetry messaging
//! semantic conventions v1.37.0 for Kafka say: a `poll` receive span (kind client) around each
//! poll, and the `process {topic}` span (kind consumer) an application enters per record
//! ([`crate::Consumer::process_span`]).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::ConsumerRecord;
use super::membership::{MembershipEvent, MembershipOrRecords};
use crate::error::Result;
use crate::observe::semconv::{self, Operation};
use crate::observe::{self, Histogram};
use crate::types::{OffsetToCommit, TopicPartition};

/// A change of the partitions the member owns, as [`ConsumerHooks::on_rebalance`] sees it
/// (the same changes [`crate::ConsumerEvent`] hands out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rebalance<'a> {
    /// Partitions newly assigned.
    Assigned(&'a [TopicPartition]),
    /// Partitions about to be given up (still owned until the next poll).
    Revoked(&'a [TopicPartition]),
    /// Partitions already gone.
    Lost(&'a [TopicPartition]),
}

/// Called by the consumer as it hands things to the application. Every method has an empty
/// default.
///
/// Both run on the application's task, inside the `poll` (or the stream's `next`) that is
/// about to return, before the application sees what they saw: a hook must not block nor
/// call the consumer (which that poll borrows). A panic in a hook is the application's.
pub trait ConsumerHooks: Send + Sync + 'static {
    /// A poll is handing out `records` (in offset order per partition).
    fn on_records(&self, records: &[ConsumerRecord]) {
        let _ = records;
    }

    /// A poll is handing out a change of the assignment. Streams of records only
    /// ([`crate::Consumer::records`]) skip these events, but the hook still sees them.
    fn on_rebalance(&self, change: Rebalance<'_>) {
        let _ = change;
    }
}

/// The application's consumer hooks, as the builder keeps them.
#[derive(Clone)]
pub(crate) struct HooksHandle(pub(crate) Arc<dyn ConsumerHooks>);

impl fmt::Debug for HooksHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ConsumerHooks")
    }
}

/// What the consumer's spans and hooks need, fixed when it is built.
pub(crate) struct Observer {
    client_id: String,
    /// Empty without a group.
    group_id: String,
    hooks: Option<Arc<dyn ConsumerHooks>>,
    #[cfg(feature = "opentelemetry")]
    propagate_trace_context: bool,
    /// `messaging.process.duration`, seconds: the application's processing of one record
    /// through [`crate::Consumer::process`]. Held here, beside the spans, so timing a record
    /// takes no lock of the consumer's state.
    process_duration: Histogram,
}

impl Observer {
    /// The observer of a consumer with this `client.id` and `group.id` (empty without a
    /// group); `propagate_trace_context` (with the `opentelemetry` feature) links process
    /// spans to the context records carry.
    pub(crate) fn new(
        client_id: &str,
        group_id: &str,
        hooks: Option<HooksHandle>,
        propagate_trace_context: bool,
    ) -> Self {
        #[cfg(not(feature = "opentelemetry"))]
        let _ = propagate_trace_context;
        semconv::describe();
        let group = (!group_id.is_empty()).then_some(group_id);
        Self {
            client_id: client_id.to_owned(),
            group_id: group_id.to_owned(),
            hooks: hooks.map(|h| h.0),
            #[cfg(feature = "opentelemetry")]
            propagate_trace_context,
            process_duration: observe::histogram(
                semconv::PROCESS_DURATION,
                &semconv::operation_labels(client_id, Operation::Process, group),
            ),
        }
    }

    /// The application processed one record in `elapsed`.
    pub(crate) fn processed(&self, elapsed: Duration) {
        self.process_duration.record(elapsed.as_secs_f64());
    }

    /// The receive span of one poll: `poll` (a poll may take several topics, so the name is
    /// the operation's alone), kind client; the destination is recorded when every record
    /// came from one topic, the record count always. DEBUG: one per poll.
    pub(crate) fn receive_span(&self) -> tracing::Span {
        let span = tracing::debug_span!(
            "poll",
            otel.kind = "client",
            messaging.system = "kafka",
            messaging.operation.type = "receive",
            messaging.operation.name = "poll",
            messaging.client.id = %self.client_id,
            messaging.consumer.group.name = tracing::field::Empty,
            messaging.destination.name = tracing::field::Empty,
            messaging.batch.message_count = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        if !self.group_id.is_empty() {
            span.record("messaging.consumer.group.name", self.group_id.as_str());
        }
        span
    }

    /// The settle span of one offset commit: `commit`, kind client, with the offsets'
    /// count and their topic when there is one (the conventions' `settle` operation: Kafka
    /// settles by committing offsets), and the coordinator's `server.address` /
    /// `server.port`, recorded by the attempt that reaches it. DEBUG: one per commit.
    pub(crate) fn settle_span(&self, offsets: &[OffsetToCommit]) -> tracing::Span {
        let span = tracing::debug_span!(
            "commit",
            otel.kind = "client",
            messaging.system = "kafka",
            messaging.operation.type = "settle",
            messaging.operation.name = "commit",
            messaging.client.id = %self.client_id,
            messaging.consumer.group.name = tracing::field::Empty,
            messaging.destination.name = tracing::field::Empty,
            messaging.batch.message_count = offsets.len(),
            server.address = tracing::field::Empty,
            server.port = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        if !span.is_disabled() {
            if !self.group_id.is_empty() {
                span.record("messaging.consumer.group.name", self.group_id.as_str());
            }
            if let Some(first) = offsets.first()
                && offsets
                    .iter()
                    .all(|o| o.partition.topic == first.partition.topic)
            {
                span.record("messaging.destination.name", &*first.partition.topic);
            }
        }
        span
    }

    /// Records what a poll found on its span and tells the hooks.
    pub(crate) fn polled(&self, span: &tracing::Span, found: &Result<Option<MembershipOrRecords>>) {
        match found {
            Ok(Some(MembershipOrRecords::Records(records))) => {
                if !span.is_disabled() {
                    span.record("messaging.batch.message_count", records.len());
                    if let Some(first) = records.first()
                        && records.iter().all(|r| r.topic == first.topic)
                    {
                        span.record("messaging.destination.name", &*first.topic);
                    }
                }
                if let Some(hooks) = &self.hooks {
                    hooks.on_records(records);
                }
            }
            Ok(Some(MembershipOrRecords::Membership(event))) => {
                if let Some(hooks) = &self.hooks {
                    hooks.on_rebalance(match event {
                        MembershipEvent::Assigned(p) => Rebalance::Assigned(p),
                        MembershipEvent::Revoked(p) => Rebalance::Revoked(p),
                        MembershipEvent::Lost(p) => Rebalance::Lost(p),
                    });
                }
            }
            Ok(None) => {}
            Err(error) => {
                span.record("error.type", error.type_name());
            }
        }
    }

    /// The `process {topic}` span of one record: see [`crate::Consumer::process_span`].
    pub(crate) fn process_span(&self, record: &ConsumerRecord) -> tracing::Span {
        let span = tracing::info_span!(
            "process",
            otel.name = tracing::field::Empty,
            otel.kind = "consumer",
            messaging.system = "kafka",
            messaging.operation.type = "process",
            messaging.operation.name = "process",
            messaging.destination.name = %record.topic,
            messaging.destination.partition.id = %record.partition,
            messaging.kafka.offset = record.offset,
            messaging.client.id = %self.client_id,
            messaging.consumer.group.name = tracing::field::Empty,
            messaging.kafka.message.tombstone = tracing::field::Empty,
        );
        if span.is_disabled() {
            return span;
        }
        span.record("otel.name", format!("process {}", record.topic));
        if !self.group_id.is_empty() {
            span.record("messaging.consumer.group.name", self.group_id.as_str());
        }
        if record.value.is_none() {
            span.record("messaging.kafka.message.tombstone", true);
        }
        #[cfg(feature = "opentelemetry")]
        if self.propagate_trace_context {
            crate::trace_context::adopt(&record.headers, &span);
        }
        span
    }
}
