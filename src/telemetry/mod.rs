//! Client telemetry (KIP-714): the client asks a broker which of its metrics the cluster
//! subscribed to (GetTelemetrySubscriptions; the broker assigns the client instance id), then
//! pushes them every push interval as OTLP metrics (PushTelemetry), and once more with
//! `terminating` set when it closes. `enable.metrics.push` (default true, as in the Java client
//! and librdkafka 2.5+) turns it off.
//!
//! Telemetry never fails the client: every error is logged at debug and backed off. A broker
//! without the API ends it after its first answer; an empty subscription is asked again only
//! after the push interval the broker gave (5 minutes by default).
//!
//! The pusher runs in its own task over links to the bootstrap addresses (the next one after a
//! failure), so nothing it does waits on the client's own requests.

mod link_samples;
pub(crate) mod otlp;

pub(crate) use link_samples::link_samples;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use kafka_protocol::messages::{GetTelemetrySubscriptionsRequest, PushTelemetryRequest};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing::debug;

use crate::error::Error;
use crate::net::connection::BrokerLink;
use crate::protocol::error_code::ErrorCode;
use crate::protocol::messages::telemetry::GetTelemetrySubscriptionsResponse;
use otlp::{Kind, Point, Window};

/// The id a broker assigned this client instance for its telemetry (KIP-714), as Java's
/// `clientInstanceId()` returns it; shown as 32 hexadecimal digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientInstanceId(pub [u8; 16]);

impl fmt::Display for ClientInstanceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Debug for ClientInstanceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ClientInstanceId({self})")
    }
}

/// One metric value read for a push, under its Java name (`record-send-total`), with the
/// Java metric's tags as attributes (`node_id` for a per-node metric).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sample {
    pub java_name: &'static str,
    pub kind: Kind,
    pub value: f64,
    pub attributes: Vec<(&'static str, String)>,
}

impl Sample {
    /// A monotonic total (pushed as a sum).
    pub(crate) fn counter(java_name: &'static str, value: u64) -> Self {
        Self {
            java_name,
            kind: Kind::Counter,
            value: value as f64,
            attributes: Vec::new(),
        }
    }

    /// A level (pushed as a gauge).
    pub(crate) fn gauge(java_name: &'static str, value: f64) -> Self {
        Self {
            java_name,
            kind: Kind::Gauge,
            value,
            attributes: Vec::new(),
        }
    }

    /// The same sample with the attribute `key` set to `value`.
    pub(crate) fn with(mut self, key: &'static str, value: String) -> Self {
        self.attributes.push((key, value));
        self
    }
}

/// A counter's identity across pushes: its name and attributes (one per broker for a
/// per-node counter).
type CounterKey = (&'static str, Vec<(&'static str, String)>);

/// Reads the client's metrics for a push.
pub(crate) type Source = Box<dyn FnMut() -> Vec<Sample> + Send>;

/// What the pusher needs of the client.
pub(crate) struct TelemetryConfig {
    /// The links to ask, in turn (a link connects on its first request).
    pub links: Vec<BrokerLink>,
    pub client_id: Arc<str>,
    pub request_timeout: Duration,
    /// `org.apache.kafka.producer.` or `org.apache.kafka.consumer.`: the KIP's names are the
    /// Java client's, with this prefix and dots for dashes.
    pub prefix: &'static str,
}

