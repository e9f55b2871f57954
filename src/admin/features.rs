//! Cluster features (KIP-584): the finalized levels a broker reports in its ApiVersions
//! answer (Java's `describeFeatures` reads the same), and UpdateFeatures, which the
//! controller applies (`metadata.version`, `transaction.version`, `group.version`, ...).

use std::collections::BTreeMap;

use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::{ApiVersionsRequest, UpdateFeaturesRequest};
use kafka_protocol::protocol::StrBytes;

use super::Admin;
use super::wire::{millis_left, outcome, string};
use crate::error::Result;
use crate::protocol::generated::str_bytes;

/// A range of feature levels, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct FeatureLevels {
    /// The lowest level.
    pub min: i16,
    /// The highest level.
    pub max: i16,
}

/// The features of the cluster, as one broker reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FeatureMetadata {
    /// The levels finalized cluster-wide: the level the cluster runs each feature at is
    /// `max` (`metadata.version`'s is its numeric level, e.g. 27 for 4.1-IV1).
    pub finalized: BTreeMap<String, FeatureLevels>,
    /// The epoch of the finalized levels; `None` when the broker does not know them yet.
    pub finalized_epoch: Option<i64>,
    /// The levels the answering broker's software supports.
    pub supported: BTreeMap<String, FeatureLevels>,
}

/// How [`Admin::update_features`] may change a feature's level (KIP-778).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FeatureUpgrade {
    /// Only upward.
    Upgrade,
    /// Downward as well, where the feature keeps every record readable.
    SafeDowngrade,
    /// Downward even if metadata may be lost.
    UnsafeDowngrade,
}

impl FeatureUpgrade {
    fn code(self) -> i8 {
        match self {
            FeatureUpgrade::Upgrade => 1,
            FeatureUpgrade::SafeDowngrade => 2,
            FeatureUpgrade::UnsafeDowngrade => 3,
        }
    }
}

impl Admin {
    /// The cluster's features: finalized levels and the supported ranges of the broker that
    /// answered (an ApiVersions request, KIP-584).
    pub async fn describe_features(&self) -> Result<FeatureMetadata> {
        // KIP-511: the broker checks both names (INVALID_REQUEST otherwise).
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("exactly"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let response = self.within("ApiVersions", self.call_any(request)).await?;
        outcome(response.error_code, None)?;
        let known = response.finalized_features_epoch >= 0;
        Ok(FeatureMetadata {
            finalized: response
                .finalized_features
                .iter()
                .filter(|_| known)
                .map(|f| {
                    let levels = FeatureLevels {
                        min: f.min_version_level,
                        max: f.max_version_level,
                    };
                    (f.name.clone(), levels)
                })
                .collect(),
            finalized_epoch: known.then_some(response.finalized_features_epoch),
            supported: response
                .supported_features
                .iter()
                .map(|f| {
                    let levels = FeatureLevels {
                        min: f.min_version,
                        max: f.max_version,
                    };
                    (f.name.clone(), levels)
                })
                .collect(),
        })
    }

    /// Sets features' finalized levels (UpdateFeatures; the principal needs ALTER on the
    /// cluster), or with `validate_only` only checks that the controller would. Level 0
    /// removes a feature. One result per feature (INVALID_UPDATE_VERSION for a level the
    /// brokers do not support or a downgrade `how` does not allow).
    pub async fn update_features(
        &self,
        updates: impl IntoIterator<Item = (String, i16, FeatureUpgrade)>,
        validate_only: bool,
    ) -> Result<BTreeMap<String, Result<()>>> {
        let updates: Vec<(String, i16, FeatureUpgrade)> = updates.into_iter().collect();
        let names: Vec<String> = updates.iter().map(|(name, ..)| name.clone()).collect();
        let timeout_ms = millis_left(self.deadline());
        // v0 says "downgrade allowed" with a flag; v1 replaced it with the upgrade type.
        let build = move |version: i16| {
            Ok(UpdateFeaturesRequest::default()
                .with_feature_updates(
                    updates
                        .iter()
                        .map(|(name, level, how)| {
                            let key = FeatureUpdateKey::default()
                                .with_feature(str_bytes(name))
                                .with_max_version_level(*level);
                            if version == 0 {
                                key.with_allow_downgrade(*how != FeatureUpgrade::Upgrade)
                            } else {
                                key.with_upgrade_type(how.code())
                            }
                        })
                        .collect(),
                )
                .with_validate_only(validate_only)
                .with_timeout_ms(timeout_ms))
        };
        let response = self
            .within("UpdateFeatures", self.call_any_built(build))
            .await?;
        // A request-wide error (authorization, a controller problem) is every feature's.
        if let Err(e) = outcome(response.error_code, response.error_message.as_ref()) {
            return Ok(names.into_iter().map(|n| (n, Err(e.clone()))).collect());
        }
        Ok(response
            .results
            .iter()
            .map(|r| {
                (
                    string(&r.feature),
                    outcome(r.error_code, r.error_message.as_ref()),
                )
            })
            .collect())
    }
}
