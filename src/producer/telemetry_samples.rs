//! The producer's metrics under the Java producer's names (group `producer-metrics`), which
//! KIP-714 turns into `org.apache.kafka.producer.<name with dots>`.

use super::metrics::ProducerMetrics;
use crate::telemetry::Sample;

/// The samples of one snapshot.
pub(crate) fn samples(m: &ProducerMetrics) -> Vec<Sample> {
    let (counter, gauge) = (Sample::counter, Sample::gauge);
    vec![
        counter("record-send-total", m.record_send_total),
        gauge("record-send-rate", m.record_send_rate),
        counter("record-error-total", m.record_error_total),
        counter("record-retry-total", m.record_retry_total),
        gauge("request-latency-avg", m.request_latency_avg_ms),
        gauge("request-latency-max", m.request_latency_max_ms as f64),
        gauge("batch-size-avg", m.batch_size_avg),
        gauge("batch-size-max", m.batch_size_max as f64),
        gauge("records-per-request-avg", m.records_per_request_avg),
        gauge("record-queue-time-avg", m.record_queue_time_avg_ms),
        gauge("record-queue-time-max", m.record_queue_time_max_ms as f64),
        gauge("buffer-total-bytes", m.buffer_total_bytes as f64),
        gauge("buffer-available-bytes", m.buffer_available_bytes as f64),
        counter("buffer-exhausted-total", m.buffer_exhausted_total),
        counter(
            "bufferpool-wait-time-ns-total",
            m.bufferpool_wait_time_ns_total,
        ),
        gauge("produce-throttle-time-avg", m.produce_throttle_time_avg_ms),
        gauge(
            "produce-throttle-time-max",
            m.produce_throttle_time_max_ms as f64,
        ),
    ]
}
