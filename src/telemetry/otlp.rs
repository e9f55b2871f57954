//! The OTLP `MetricsData` protobuf a PushTelemetry carries (KIP-714: the payload is
//! OpenTelemetry's metrics data model, content type `application/x-protobuf`), written with a
//! tiny protobuf writer: only the messages and fields a client's counters and gauges need.
//!
//! Field numbers are those of `opentelemetry/proto/metrics/v1/metrics.proto` and
//! `opentelemetry/proto/common/v1/common.proto`: `MetricsData.resource_metrics` 1,
//! `ResourceMetrics.scope_metrics` 2, `ScopeMetrics.scope` 1 and `.metrics` 2,
//! `InstrumentationScope.name` 1, `Metric.name` 1, `.gauge` 5, `.sum` 7, `Gauge.data_points` 1,
//! `Sum.data_points` 1, `.aggregation_temporality` 2 (1 delta, 2 cumulative), `.is_monotonic` 3,
//! `NumberDataPoint.start_time_unix_nano` 2 and `.time_unix_nano` 3 (fixed64), `.as_double` 4
//! (double), `.attributes` 7, `KeyValue.key` 1 and `.value` 2, `AnyValue.string_value` 1.

/// How a metric's value is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A monotonic counter: an OTLP `Sum` with `is_monotonic`.
    Counter,
    /// A value at the time of the push: an OTLP `Gauge`.
    Gauge,
}

/// One data point to push, its name already the KIP-714 one.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Point {
    /// The OTLP metric name (`org.apache.kafka.producer.record.send.total`).
    pub name: String,
    /// Counter or gauge.
    pub kind: Kind,
    /// The value: for a counter, cumulative or the delta since the last push, as subscribed.
    pub value: f64,
    /// Attributes of the point (`node_id`, ...), as key and value.
    pub attributes: Vec<(&'static str, String)>,
}

/// The times and temporality every point of one push shares.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    /// For counters: since when they count (the client's start, or the last push for deltas).
    pub start_unix_nano: u64,
    /// When the values were read.
    pub time_unix_nano: u64,
    /// Whether counters are deltas since `start_unix_nano`.
    pub delta: bool,
}

const WIRE_FIXED64: u32 = 1;
const WIRE_LEN: u32 = 2;
const WIRE_VARINT: u32 = 0;

