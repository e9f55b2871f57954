//! The generated client-telemetry requests (KIP-714) against golden bytes written from the
//! schemas `GetTelemetrySubscriptionsRequest.json` and `PushTelemetryRequest.json`.

use bytes::Bytes;
use kafka_protocol::messages::{GetTelemetrySubscriptionsRequest, PushTelemetryRequest};

use super::tests::{assert_flexible_from, encoded};

#[test]
fn flexible_versions_match_the_schemas() {
    assert_flexible_from::<GetTelemetrySubscriptionsRequest>();
    assert_flexible_from::<PushTelemetryRequest>();
}

#[test]
fn get_telemetry_subscriptions_golden_bytes() {
    // The zero id asks the broker to assign one; then the uuid and an empty tag section.
    let request = GetTelemetrySubscriptionsRequest::default();
    let mut golden = vec![0; 16];
    golden.push(0);
    assert_eq!(encoded(&request, 0), golden);
}

#[test]
fn push_telemetry_golden_bytes() {
    let request = PushTelemetryRequest::default()
        .with_client_instance_id(uuid::Uuid::from_bytes([7; 16]))
        .with_subscription_id(258)
        .with_terminating(true)
        .with_compression_type(0)
        .with_metrics(Bytes::from_static(&[0x0a, 0x00]));
    let mut golden = vec![7; 16];
    golden.extend([0, 0, 1, 2]); // subscription id
    golden.push(1); // terminating
    golden.push(0); // compression: none
    golden.extend([3, 0x0a, 0x00]); // compact bytes of two
    golden.push(0); // no tagged fields
    assert_eq!(encoded(&request, 0), golden);
}
