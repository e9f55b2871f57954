//! Trace context carried in record headers, as the OpenTelemetry messaging semantic
//! conventions (v1.37.0, "Context propagation") ask of a messaging client: the producer writes
//! the context of the record's `send` span into the headers, and the consumer makes the
//! context it reads from them the parent of the record's `process` span. Opt-in (feature
//! `opentelemetry` and the `propagate_trace_context` setting of either client); the span
//! contexts are those of `tracing-opentelemetry`, the bridge the application installs.
//!
//! The headers are written and read by the application's global propagator
//! (`opentelemetry::global::set_text_map_propagator`), so what it carries travels: W3C trace
//! context and baggage, B3, a vendor's own. Until the application sets one, the global
//! propagator is OpenTelemetry's no-op, which would carry nothing; the W3C Trace Context
//! (<https://www.w3.org/TR/trace-context/>) `traceparent` / `tracestate` headers are written and
//! read here then, the conventions' default.
//!
//! A header the application set itself is never replaced: its own context (or its own
//! meaning of the name) wins.

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::protocol::record_batch::Header;

/// The header holding version, trace id, parent span id and flags.
pub const TRACEPARENT: &str = "traceparent";
/// The header holding vendor-specific trace state.
pub const TRACESTATE: &str = "tracestate";

/// Adds the context of `span` to `headers` through the global propagator: nothing when the
/// span has no valid OpenTelemetry context (no bridge installed, or the span disabled), nor
/// under a name a header already has.
pub(crate) fn inject(span: &tracing::Span, headers: &mut Vec<Header>) {
    let context = span.context();
    if !context.span().span_context().is_valid() {
        return;
    }
    opentelemetry::global::get_text_map_propagator(|propagator| {
        if is_unset(propagator) {
            inject_w3c(context.span().span_context(), headers);
        } else {
            propagator.inject_context(&context, &mut HeaderInjector(headers));
        }
    });
}

/// Makes the context the global propagator reads from `headers`, if it holds a valid span
/// context, the parent of `span`. A malformed header is ignored (the span keeps its parent),
/// as the W3C recommendation says.
pub(crate) fn adopt(headers: &[Header], span: &tracing::Span) {
    let remote = opentelemetry::global::get_text_map_propagator(|propagator| {
        if is_unset(propagator) {
            extract(headers)
                .map(|remote| opentelemetry::Context::new().with_remote_span_context(remote))
        } else {
            let context = propagator.extract(&HeaderExtractor(headers));
            context.span().span_context().is_valid().then_some(context)
        }
    });
    if let Some(context) = remote {
        // An error means no OpenTelemetry layer sees this span: nothing to parent.
        let _ = span.set_parent(context);
    }
}

/// Whether `propagator` is the global default, OpenTelemetry's no-op: it names no field.
fn is_unset(propagator: &dyn TextMapPropagator) -> bool {
    propagator.fields().next().is_none()
}

/// Record headers as a propagator's carrier for writing: a name already present (the
/// application's own header) is left as it is.
struct HeaderInjector<'a>(&'a mut Vec<Header>);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if !self.0.iter().any(|h| h.key == key) {
            self.0.push(Header {
                key: key.to_owned(),
                value: Some(value.into()),
            });
        }
    }
}

/// Record headers as a propagator's carrier for reading: the first header of a name, when
/// its value is UTF-8.
struct HeaderExtractor<'a>(&'a [Header]);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        header_text(self.0, key)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.iter().map(|h| h.key.as_str()).collect()
    }
}

/// The value of the first header named `name`, if it is UTF-8.
fn header_text<'a>(headers: &'a [Header], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|h| h.key == name)
        .and_then(|h| h.value.as_deref())
        .and_then(|v| std::str::from_utf8(v).ok())
}

/// The W3C headers of `context`, under the names no header has yet.
fn inject_w3c(context: &SpanContext, headers: &mut Vec<Header>) {
    let mut carrier = HeaderInjector(headers);
    carrier.set(TRACEPARENT, traceparent(context));
    let state = context.trace_state().header();
    if !state.is_empty() {
        carrier.set(TRACESTATE, state);
    }
}

/// `00-{trace id}-{span id}-{flags}`, version 00 of the format.
fn traceparent(context: &SpanContext) -> String {
    format!(
        "00-{:032x}-{:016x}-{:02x}",
        context.trace_id(),
        context.span_id(),
        context.trace_flags()
    )
}

