//! Configs of topics and brokers: DescribeConfigs and IncrementalAlterConfigs (KIP-339).
//!
//! A topic's configs are any broker's to answer; a broker's own (its dynamic and static
//! settings) only that broker's, so each broker resource goes to its node, as Java's admin
//! client sends them.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{DescribeConfigsRequest, IncrementalAlterConfigsRequest};
use kafka_protocol::protocol::StrBytes;

use super::Admin;
use super::wire::{outcome, string};
use crate::error::{Error, Result};
use crate::protocol::generated::str_bytes;

/// Something that has configs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum ConfigResource {
    /// A topic, by name.
    Topic(String),
    /// A broker, by node id.
    Broker(i32),
}

impl ConfigResource {
    /// Kafka's `ConfigResource.Type` code.
    fn type_code(&self) -> i8 {
        match self {
            ConfigResource::Topic(_) => 2,
            ConfigResource::Broker(_) => 4,
        }
    }

    fn name(&self) -> String {
        match self {
            ConfigResource::Topic(name) => name.clone(),
            ConfigResource::Broker(id) => id.to_string(),
        }
    }

    /// The broker that must answer for it, if only one may.
    fn broker(&self) -> Option<i32> {
        match self {
            ConfigResource::Topic(_) => None,
            ConfigResource::Broker(id) => Some(*id),
        }
    }

    /// The resource an answer names; one we did not ask about is a broker's mistake.
    fn from_wire(type_code: i8, name: &StrBytes) -> Result<Self> {
        let resource = match type_code {
            2 => Some(ConfigResource::Topic(string(name))),
            4 => name.as_str().parse().ok().map(ConfigResource::Broker),
            _ => None,
        };
        resource.ok_or_else(|| {
            Error::InvalidState(format!(
                "the broker answered for a resource not asked about (type {type_code}, {:?})",
                name.as_str()
            ))
        })
    }
}

/// Where a config's value comes from (Kafka's `ConfigEntry.ConfigSource`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigSource {
    /// Set on the topic.
    DynamicTopic,
    /// Set dynamically on this broker.
    DynamicBroker,
    /// Set dynamically as every broker's default.
    DynamicDefaultBroker,
    /// From the broker's properties file.
    StaticBroker,
    /// Kafka's default.
    Default,
    /// Another source (a broker logger, client metrics, a group), by Kafka's code.
    Other(i8),
}

impl ConfigSource {
    fn from_code(code: i8) -> Self {
        match code {
            1 => ConfigSource::DynamicTopic,
            2 => ConfigSource::DynamicBroker,
            3 => ConfigSource::DynamicDefaultBroker,
            4 => ConfigSource::StaticBroker,
            5 => ConfigSource::Default,
            other => ConfigSource::Other(other),
        }
    }
}

/// One config of a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigEntry {
    /// Its name (`retention.ms`).
    pub name: String,
    /// Its value; `None` when it is sensitive (the broker never sends those) or unset.
    pub value: Option<String>,
    /// Where the value comes from.
    pub source: ConfigSource,
    /// Whether it cannot be changed dynamically.
    pub read_only: bool,
    /// Whether it is a secret.
    pub sensitive: bool,
}

/// One change of [`Admin::incremental_alter_configs`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AlterConfig {
    /// Sets the config to a value.
    Set(String, String),
    /// Removes the setting: the config falls back to its default.
    Delete(String),
    /// Adds a value to a list config.
    Append(String, String),
    /// Removes a value from a list config.
    Subtract(String, String),
}

impl AlterConfig {
    fn to_wire(&self) -> AlterableConfig {
        let (name, operation, value) = match self {
            AlterConfig::Set(name, value) => (name, 0, Some(value)),
            AlterConfig::Delete(name) => (name, 1, None),
            AlterConfig::Append(name, value) => (name, 2, Some(value)),
            AlterConfig::Subtract(name, value) => (name, 3, Some(value)),
        };
        AlterableConfig::default()
            .with_name(str_bytes(name))
            .with_config_operation(operation)
            .with_value(value.map(|v| str_bytes(v)))
    }
}

/// Resources grouped by the broker that must answer for them (`None`: any).
fn by_broker<T>(
    items: Vec<(ConfigResource, T)>,
) -> BTreeMap<Option<i32>, Vec<(ConfigResource, T)>> {
    let mut groups: BTreeMap<Option<i32>, Vec<(ConfigResource, T)>> = BTreeMap::new();
    for (resource, item) in items {
        groups
            .entry(resource.broker())
            .or_default()
            .push((resource, item));
    }
    groups
}

