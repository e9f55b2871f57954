//! Version negotiation: what a broker said in its ApiVersions response, and the version of
//! each request to send it.
//!
//! Each request goes out at the highest version both sides implement, optionally capped by
//! the caller (e.g. Produce at 11 unless transactions v2 are on, KIP-890). The
//! broker's finalized features tell which protocol generation the cluster runs, most
//! importantly `transaction.version` (KIP-890: transactions v2 when >= 2).

use std::collections::HashMap;

use super::messages::api_versions::ApiVersionsResponse;
use super::{ApiKey, Versioned};

/// The finalized feature that selects the transaction protocol (KIP-890).
pub const TRANSACTION_VERSION_FEATURE: &str = "transaction.version";

/// The APIs, version ranges and finalized features one broker advertised.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BrokerApiVersions {
    /// API key -> (min, max) version, inclusive.
    apis: HashMap<i16, (i16, i16)>,
    /// Finalized feature name -> finalized max version level.
    finalized_features: HashMap<String, i16>,
}

impl BrokerApiVersions {
    /// Collects the ranges and features of a broker's ApiVersions response.
    ///
    /// The response's error code is not looked at: a caller that got an error (e.g. the
    /// KIP-511 UNSUPPORTED_VERSION answer) retries before building this. Finalized features are
    /// kept only when `finalized_features_epoch >= 0`, the schema's condition for them to be
    /// valid (KIP-584).
    pub fn from_response(response: &ApiVersionsResponse) -> Self {
        let apis = response
            .api_keys
            .iter()
            .map(|api| (api.api_key, (api.min_version, api.max_version)))
            .collect();
        let finalized_features = if response.finalized_features_epoch >= 0 {
            response
                .finalized_features
                .iter()
                .map(|f| (f.name.clone(), f.max_version_level))
                .collect()
        } else {
            HashMap::new()
        };
        Self {
            apis,
            finalized_features,
        }
    }

    /// The broker's (min, max) versions of `api_key`, if it supports it at all.
    pub fn range(&self, api_key: i16) -> Option<(i16, i16)> {
        self.apis.get(&api_key).copied()
    }

    /// The highest version of `M` that both this crate (`M::MIN_VERSION..=M::MAX_VERSION`) and
    /// the broker support, never above `cap`; `None` when there is no common version.
    pub fn negotiate<M: Versioned>(&self, cap: Option<i16>) -> Option<i16> {
        let (broker_min, broker_max) = self.range(M::API_KEY as i16)?;
        let high = M::MAX_VERSION.min(broker_max).min(cap.unwrap_or(i16::MAX));
        let low = M::MIN_VERSION.max(broker_min);
        (high >= low).then_some(high)
    }

    /// The finalized max version level of feature `name`, if the cluster finalized it.
    pub fn finalized_feature(&self, name: &str) -> Option<i16> {
        self.finalized_features.get(name).copied()
    }

    /// The cluster's `transaction.version`; 0 when the feature is not finalized (every 3.x
    /// cluster). Transactions v2 (KIP-890 part 2) are on when it is >= 2.
    pub fn transaction_version(&self) -> i16 {
        self.finalized_feature(TRANSACTION_VERSION_FEATURE)
            .unwrap_or(0)
    }

    /// Whether the cluster runs transactions v2 (`transaction.version >= 2`, KIP-890).
    pub fn transactions_v2(&self) -> bool {
        // KIP-890 part 2: the finalized feature alone is not enough; the client also needs the
        // request versions that carry it (Produce v12, EndTxn v5, TxnOffsetCommit v5).
        let supports = |key: ApiKey, version: i16| {
            self.range(key as i16)
                .is_some_and(|(_, max)| max >= version)
        };
        self.transaction_version() >= 2
            && supports(ApiKey::Produce, 12)
            && supports(ApiKey::EndTxn, 5)
            && supports(ApiKey::TxnOffsetCommit, 5)
    }
}

