//! The crate's tracing events, captured for a test that counts what happened inside a call it
//! cannot see into (e.g. how often `CopyLoop::step` was handed `Lost`).

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};

/// One event: its target, message and other fields (`name=value`, Debug-formatted).
#[derive(Debug, Clone, Default)]
pub struct CapturedEvent {
    /// The module that emitted it.
    pub target: String,
    /// Its message.
    pub message: String,
    /// Its other fields.
    pub fields: Vec<(String, String)>,
}

impl CapturedEvent {
    /// The Debug text of field `name`, if it has one.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The events of the `exactly` crate (every level) seen by a [`capture`] subscriber.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<CapturedEvent>>>);

impl Captured {
    /// The events so far.
    pub fn events(&self) -> Vec<CapturedEvent> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl<S: tracing::Subscriber> Layer<S> for Captured {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let target = event.metadata().target();
        if !target.starts_with("exactly") {
            return;
        }
        let mut captured = CapturedEvent {
            target: target.to_owned(),
            ..CapturedEvent::default()
        };
        event.record(&mut captured);
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(captured);
    }
}

impl Visit for CapturedEvent {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let mut text = String::new();
        let _ = write!(text, "{value:?}");
        if field.name() == "message" {
            self.message = text;
        } else {
            self.fields.push((field.name().to_owned(), text));
        }
    }
}

/// A subscriber that captures the crate's events (and still prints what `RUST_LOG` asks
/// for), for `future.with_subscriber(...)` (`tracing::instrument::WithSubscriber`): it sees
/// every event emitted while that future is polled, on whichever worker thread.
pub fn capture() -> (impl tracing::Subscriber + Send + Sync, Captured) {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::registry().with(captured.clone()).with(
        tracing_subscriber::fmt::layer()
            .with_test_writer()
            .with_filter(tracing_subscriber::EnvFilter::from_default_env()),
    );
    (subscriber, captured)
}
