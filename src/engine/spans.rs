//! The producer's tracing spans in the OpenTelemetry messaging conventions' batching model
//! (semantic conventions v1.37, "Messaging spans", and its Kafka page): a `create` span per
//! record, opened by `send`; a `send` span per Produce request, which links to the `create`
//! spans of every record it carries; and, between them, an internal `kafka.batch` span per
//! batch with the producer identity under `exactly.*` (the `messaging.kafka.*` namespace is
//! the conventions' and names no producer id, epoch or sequence).
//!
//! A batch keeps its records' `create` spans open until it resolves, so each records its own
//! outcome: its offset (`messaging.kafka.offset`) or the `error.type` of its failure. Only spans
//! a subscriber enabled are kept: without one the per-record cost is a check.

use tracing::Span;

use super::completion::BatchOutcome;
use crate::error::Error;
use crate::protocol::record_batch::SealedBatch;
use crate::types::TopicPartition;

/// A batch's `kafka.batch` span, with the conventions' destination attributes
/// (`messaging.destination.partition.id` is a string); the count, the identity and the
/// outcome are recorded as they become known.
fn batch_span(tp: &TopicPartition) -> Span {
    tracing::debug_span!(
        parent: None,
        "kafka.batch",
        otel.kind = "internal",
        messaging.system = "kafka",
        messaging.destination.name = %tp.topic,
        messaging.destination.partition.id = %tp.partition,
        messaging.batch.message_count = tracing::field::Empty,
        exactly.producer_id = tracing::field::Empty,
        exactly.producer_epoch = tracing::field::Empty,
        exactly.base_sequence = tracing::field::Empty,
        messaging.kafka.offset = tracing::field::Empty,
        error.type = tracing::field::Empty,
    )
}

/// The spans of one batch, from its first record to its outcome.
#[derive(Debug)]
pub struct BatchSpans {
    /// `kafka.batch`: disabled (free) unless a subscriber wants DEBUG spans of `exactly`;
    /// for a part of a split batch, opened at its first stamp.
    batch: Span,
    /// The records' `create` spans that a subscriber enabled, with each record's index in
    /// the batch (its offset is the batch's base offset plus the index).
    records: Vec<(i32, Span)>,
}

impl Default for BatchSpans {
    fn default() -> Self {
        Self {
            batch: Span::none(),
            records: Vec::new(),
        }
    }
}

impl BatchSpans {
    /// The spans of a batch of `tp` opened now.
    pub(crate) fn open(tp: &TopicPartition) -> Self {
        Self {
            batch: batch_span(tp),
            records: Vec::new(),
        }
    }

    /// The record at `index` was appended under `record`, its `create` span (or a disabled
    /// one). Without one the batch links to the caller's current span, so an application's
    /// own span still leads to the batch.
    pub(crate) fn appended(&mut self, index: i32, record: &Span) {
        if record.is_disabled() {
            if !self.batch.is_disabled() {
                self.batch.follows_from(Span::current());
            }
            return;
        }
        if !self.batch.is_disabled() {
            self.batch.follows_from(record);
        }
        self.records.push((index, record.clone()));
    }

    /// The batch went out in the Produce request whose span is `request`: the request links
    /// to each record's `create` span and the batch to the request (one link per attempt).
    pub(crate) fn sent_in(&self, request: &Span) {
        if request.is_disabled() {
            return;
        }
        for (_, record) in &self.records {
            request.follows_from(record);
        }
        self.batch.follows_from(request);
    }

    /// `batch` was stamped (again, after an epoch bump: P2) with its producer identity.
    pub(crate) fn stamped(&mut self, tp: &TopicPartition, batch: &SealedBatch) {
        if self.batch.is_none() {
            self.batch = batch_span(tp);
        }
        if self.batch.is_disabled() {
            return;
        }
        let span = &self.batch;
        span.record("messaging.batch.message_count", batch.record_count());
        span.record("exactly.producer_id", batch.producer_id());
        span.record("exactly.producer_epoch", batch.producer_epoch());
        span.record("exactly.base_sequence", batch.base_sequence());
    }

