//! Capturing the crate's tracing events in a test, to count what it logged: one WARN per
//! outage and one INFO when it is over, a fatal error once, re-authentications per connection.
//!
//! The capture is the calling thread's default subscriber, so run the client on a
//! current-thread runtime built on that thread: its tasks then log there too.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tracing::Level;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};

/// One captured event.
#[derive(Debug, Clone)]
pub struct Logged {
    /// Its level.
    pub level: Level,
    /// Its target (the module that logged it, e.g. `exactly::net::connection`).
    pub target: String,
    /// The formatted message.
    pub message: String,
    /// Its other fields, formatted (`address`, `error`, `local`, ...).
    pub fields: BTreeMap<String, String>,
}

impl Logged {
    /// A field's value, or "" when the event has none by that name.
    pub fn field(&self, name: &str) -> &str {
        self.fields.get(name).map_or("", String::as_str)
    }
}

/// The events captured so far, shared with the subscriber.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<Logged>>>);

impl Captured {
    /// Captures every event of this crate logged on the calling thread until the guard is
    /// dropped.
    pub fn start() -> (Captured, tracing::subscriber::DefaultGuard) {
        let captured = Captured::default();
        let subscriber = tracing_subscriber::registry().with(captured.clone());
        (captured, tracing::subscriber::set_default(subscriber))
    }

    /// Everything captured so far, in order.
    pub fn events(&self) -> Vec<Logged> {
        self.0.lock().unwrap().clone()
    }

    /// The captured events at `level`.
    pub fn at(&self, level: Level) -> Vec<Logged> {
        self.events()
            .into_iter()
            .filter(|e| e.level == level)
            .collect()
    }

    /// Forgets what was captured so far.
    pub fn clear(&self) {
        self.0.lock().unwrap().clear();
    }
}

struct Fields<'a>(&'a mut Logged);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.record(field, value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.record(field, format!("{value:?}"));
    }
}

impl Fields<'_> {
    fn record(&mut self, field: &Field, value: String) {
        if field.name() == "message" {
            self.0.message = value;
        } else {
            self.0.fields.insert(field.name().to_owned(), value);
        }
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Captured {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let metadata = event.metadata();
        if !metadata.target().starts_with("exactly") {
            return;
        }
        let mut logged = Logged {
            level: *metadata.level(),
            target: metadata.target().to_owned(),
            message: String::new(),
            fields: BTreeMap::new(),
        };
        event.record(&mut Fields(&mut logged));
        self.0.lock().unwrap().push(logged);
    }
}
