//! Finding a coordinator (FindCoordinator), as the producer's transactions, the consumer's
//! group and the admin client's group and transaction calls all do: the request for a key at
//! the version negotiated, and the coordinator its answer names.

use kafka_protocol::messages::FindCoordinatorRequest;
use kafka_protocol::protocol::StrBytes;

use crate::error::Error;
use crate::protocol::error_code::ErrorCode;
use crate::protocol::messages::find_coordinator::FindCoordinatorResponse;
use crate::types::{BrokerId, CoordinatorKey};

/// FindCoordinator's key type of a consumer group id (the only kind v0 knows).
const KEY_TYPE_GROUP: i8 = 0;

/// FindCoordinator's key type of a transactional id (v1+, KIP-98).
const KEY_TYPE_TRANSACTION: i8 = 1;

/// FindCoordinator v4 batches keys (KIP-699) in place of the single `Key` field.
const FIND_COORDINATOR_BATCHED_FROM: i16 = 4;

/// FindCoordinator for one key at `version`: v4+ carry a list of keys (KIP-699), older
/// versions the single `Key` field. v0 has no key type and only looks up groups: a
/// transaction coordinator needs v1 (KIP-98).
pub(crate) fn find_coordinator_request(
    key: CoordinatorKey,
    version: i16,
) -> Result<FindCoordinatorRequest, Error> {
    let (key_type, key) = match key {
        CoordinatorKey::Transaction(id) => (KEY_TYPE_TRANSACTION, id),
        CoordinatorKey::Group(id) => (KEY_TYPE_GROUP, id),
    };
    if version == 0 && key_type != KEY_TYPE_GROUP {
        // Fatal (T5): no broker of this version can look the coordinator up.
        return Err(Error::Broker {
            code: ErrorCode::UNSUPPORTED_VERSION,
            message: Some(
                "FindCoordinator v0 only looks up groups; a transaction coordinator needs v1"
                    .into(),
            ),
        });
    }
    let request = FindCoordinatorRequest::default().with_key_type(key_type);
    Ok(if version >= FIND_COORDINATOR_BATCHED_FROM {
        request.with_coordinator_keys(vec![StrBytes::from_string(key)])
    } else {
        request.with_key(StrBytes::from_string(key))
    })
}

/// A coordinator FindCoordinator named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FoundCoordinator {
    /// Its node id.
    pub node_id: BrokerId,
    /// `host:port`: it may not be in the client's metadata yet.
    pub address: String,
}

/// The coordinator a FindCoordinator answer names, or its error.
pub(crate) fn coordinator_answer(
    response: FindCoordinatorResponse,
) -> Result<FoundCoordinator, Error> {
    match response.coordinators.into_iter().next() {
        Some(c) if c.error_code == 0 => Ok(FoundCoordinator {
            node_id: c.node_id,
            address: format!("{}:{}", c.host, c.port),
        }),
        Some(c) => Err(Error::Broker {
            code: ErrorCode(c.error_code),
            message: c.error_message,
        }),
        None => Err(Error::Timeout(
            "FindCoordinator answered without a coordinator".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::find_coordinator::Coordinator;
    use crate::protocol::messages::test_support::through_kafka_protocol;

    fn s(value: &'static str) -> StrBytes {
        StrBytes::from_static_str(value)
    }

    #[test]
    fn find_coordinator_names_the_key_type_and_maps_its_answer() {
        let txn = find_coordinator_request(CoordinatorKey::Transaction("t-1".into()), 6).unwrap();
        assert_eq!(txn.key_type, KEY_TYPE_TRANSACTION);
        assert_eq!(txn.coordinator_keys, vec![s("t-1")]);
        for version in [1, 3] {
            let read = through_kafka_protocol(
                &find_coordinator_request(CoordinatorKey::Transaction("t-1".into()), version)
                    .unwrap(),
                version,
            );
            assert_eq!((read.key_type, read.key), (KEY_TYPE_TRANSACTION, s("t-1")));
        }
        // v0–3 carry the single key, v4+ the list (KIP-699).
        for version in 0..=6 {
            let group =
                find_coordinator_request(CoordinatorKey::Group("g".into()), version).unwrap();
            let read = through_kafka_protocol(&group, version);
            assert_eq!(read.key_type, KEY_TYPE_GROUP, "v{version}");
            let keys = if version >= 4 {
                read.coordinator_keys
            } else {
                vec![read.key]
            };
            assert_eq!(keys, vec![s("g")], "v{version}");
        }
        // v0 has no key type: it cannot look up a transaction coordinator.
        let error =
            find_coordinator_request(CoordinatorKey::Transaction("t-1".into()), 0).unwrap_err();
        assert_eq!(error.code(), Some(ErrorCode::UNSUPPORTED_VERSION));
        assert!(error.is_fatal());
        let answer = |error_code: i16| FindCoordinatorResponse {
            throttle_time_ms: 0,
            coordinators: vec![Coordinator {
                key: "g".into(),
                node_id: 2,
                host: "127.0.0.1".into(),
                port: 9093,
                error_code,
                error_message: (error_code != 0).then(|| "loading".into()),
            }],
        };
        assert_eq!(
            coordinator_answer(answer(0)).unwrap(),
            FoundCoordinator {
                node_id: 2,
                address: "127.0.0.1:9093".into()
            }
        );
        let error = coordinator_answer(answer(ErrorCode::COORDINATOR_NOT_AVAILABLE.0)).unwrap_err();
        assert_eq!(error.code(), Some(ErrorCode::COORDINATOR_NOT_AVAILABLE));
        assert!(error.to_string().contains("loading"), "{error}");
        let empty = FindCoordinatorResponse {
            throttle_time_ms: 0,
            coordinators: Vec::new(),
        };
        assert!(matches!(coordinator_answer(empty), Err(Error::Timeout(_))));
    }
}
