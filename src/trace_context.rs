//! W3C Trace Context (<https://www.w3.org/TR/trace-context/>) carried in record headers, as
//! the OpenTelemetry messaging semantic conventions (v1.37.0, "Context propagation") ask of a
//! messaging client: the producer writes the context of the record's `send` span into
//! `traceparent` / `tracestate` headers, and the consumer makes the span it read from them the
//! parent of the record's `process` span. Opt-in (feature `opentelemetry` and the
//! `propagate_trace_context` setting of either client); the span contexts are those of
//! `tracing-opentelemetry`, the bridge the application installs.
//!
//! A header the application set itself under either name is never replaced: its own context
//! (or its own meaning of the name) wins.

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::protocol::record_batch::Header;

/// The header holding version, trace id, parent span id and flags.
pub const TRACEPARENT: &str = "traceparent";
/// The header holding vendor-specific trace state.
pub const TRACESTATE: &str = "tracestate";

/// Adds the context of `span` to `headers`: nothing when the span has no valid OpenTelemetry
/// context (no bridge installed, or the span disabled), nor under a name a header already has.
pub(crate) fn inject(span: &tracing::Span, headers: &mut Vec<Header>) {
    let context = span.context();
    let span_ref = context.span();
    let span_context = span_ref.span_context();
    if !span_context.is_valid() {
        return;
    }
    let has = |headers: &[Header], name: &str| headers.iter().any(|h| h.key == name);
    if !has(headers, TRACEPARENT) {
        headers.push(Header {
            key: TRACEPARENT.to_owned(),
            value: Some(traceparent(span_context).into()),
        });
    }
    let state = span_context.trace_state().header();
    if !state.is_empty() && !has(headers, TRACESTATE) {
        headers.push(Header {
            key: TRACESTATE.to_owned(),
            value: Some(state.into()),
        });
    }
}

/// Makes the context in `headers`, if any is valid, the parent of `span`. A malformed
/// `traceparent` is ignored (the span stays a root), as the W3C recommendation says.
pub(crate) fn adopt(headers: &[Header], span: &tracing::Span) {
    if let Some(remote) = extract(headers) {
        // An error means no OpenTelemetry layer sees this span: nothing to parent.
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
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
    let value = |name: &str| {
        headers
            .iter()
            .find(|h| h.key == name)
            .and_then(|h| h.value.as_deref())
            .and_then(|v| std::str::from_utf8(v).ok())
    };
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