    /// The batch resolved: every span records the outcome, and the records' spans end.
    pub(crate) fn resolved(self, outcome: &BatchOutcome) {
        match outcome {
            Ok(ack) if ack.base_offset >= 0 => {
                self.batch.record("messaging.kafka.offset", ack.base_offset);
                for (index, record) in &self.records {
                    record.record(
                        "messaging.kafka.offset",
                        ack.base_offset + i64::from(*index),
                    );
                }
            }
            // A duplicate answered without offsets: written, at offsets not told.
            Ok(_) => {}
            Err(error) => self.failed(error),
        }
    }

    /// The batch failed with `error` (a bounded name, never the text).
    pub(crate) fn failed(self, error: &Error) {
        let kind = error.type_name();
        self.batch.record("error.type", kind);
        for (_, record) in &self.records {
            record.record("error.type", kind);
        }
    }

    /// The spans of the two parts of a batch split before its record `at`: each keeps its
    /// records' spans; the batch spans open at the parts' first stamps.
    pub(crate) fn split(self, at: i32) -> (Self, Self) {
        let (first, second): (Vec<_>, Vec<_>) =
            self.records.into_iter().partition(|(index, _)| *index < at);
        let second = second
            .into_iter()
            .map(|(index, span)| (index - at, span))
            .collect();
        (
            Self {
                batch: Span::none(),
                records: first,
            },
            Self {
                batch: Span::none(),
                records: second,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing_subscriber::layer::{Context, SubscriberExt};
    use tracing_subscriber::registry::LookupSpan;

    use super::*;

    fn indexes(spans: &BatchSpans) -> Vec<i32> {
        spans.records.iter().map(|(index, _)| *index).collect()
    }

    /// What the spans told a subscriber: `(span, field, value)` for each value recorded after
    /// the span opened, and `(span, span it follows from)` for each link, by span name.
    #[derive(Clone, Default)]
    struct Told {
        recorded: Arc<Mutex<Vec<(String, String, String)>>>,
        links: Arc<Mutex<Vec<(String, String)>>>,
    }

    struct FieldValues<'a>(&'a str, &'a Mutex<Vec<(String, String, String)>>);

    impl Visit for FieldValues<'_> {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            let told = (
                self.0.to_owned(),
                field.name().to_owned(),
                format!("{value:?}"),
            );
            self.1.lock().unwrap().push(told);
        }
    }

    impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Told {
        fn on_new_span(&self, _: &Attributes<'_>, _: &Id, _: Context<'_, S>) {}

        fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
            let name = ctx.span(id).map(|s| s.name()).unwrap_or_default();
            values.record(&mut FieldValues(name, &self.recorded));
        }