impl Admin {
    /// Every config of each resource (its value and where the value comes from). One result
    /// per resource (UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist).
    pub async fn describe_configs(
        &self,
        resources: impl IntoIterator<Item = ConfigResource>,
    ) -> Result<BTreeMap<ConfigResource, Result<Vec<ConfigEntry>>>> {
        let resources: Vec<(ConfigResource, ())> = resources.into_iter().map(|r| (r, ())).collect();
        self.within("DescribeConfigs", async {
            let mut results = BTreeMap::new();
            for (broker, group) in by_broker(resources) {
                let request = DescribeConfigsRequest::default().with_resources(
                    group
                        .iter()
                        .map(|(r, ())| {
                            DescribeConfigsResource::default()
                                .with_resource_type(r.type_code())
                                .with_resource_name(str_bytes(&r.name()))
                                .with_configuration_keys(None)
                        })
                        .collect(),
                );
                let response = match broker {
                    Some(node) => self.call_broker(node, request).await?,
                    None => self.call_any(request).await?,
                };
                for result in response.results {
                    let resource =
                        ConfigResource::from_wire(result.resource_type, &result.resource_name)?;
                    let entries =
                        outcome(result.error_code, result.error_message.as_ref()).map(|()| {
                            result
                                .configs
                                .iter()
                                .map(|c| ConfigEntry {
                                    name: string(&c.name),
                                    value: c.value.as_ref().map(string),
                                    source: ConfigSource::from_code(c.config_source),
                                    read_only: c.read_only,
                                    sensitive: c.is_sensitive,
                                })
                                .collect()
                        });
                    results.insert(resource, entries);
                }
            }
            Ok(results)
        })
        .await
    }

    /// Changes configs, each resource's changes applied together (or with `validate_only`
    /// only checked). One result per resource (INVALID_CONFIG for an unknown config or a bad
    /// value, with the broker's message).
    pub async fn incremental_alter_configs(
        &self,
        changes: impl IntoIterator<Item = (ConfigResource, Vec<AlterConfig>)>,
        validate_only: bool,
    ) -> Result<BTreeMap<ConfigResource, Result<()>>> {
        let changes: Vec<(ConfigResource, Vec<AlterConfig>)> = changes.into_iter().collect();
        self.within("IncrementalAlterConfigs", async {
            let mut results = BTreeMap::new();
            for (broker, group) in by_broker(changes) {
                let request = IncrementalAlterConfigsRequest::default()
                    .with_resources(
                        group
                            .iter()
                            .map(|(r, configs)| {
                                AlterConfigsResource::default()
                                    .with_resource_type(r.type_code())
                                    .with_resource_name(str_bytes(&r.name()))
                                    .with_configs(
                                        configs.iter().map(AlterConfig::to_wire).collect(),
                                    )
                            })
                            .collect(),
                    )
                    .with_validate_only(validate_only);
                let response = match broker {
                    Some(node) => self.call_broker(node, request).await?,
                    None => self.call_any(request).await?,
                };
                for result in response.responses {
                    let resource =
                        ConfigResource::from_wire(result.resource_type, &result.resource_name)?;
                    results.insert(
                        resource,
                        outcome(result.error_code, result.error_message.as_ref()),
                    );
                }
            }
            Ok(results)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_and_operations_use_kafkas_codes() {
        let topic = ConfigResource::Topic("t".into());
        assert_eq!((topic.type_code(), topic.name()), (2, "t".to_owned()));
        assert_eq!(ConfigResource::Broker(3).name(), "3");
        assert_eq!(ConfigResource::Broker(3).broker(), Some(3));
        assert_eq!(topic.broker(), None);
        assert_eq!(
            ConfigResource::from_wire(4, &str_bytes("3")).unwrap(),
            ConfigResource::Broker(3)
        );
        assert!(ConfigResource::from_wire(8, &str_bytes("g")).is_err());
        let ops: Vec<(i8, Option<String>)> = [
            AlterConfig::Set("a".into(), "1".into()),
            AlterConfig::Delete("a".into()),
            AlterConfig::Append("a".into(), "2".into()),
            AlterConfig::Subtract("a".into(), "3".into()),
        ]
        .iter()
        .map(|op| {
            let wire = op.to_wire();
            (wire.config_operation, wire.value.as_ref().map(string))
        })
        .collect();
        assert_eq!(
            ops,
            [
                (0, Some("1".to_owned())),
                (1, None),
                (2, Some("2".to_owned())),
                (3, Some("3".to_owned()))
            ]
        );
        assert_eq!(ConfigSource::from_code(1), ConfigSource::DynamicTopic);
        assert_eq!(ConfigSource::from_code(5), ConfigSource::Default);
        assert_eq!(ConfigSource::from_code(8), ConfigSource::Other(8));
    }

    #[test]
    fn changes_are_writable_at_every_version_spoken() {
        let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(str_bytes("t"))
                .with_configs(vec![AlterConfig::Delete("a".into()).to_wire()]),
        ]);
        assert_eq!(crate::protocol::generated::lowest_version(&request), 0);
    }

    #[test]
    fn broker_resources_go_to_their_broker() {
        let groups = by_broker(vec![
            (ConfigResource::Topic("a".into()), ()),
            (ConfigResource::Broker(2), ()),
            (ConfigResource::Topic("b".into()), ()),
        ]);
        assert_eq!(groups.keys().copied().collect::<Vec<_>>(), [None, Some(2)]);
        assert_eq!(groups[&None].len(), 2);
    }
}