impl From<&ApiVersionsResponse> for BrokerApiVersions {
    fn from(response: &ApiVersionsResponse) -> Self {
        Self::from_response(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::api_versions::{ApiVersion, FinalizedFeatureKey};
    use crate::protocol::messages::produce::ProduceRequest;
    use kafka_protocol::messages::{EndTxnRequest, TxnOffsetCommitRequest};

    fn broker(apis: &[(i16, i16, i16)], features: &[(&str, i16)], epoch: i64) -> BrokerApiVersions {
        BrokerApiVersions::from_response(&ApiVersionsResponse {
            api_keys: apis
                .iter()
                .map(|&(api_key, min_version, max_version)| ApiVersion {
                    api_key,
                    min_version,
                    max_version,
                })
                .collect(),
            finalized_features_epoch: epoch,
            finalized_features: features
                .iter()
                .map(|&(name, level)| FinalizedFeatureKey {
                    name: name.into(),
                    max_version_level: level,
                    min_version_level: 1,
                })
                .collect(),
            ..Default::default()
        })
    }

    #[test]
    fn negotiation_takes_the_highest_common_version_under_the_cap() {
        // Produce: we implement 3..=13.
        let b = broker(&[(0, 0, 12), (26, 0, 5)], &[], -1);
        assert_eq!(b.range(0), Some((0, 12)));
        assert_eq!(b.negotiate::<ProduceRequest>(None), Some(12));
        assert_eq!(b.negotiate::<ProduceRequest>(Some(11)), Some(11));
        assert_eq!(b.negotiate::<ProduceRequest>(Some(20)), Some(12));
        // A cap below our minimum leaves nothing to send.
        assert_eq!(b.negotiate::<ProduceRequest>(Some(2)), None);
        assert_eq!(b.negotiate::<EndTxnRequest>(Some(4)), Some(4));
        // Not advertised at all.
        assert_eq!(b.negotiate::<TxnOffsetCommitRequest>(None), None);
    }

    #[test]
    fn negotiation_fails_when_the_ranges_do_not_meet() {
        // A broker that only has Produce 0..=2 (older than anything we implement).
        let b = broker(&[(0, 0, 2)], &[], -1);
        assert_eq!(b.negotiate::<ProduceRequest>(None), None);
        // A broker whose minimum is above our maximum.
        let b = broker(&[(26, 9, 12)], &[], -1);
        assert_eq!(b.negotiate::<EndTxnRequest>(None), None);
    }

    #[test]
    fn transaction_version_comes_from_the_finalized_features() {
        // Produce 3..=12, EndTxn 0..=5, TxnOffsetCommit 0..=5: what transactions v2 needs.
        let v2_apis = [(0, 3, 12), (26, 0, 5), (28, 0, 5)];
        let tv2 = broker(
            &v2_apis,
            &[("transaction.version", 2), ("metadata.version", 25)],
            7,
        );
        assert_eq!(tv2.finalized_feature("metadata.version"), Some(25));
        assert_eq!(tv2.transaction_version(), 2);
        assert!(tv2.transactions_v2());
        // The feature without the request versions that carry it is not enough (KIP-890).
        let no_end_txn_v5 = broker(
            &[(0, 3, 12), (26, 0, 4), (28, 0, 5)],
            &[("transaction.version", 2)],
            7,
        );
        assert!(!no_end_txn_v5.transactions_v2());

        let tv1 = broker(&[], &[("transaction.version", 1)], 7);
        assert_eq!(tv1.transaction_version(), 1);
        assert!(!tv1.transactions_v2());

        let old = broker(&[], &[], 7);
        assert_eq!(old.finalized_feature("transaction.version"), None);
        assert_eq!(old.transaction_version(), 0);

        // Finalized features are not valid while the epoch is unknown (-1).
        let unknown = broker(&[], &[("transaction.version", 2)], -1);
        assert_eq!(unknown.transaction_version(), 0);
        assert_eq!(
            BrokerApiVersions::from(&ApiVersionsResponse::default()),
            old
        );
    }
}