        fn on_follows_from(&self, id: &Id, follows: &Id, ctx: Context<'_, S>) {
            let name = |id| {
                ctx.span(id)
                    .map(|s| s.name().to_owned())
                    .unwrap_or_default()
            };
            self.links.lock().unwrap().push((name(id), name(follows)));
        }
    }

    /// Without a `create` span of its own, a record's batch links to the application's span
    /// the record was sent under; with one, to that. On success each `create` span records
    /// its record's offset: the batch's base offset plus the record's index.
    #[test]
    fn a_batch_links_to_its_records_and_each_records_its_offset() {
        let told = Told::default();
        let subscriber = tracing_subscriber::registry().with(told.clone());
        let _default = tracing::subscriber::set_default(subscriber);
        let mut spans = BatchSpans::open(&TopicPartition::new("t", 0));
        let application = tracing::info_span!("application");
        application.in_scope(|| spans.appended(0, &Span::none()));
        let create = tracing::trace_span!("create", messaging.kafka.offset = tracing::field::Empty);
        spans.appended(1, &create);
        spans.resolved(&Ok(super::super::completion::BatchAck {
            base_offset: 40,
            log_append_time: -1,
        }));
        let links = told.links.lock().unwrap().clone();
        let link = |to: &str| ("kafka.batch".to_owned(), to.to_owned());
        assert_eq!(links, [link("application"), link("create")]);
        let recorded = told.recorded.lock().unwrap().clone();
        let offset = |span: &str, at: &str| {
            (
                span.to_owned(),
                "messaging.kafka.offset".to_owned(),
                at.to_owned(),
            )
        };
        assert_eq!(
            recorded,
            [offset("kafka.batch", "40"), offset("create", "41")]
        );
    }

    /// A batch acknowledged without offsets (a duplicate the broker answered without them, or
    /// acks=0) records none: written, at offsets it was not told.
    #[test]
    fn a_batch_acknowledged_without_offsets_records_none() {
        let told = Told::default();
        let subscriber = tracing_subscriber::registry().with(told.clone());
        let _default = tracing::subscriber::set_default(subscriber);
        let mut spans = BatchSpans::open(&TopicPartition::new("t", 0));
        let create = tracing::trace_span!("create", messaging.kafka.offset = tracing::field::Empty);
        spans.appended(0, &create);
        spans.resolved(&Ok(super::super::completion::BatchAck {
            base_offset: -1,
            log_append_time: -1,
        }));
        assert!(told.recorded.lock().unwrap().is_empty());
    }

    /// Each attempt's Produce request links to the records' `create` spans and the batch to
    /// the request; a failed batch records the error's type on its span and its records'.
    #[test]
    fn a_sent_batch_links_its_request_and_a_failed_one_records_the_error_type() {
        let told = Told::default();
        let subscriber = tracing_subscriber::registry().with(told.clone());
        let _default = tracing::subscriber::set_default(subscriber);
        let mut spans = BatchSpans::open(&TopicPartition::new("t", 0));
        let create = tracing::trace_span!("create", error.type = tracing::field::Empty);
        spans.appended(0, &create);
        let request = tracing::debug_span!("produce");
        spans.sent_in(&request);
        spans.sent_in(&Span::none());
        let link = |from: &str, to: &str| (from.to_owned(), to.to_owned());
        assert_eq!(
            told.links.lock().unwrap().clone(),
            [
                link("kafka.batch", "create"),
                link("produce", "create"),
                link("kafka.batch", "produce"),
            ]
        );
        spans.resolved(&Err(Error::Closed));
        let kind = format!("{:?}", Error::Closed.type_name());
        let error_type = |span: &str| (span.to_owned(), "error.type".to_owned(), kind.clone());
        assert_eq!(
            told.recorded.lock().unwrap().clone(),
            [error_type("kafka.batch"), error_type("create")]
        );
    }

    /// Each stamping (the first, and again after an epoch bump: P2) records on the batch's
    /// span the identity it goes out under.
    #[test]
    fn a_stamped_batch_records_its_identity() {
        let told = Told::default();
        let subscriber = tracing_subscriber::registry().with(told.clone());
        let _default = tracing::subscriber::set_default(subscriber);
        let tp = TopicPartition::new("t", 0);
        let mut spans = BatchSpans::open(&tp);
        let mut builder = crate::protocol::record_batch::BatchBuilder::new(1000, 256);
        builder.append(0, None, Some(b"v"), &[]);
        let mut batch = builder.seal(false);
        batch.stamp(9, 2, 5);
        spans.stamped(&tp, &batch);
        let recorded = told.recorded.lock().unwrap().clone();
        let field =
            |name: &str, value: &str| ("kafka.batch".to_owned(), name.to_owned(), value.to_owned());
        assert_eq!(
            recorded,
            [
                field("messaging.batch.message_count", "1"),
                field("exactly.producer_id", "9"),
                field("exactly.producer_epoch", "2"),
                field("exactly.base_sequence", "5"),
            ]
        );
    }

    #[test]
    fn a_split_hands_each_part_its_records_at_their_new_indexes() {
        // Any subscriber enables the spans (the registry keeps every one).
        let _default = tracing::subscriber::set_default(tracing_subscriber::registry());
        let mut spans = BatchSpans::open(&TopicPartition::new("t", 0));
        for index in 0..5 {
            let record = tracing::trace_span!("create");
            spans.appended(index, &record);
        }
        assert_eq!(indexes(&spans), [0, 1, 2, 3, 4]);
        let (first, second) = spans.split(2);
        assert_eq!(indexes(&first), [0, 1]);
        assert_eq!(indexes(&second), [0, 1, 2]);
        assert!(first.batch.is_none() && second.batch.is_none());
    }

    #[test]
    fn disabled_record_spans_are_not_kept() {
        let mut spans = BatchSpans::open(&TopicPartition::new("t", 0));
        spans.appended(0, &Span::none());
        assert!(spans.records.is_empty());
    }
}