/// The remote span context of the first `traceparent` header (and the first `tracestate`),
/// if it parses and is valid.
pub(crate) fn extract(headers: &[Header]) -> Option<SpanContext> {
    let value = |name: &str| header_text(headers, name);
    let parent = value(TRACEPARENT)?.trim();
    let mut parts = parent.split('-');
    let (version, trace_id, span_id, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    // Version ff is forbidden; a later version may add fields after these four, version 00
    // has none.
    if !is_lower_hex(version, 2) || version == "ff" || (version == "00" && parts.next().is_some()) {
        return None;
    }
    if !is_lower_hex(trace_id, 32) || !is_lower_hex(span_id, 16) || !is_lower_hex(flags, 2) {
        return None;
    }
    let trace_id = TraceId::from_hex(trace_id).ok()?;
    let span_id = SpanId::from_hex(span_id).ok()?;
    let flags = TraceFlags::new(u8::from_str_radix(flags, 16).ok()?);
    let state = value(TRACESTATE)
        .and_then(|s| s.parse::<TraceState>().ok())
        .unwrap_or_default();
    let context = SpanContext::new(trace_id, span_id, flags, true, state);
    context.is_valid().then_some(context)
}

/// `len` lowercase hexadecimal digits, as the W3C format requires.
fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> Vec<Header> {
        pairs
            .iter()
            .map(|(k, v)| Header {
                key: (*k).to_owned(),
                value: Some(bytes::Bytes::copy_from_slice(v.as_bytes())),
            })
            .collect()
    }

    /// A configured propagator writes through the carrier (an application's own header kept)
    /// and reads back what it wrote, baggage included.
    #[test]
    fn a_propagator_writes_and_reads_through_the_headers() {
        use opentelemetry::KeyValue;
        use opentelemetry::baggage::BaggageExt;
        use opentelemetry::propagation::TextMapCompositePropagator;
        use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};

        let propagator = TextMapCompositePropagator::new(vec![
            Box::new(TraceContextPropagator::new()),
            Box::new(BaggagePropagator::new()),
        ]);
        assert!(!is_unset(&propagator));
        assert!(is_unset(
            &opentelemetry::trace::noop::NoopTextMapPropagator::new()
        ));
        let sent = extract(&headers(&[(
            TRACEPARENT,
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )]))
        .expect("valid");
        let context = opentelemetry::Context::new()
            .with_remote_span_context(sent.clone())
            .with_baggage(vec![KeyValue::new("tenant", "acme")]);
        let mut written = headers(&[("baggage", "mine=1")]);
        propagator.inject_context(&context, &mut HeaderInjector(&mut written));
        let names: Vec<&str> = written.iter().map(|h| h.key.as_str()).collect();
        assert_eq!(
            names,
            vec!["baggage", TRACEPARENT, TRACESTATE],
            "the application's baggage kept"
        );
        assert_eq!(header_text(&written, "baggage"), Some("mine=1"));

        let mut fresh = Vec::new();
        propagator.inject_context(&context, &mut HeaderInjector(&mut fresh));
        let read = propagator.extract(&HeaderExtractor(&fresh));
        assert_eq!(read.span().span_context().trace_id(), sent.trace_id());
        assert_eq!(
            read.baggage().get("tenant").map(|v| v.to_string()),
            Some("acme".to_owned())
        );
    }

    #[test]
    fn a_valid_traceparent_round_trips() {
        let sent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let context = extract(&headers(&[
            (TRACEPARENT, sent),
            (TRACESTATE, "congo=t61rcWkgMzE"),
        ]))
        .expect("valid");
        assert!(context.is_remote());
        assert!(context.is_sampled());
        assert_eq!(traceparent(&context), sent);
        assert_eq!(context.trace_state().header(), "congo=t61rcWkgMzE");
    }

    #[test]
    fn malformed_or_invalid_traceparents_are_ignored() {
        for bad in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01", // zero trace id
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", // zero span id
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", // version ff
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", // upper case
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", // extra field in 00
            "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", // sign accepted by from_str_radix
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "",
        ] {
            assert!(
                extract(&headers(&[(TRACEPARENT, bad)])).is_none(),
                "{bad:?} was accepted"
            );
        }
        assert!(extract(&headers(&[("other", "x")])).is_none());
    }
}