/// The pusher's task, or nothing when `enable.metrics.push` is off.
pub(crate) struct Telemetry {
    instance: Arc<Mutex<Option<ClientInstanceId>>>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Telemetry {
    /// Nothing pushed.
    pub fn disabled() -> Self {
        Self {
            instance: Arc::default(),
            stop: None,
            task: None,
        }
    }

    /// Starts pushing what `source` reads, as the brokers' subscription asks.
    pub fn start(config: TelemetryConfig, source: Source) -> Self {
        let instance = Arc::<Mutex<Option<ClientInstanceId>>>::default();
        let (stop_tx, stop_rx) = oneshot::channel();
        let pusher = Pusher {
            config,
            source,
            instance: Arc::clone(&instance),
            next_link: 0,
            started_unix_nano: unix_nanos(),
            last_push_unix_nano: unix_nanos(),
            last_counters: HashMap::new(),
        };
        let task = tokio::spawn(pusher.run(stop_rx));
        Self {
            instance,
            stop: Some(stop_tx),
            task: Some(task),
        }
    }

    /// Reads the client instance id the broker assigned, once it has answered.
    pub fn instance_id(&self) -> InstanceIdCell {
        InstanceIdCell(Arc::clone(&self.instance))
    }

    /// Has the terminating push sent (if subscribed) and the task end. Not waited for: the
    /// client's close is bounded by its own settings, and a push to a broker that is down
    /// must not stretch it; the task ends within two `request.timeout.ms` (an answer to wait
    /// for, then the terminating push), on the runtime the client was built on.
    pub fn close(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // Detached rather than aborted on drop, so the terminating push goes out.
        self.task.take();
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// Where a client handle reads its instance id.
#[derive(Clone, Default)]
pub(crate) struct InstanceIdCell(Arc<Mutex<Option<ClientInstanceId>>>);

impl InstanceIdCell {
    pub fn get(&self) -> Option<ClientInstanceId> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The longest wait between attempts after a failure.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The interval used when a subscription gives none (the broker's default).
const DEFAULT_INTERVAL: Duration = Duration::from_secs(300);

struct Pusher {
    config: TelemetryConfig,
    source: Source,
    instance: Arc<Mutex<Option<ClientInstanceId>>>,
    next_link: usize,
    started_unix_nano: u64,
    last_push_unix_nano: u64,
    last_counters: HashMap<CounterKey, f64>,
}

/// What one subscription ended in.
enum Next {
    /// Ask for the subscription again after this long.
    Resubscribe(Duration),
    /// Stop for good.
    Stop,
}

impl Pusher {
    async fn run(mut self, mut stop: oneshot::Receiver<()>) {
        let mut failures = 0u32;
        // Bounded: each turn waits at least the backoff or the subscription's interval, and
        // the task ends when the client closes.
        loop {
            let next = match self.subscribe().await {
                Ok(subscription) => {
                    failures = 0;
                    self.follow(subscription, &mut stop).await
                }
                Err(error) if error.code() == Some(ErrorCode::UNSUPPORTED_VERSION) => {
                    debug!("telemetry: the broker does not support KIP-714; nothing is pushed");
                    Next::Stop
                }
                Err(error) => {
                    failures = failures.saturating_add(1);
                    debug!(%error, "telemetry: no subscription; backing off");
                    self.next_link += 1;
                    Next::Resubscribe(backoff(failures))
                }
            };
            match next {
                Next::Stop => return,
                Next::Resubscribe(wait) => {
                    tokio::select! {
                        _ = &mut stop => return,
                        _ = tokio::time::sleep(wait) => {}
                    }
                }
            }
        }
    }

    fn link(&self) -> Result<BrokerLink, Error> {
        let links = &self.config.links;
        links
            .get(self.next_link % links.len().max(1))
            .cloned()
            .ok_or_else(|| Error::Timeout("no broker to push telemetry to".into()))
    }

    async fn call<R>(&mut self, request: R) -> Result<R::Response, Error>
    where
        R: crate::protocol::Request + Send + 'static,
        R::Response: Send + 'static,
    {
        let link = self.link()?;
        let timeout = self.config.request_timeout;
        let call = link.call(request, None, Arc::clone(&self.config.client_id));
        tokio::time::timeout(timeout, call)
            .await
            .map_err(|_| Error::Timeout(format!("no telemetry answer within {timeout:?}")))?
    }

    async fn subscribe(&mut self) -> Result<GetTelemetrySubscriptionsResponse, Error> {
        let known = self
            .instance
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .map(|id| id.0);
        let request = GetTelemetrySubscriptionsRequest::default()
            .with_client_instance_id(uuid::Uuid::from_bytes(known.unwrap_or_default()));
        let response = self.call(request).await?;
        let code = ErrorCode(response.error_code);
        if !code.is_ok() {
            return Err(Error::broker(code));
        }
        *self.instance.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(ClientInstanceId(response.client_instance_id));
        Ok(response)
    }

    /// Pushes on the subscription's interval until it must be asked for again or the client
    /// closes (then the terminating push goes out).
    async fn follow(
        &mut self,
        subscription: GetTelemetrySubscriptionsResponse,
        stop: &mut oneshot::Receiver<()>,
    ) -> Next {
        let interval = u64::try_from(subscription.push_interval_ms)
            .ok()
            .filter(|&ms| ms > 0)
            .map_or(DEFAULT_INTERVAL, Duration::from_millis);
        if subscription.requested_metrics.is_empty() {
            return Next::Resubscribe(interval);
        }
        // The first push is jittered over half to one and a half intervals (KIP-714), so
        // clients started together do not push together.
        let mut wait = interval.mul_f64(jitter());
        // Bounded: every turn sleeps an interval or ends the subscription.
        loop {
            let terminating = tokio::select! {
                _ = &mut *stop => true,
                _ = tokio::time::sleep(wait) => false,
            };
            wait = interval;
            let code = match self.push(&subscription, terminating).await {
                Ok(code) => code,
                Err(error) => {
                    debug!(%error, "telemetry: push failed");
                    self.next_link += 1;
                    if terminating {
                        return Next::Stop;
                    }
                    return Next::Resubscribe(interval);
                }
            };
            if terminating {
                return Next::Stop;
            }
            match code {
                ErrorCode::NONE => {}
                // Too large: this push is lost, the next may fit.
                ErrorCode::TELEMETRY_TOO_LARGE | ErrorCode::THROTTLING_QUOTA_EXCEEDED => {
                    debug!(%code, "telemetry: push refused");
                }
                // The subscription changed or the broker wants another compression: ask again.
                ErrorCode::UNKNOWN_SUBSCRIPTION_ID | ErrorCode::UNSUPPORTED_COMPRESSION_TYPE => {
                    return Next::Resubscribe(Duration::ZERO);
                }
                _ => {
                    debug!(%code, "telemetry: push refused; asking for the subscription again");
                    return Next::Resubscribe(interval);
                }
            }
        }
    }

    async fn push(
        &mut self,
        subscription: &GetTelemetrySubscriptionsResponse,
        terminating: bool,
    ) -> Result<ErrorCode, Error> {
        let now = unix_nanos();
        let delta = subscription.delta_temporality;
        let window = Window {
            start_unix_nano: if delta {
                self.last_push_unix_nano
            } else {
                self.started_unix_nano
            },
            time_unix_nano: now,
            delta,
        };
        let points = self.points(&subscription.requested_metrics, delta);
        let payload = otlp::metrics_data("exactly", &points, window);
        let max = usize::try_from(subscription.telemetry_max_bytes).unwrap_or(0);
        if max > 0 && payload.len() > max && !terminating {
            debug!(
                bytes = payload.len(),
                max, "telemetry: metrics larger than the broker accepts; push skipped"
            );
            return Ok(ErrorCode::NONE);
        }
        let request = PushTelemetryRequest::default()
            .with_client_instance_id(uuid::Uuid::from_bytes(subscription.client_instance_id))
            .with_subscription_id(subscription.subscription_id)
            .with_terminating(terminating)
            // Uncompressed, which every broker accepts: the payload is small (a few KiB).
            .with_compression_type(0)
            .with_metrics(Bytes::from(payload));
        let response = self.call(request).await?;
        self.last_push_unix_nano = now;
        Ok(ErrorCode(response.error_code))
    }

    /// The samples read now, selected and named for the subscription.
    fn points(&mut self, requested: &[String], delta: bool) -> Vec<Point> {
        let samples = (self.source)();
        select(
            samples,
            self.config.prefix,
            requested,
            delta,
            &mut self.last_counters,
        )
    }
}

/// The samples whose KIP-714 names (`prefix` and the Java name with dots for dashes) the
/// requested prefixes select, counters as deltas since `last_counters` (updated) when the
/// subscription asks for deltas.
fn select(
    samples: Vec<Sample>,
    prefix: &str,
    requested: &[String],
    delta: bool,
    last_counters: &mut HashMap<CounterKey, f64>,
) -> Vec<Point> {
    let mut points = Vec::new();
    for sample in samples {
        let name = format!("{prefix}{}", sample.java_name.replace('-', "."));
        // An empty prefix (or `*`, as the command-line tool writes "all") selects every
        // metric (KIP-714).
        if !requested
            .iter()
            .any(|p| p.is_empty() || p == "*" || name.starts_with(p.as_str()))
        {
            continue;
        }
        let mut value = sample.value;
        if sample.kind == Kind::Counter {
            let key = (sample.java_name, sample.attributes.clone());
            let last = last_counters.insert(key, sample.value);
            if delta {
                value -= last.unwrap_or(0.0);
            }
        }
        points.push(Point {
            name,
            kind: sample.kind,
            value,
            attributes: sample.attributes,
        });
    }
    points
}

/// A factor in `0.5..1.5`, seeded from the standard library's per-process random state
/// (no global RNG is needed for this).
fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let seed = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    SmallRng::seed_from_u64(seed).random_range(0.5..1.5)
}

fn backoff(failures: u32) -> Duration {
    let base = Duration::from_millis(500).saturating_mul(1 << failures.min(6));
    base.min(MAX_BACKOFF)
}

fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(sent: f64) -> Vec<Sample> {
        vec![
            Sample::counter("record-send-total", sent as u64),
            Sample::gauge("buffer-available-bytes", 7.0),
        ]
    }

    const PREFIX: &str = "org.apache.kafka.producer.";

    #[test]
    fn requested_prefixes_select_by_the_kip_names() {
        let mut last = HashMap::new();
        let only_records = vec!["org.apache.kafka.producer.record.".to_owned()];
        let points = select(samples(3.0), PREFIX, &only_records, false, &mut last);
        assert_eq!(points.len(), 1);
        assert_eq!(
            points[0].name,
            "org.apache.kafka.producer.record.send.total"
        );
        for all in [vec![String::new()], vec!["*".to_owned()]] {
            assert_eq!(
                select(samples(3.0), PREFIX, &all, false, &mut last).len(),
                2
            );
        }
        let consumer_only = vec!["org.apache.kafka.consumer.".to_owned()];
        assert!(select(samples(3.0), PREFIX, &consumer_only, false, &mut last).is_empty());
    }

    #[test]
    fn counters_are_cumulative_or_deltas_and_gauges_as_read() {
        let all = vec![String::new()];
        let mut last = HashMap::new();
        let values = |points: Vec<Point>| points.iter().map(|p| p.value).collect::<Vec<_>>();
        assert_eq!(
            values(select(samples(3.0), PREFIX, &all, true, &mut last)),
            [3.0, 7.0]
        );
        assert_eq!(
            values(select(samples(5.0), PREFIX, &all, true, &mut last)),
            [2.0, 7.0]
        );
        assert_eq!(
            values(select(samples(9.0), PREFIX, &all, false, &mut last)),
            [9.0, 7.0]
        );
    }

    #[test]
    fn a_counter_per_node_keeps_its_own_deltas_and_attributes() {
        let all = vec![String::new()];
        let mut last = HashMap::new();
        let per_node = |a: u64, b: u64| {
            vec![
                Sample::counter("node-response-total", a).with("node_id", "node-1".into()),
                Sample::counter("node-response-total", b).with("node_id", "node-2".into()),
            ]
        };
        select(per_node(4, 10), PREFIX, &all, true, &mut last);
        let points = select(per_node(5, 13), PREFIX, &all, true, &mut last);
        let seen: Vec<_> = points
            .iter()
            .map(|p| (p.attributes[0].1.as_str(), p.value))
            .collect();
        assert_eq!(seen, [("node-1", 1.0), ("node-2", 3.0)]);
        assert_eq!(
            points[0].name,
            "org.apache.kafka.producer.node.response.total"
        );
    }

    #[test]
    fn instance_ids_show_as_32_hex_digits() {
        let mut id = [0u8; 16];
        id[0] = 0xab;
        id[15] = 1;
        assert_eq!(
            ClientInstanceId(id).to_string(),
            "ab000000000000000000000000000001"
        );
    }
}