/// A protobuf message being written: fields appended in order, nested messages written into
/// their own buffer first so their length is known.
#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn key(&mut self, field: u32, wire: u32) {
        self.varint(u64::from(field << 3 | wire));
    }

    fn bytes(&mut self, field: u32, bytes: &[u8]) {
        self.key(field, WIRE_LEN);
        self.varint(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
    }

    fn message(&mut self, field: u32, build: impl FnOnce(&mut Writer)) {
        let mut inner = Writer::default();
        build(&mut inner);
        self.bytes(field, &inner.0);
    }

    fn fixed64(&mut self, field: u32, v: u64) {
        self.key(field, WIRE_FIXED64);
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn uint(&mut self, field: u32, v: u64) {
        self.key(field, WIRE_VARINT);
        self.varint(v);
    }
}

/// Encodes `points` as one `MetricsData` with one resource and one scope named `scope`.
pub(crate) fn metrics_data(scope: &str, points: &[Point], window: Window) -> Vec<u8> {
    let mut data = Writer::default();
    data.message(1, |resource_metrics| {
        resource_metrics.message(2, |scope_metrics| {
            scope_metrics.message(1, |s| s.bytes(1, scope.as_bytes()));
            for point in points {
                scope_metrics.message(2, |metric| write_metric(metric, point, window));
            }
        });
    });
    data.0
}

fn write_metric(metric: &mut Writer, point: &Point, window: Window) {
    metric.bytes(1, point.name.as_bytes());
    let data_point = |p: &mut Writer| {
        for (key, value) in &point.attributes {
            p.message(7, |kv| {
                kv.bytes(1, key.as_bytes());
                kv.message(2, |any| any.bytes(1, value.as_bytes()));
            });
        }
        if point.kind == Kind::Counter {
            p.fixed64(2, window.start_unix_nano);
        }
        p.fixed64(3, window.time_unix_nano);
        p.fixed64(4, point.value.to_bits());
    };
    match point.kind {
        Kind::Gauge => metric.message(5, |gauge| gauge.message(1, data_point)),
        Kind::Counter => metric.message(7, |sum| {
            sum.message(1, data_point);
            sum.uint(2, if window.delta { 1 } else { 2 });
            sum.uint(3, 1);
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A protobuf reader for the test: (field, wire type, value or nested bytes).
    fn fields(mut bytes: &[u8]) -> Vec<(u32, u32, Vec<u8>)> {
        fn varint(bytes: &mut &[u8]) -> u64 {
            let (mut v, mut shift) = (0u64, 0);
            loop {
                let b = bytes[0];
                *bytes = &bytes[1..];
                v |= u64::from(b & 0x7f) << shift;
                if b < 0x80 {
                    return v;
                }
                shift += 7;
            }
        }
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let key = varint(&mut bytes) as u32;
            let (field, wire) = (key >> 3, key & 7);
            let value = match wire {
                WIRE_VARINT => varint(&mut bytes).to_le_bytes().to_vec(),
                WIRE_FIXED64 => {
                    let (v, rest) = bytes.split_at(8);
                    bytes = rest;
                    v.to_vec()
                }
                WIRE_LEN => {
                    let len = varint(&mut bytes) as usize;
                    let (v, rest) = bytes.split_at(len);
                    bytes = rest;
                    v.to_vec()
                }
                other => panic!("unexpected wire type {other}"),
            };
            out.push((field, wire, value));
        }
        out
    }

    fn only(bytes: &[u8], field: u32) -> Vec<u8> {
        let found: Vec<_> = fields(bytes).into_iter().filter(|f| f.0 == field).collect();
        assert_eq!(found.len(), 1, "field {field} once");
        found[0].2.clone()
    }

    fn fixed(bytes: &[u8]) -> u64 {
        u64::from_le_bytes(bytes.try_into().unwrap())
    }

    #[test]
    fn golden_gauge() {
        let point = Point {
            name: "a".into(),
            kind: Kind::Gauge,
            value: 1.0,
            attributes: vec![],
        };
        let window = Window {
            start_unix_nano: 1,
            time_unix_nano: 2,
            delta: false,
        };
        #[rustfmt::skip]
        let golden = [
            0x0a, 34,                  // MetricsData.resource_metrics
            0x12, 32,                  // ResourceMetrics.scope_metrics
            0x0a, 3, 0x0a, 1, b's',    // ScopeMetrics.scope { name: "s" }
            0x12, 25,                  // ScopeMetrics.metrics
            0x0a, 1, b'a',             // Metric.name
            0x2a, 20, 0x0a, 18,        // Metric.gauge { data_points }
            0x19, 2, 0, 0, 0, 0, 0, 0, 0, // time_unix_nano (fixed64)
            0x21, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, // as_double 1.0
        ];
        assert_eq!(metrics_data("s", &[point], window), golden);
    }

    #[test]
    fn counters_are_monotonic_sums_with_the_subscribed_temporality() {
        let points = [
            Point {
                name: "org.apache.kafka.producer.record.send.total".into(),
                kind: Kind::Counter,
                value: 42.0,
                attributes: vec![("node_id", "1".into())],
            },
            Point {
                name: "org.apache.kafka.producer.record.send.rate".into(),
                kind: Kind::Gauge,
                value: 0.5,
                attributes: vec![],
            },
        ];
        for delta in [false, true] {
            let window = Window {
                start_unix_nano: 10,
                time_unix_nano: 20,
                delta,
            };
            let bytes = metrics_data("exactly", &points, window);
            let scope_metrics = only(&only(&bytes, 1), 2);
            let metrics: Vec<_> = fields(&scope_metrics)
                .into_iter()
                .filter(|f| f.0 == 2)
                .map(|f| f.2)
                .collect();
            assert_eq!(only(&only(&scope_metrics, 1), 1), b"exactly");
            assert_eq!(metrics.len(), 2);
            assert_eq!(only(&metrics[0], 1), points[0].name.as_bytes());
            let sum = only(&metrics[0], 7);
            assert_eq!(only(&sum, 2)[0], if delta { 1 } else { 2 });
            assert_eq!(only(&sum, 3)[0], 1);
            let point = only(&sum, 1);
            assert_eq!(fixed(&only(&point, 2)), 10);
            assert_eq!(fixed(&only(&point, 3)), 20);
            assert_eq!(f64::from_bits(fixed(&only(&point, 4))), 42.0);
            let attribute = only(&point, 7);
            assert_eq!(only(&attribute, 1), b"node_id");
            assert_eq!(only(&only(&attribute, 2), 1), b"1");
            let gauge_point = only(&only(&metrics[1], 5), 1);
            assert_eq!(f64::from_bits(fixed(&only(&gauge_point, 4))), 0.5);
            assert!(
                fields(&gauge_point).iter().all(|f| f.0 != 2),
                "no start time"
            );
        }
    }
}
