//! Client quotas (KIP-546): DescribeClientQuotas and AlterClientQuotas.
//!
//! A quota belongs to an *entity*: a user, a client id, both together, or an IP address,
//! each by name or as the default for every one without its own. Its keys are Kafka's
//! (`producer_byte_rate`, `consumer_byte_rate`, `request_percentage`,
//! `controller_mutation_rate`, `connection_creation_rate`). Any broker answers (under KRaft
//! the change is forwarded to the controller).

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::{AlterClientQuotasRequest, DescribeClientQuotasRequest};
use kafka_protocol::protocol::StrBytes;

use super::Admin;
use super::wire::{outcome, string};
use crate::error::Result;
use crate::protocol::generated::str_bytes;

/// Who a quota applies to: entity type (`user`, `client-id`, `ip`) to name, `None` for that
/// type's default entity.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub struct ClientQuotaEntity {
    /// The entity's components.
    pub components: BTreeMap<String, Option<String>>,
}

impl ClientQuotaEntity {
    /// The user `name` (its principal's name, as SASL authenticated it).
    pub fn user(name: impl Into<String>) -> Self {
        ClientQuotaEntity::default().and("user", Some(name.into()))
    }

    /// The client id `id`.
    pub fn client_id(id: impl Into<String>) -> Self {
        ClientQuotaEntity::default().and("client-id", Some(id.into()))
    }

    /// The default user: every user without a quota of its own.
    pub fn default_user() -> Self {
        ClientQuotaEntity::default().and("user", None)
    }

    /// The entity with one more component: `entity_type` named `name` (`None`: its default),
    /// e.g. a user's quota for one client id.
    pub fn and(mut self, entity_type: &str, name: Option<String>) -> Self {
        self.components.insert(entity_type.to_owned(), name);
        self
    }

    fn wire(&self) -> Vec<EntityData> {
        self.components
            .iter()
            .map(|(entity_type, name)| {
                EntityData::default()
                    .with_entity_type(str_bytes(entity_type))
                    .with_entity_name(name.as_deref().map(str_bytes))
            })
            .collect()
    }

    fn from_wire<'a>(
        parts: impl IntoIterator<Item = (&'a StrBytes, Option<&'a StrBytes>)>,
    ) -> Self {
        ClientQuotaEntity {
            components: parts
                .into_iter()
                .map(|(entity_type, name)| (string(entity_type), name.map(string)))
                .collect(),
        }
    }
}

/// The entity of an answer's entry (DescribeClientQuotas' and AlterClientQuotas' entity
/// fields have the same names).
macro_rules! entity_of {
    ($entities:expr) => {
        ClientQuotaEntity::from_wire(
            $entities
                .iter()
                .map(|e| (&e.entity_type, e.entity_name.as_ref())),
        )
    };
}

/// One condition of a [`ClientQuotaFilter`] on an entity type.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuotaFilterComponent {
    /// The entity of this type named exactly so.
    Exact(String, String),
    /// This type's default entity.
    Default(String),
    /// Any entity that has this type, by name or default.
    Any(String),
}

/// Which quotas [`Admin::describe_client_quotas`] returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientQuotaFilter {
    /// The conditions, one per entity type.
    pub components: Vec<QuotaFilterComponent>,
    /// Only entities with no component beyond those named (else also those with more).
    pub strict: bool,
}

impl ClientQuotaFilter {
    /// Every quota of the cluster.
    pub fn all() -> Self {
        ClientQuotaFilter::default()
    }

    /// The quotas whose entities meet `component` (and any others added).
    pub fn containing(mut self, component: QuotaFilterComponent) -> Self {
        self.components.push(component);
        self
    }

    /// Only entities made of the named components alone.
    pub fn strict(mut self) -> Self {
        self.strict = true;
        self
    }

    fn request(&self) -> DescribeClientQuotasRequest {
        // Kafka's match types: 0 exact name, 1 the default, 2 any.
        let component = |entity_type: &str, match_type: i8, name: Option<&str>| {
            ComponentData::default()
                .with_entity_type(str_bytes(entity_type))
                .with_match_type(match_type)
                .with_match(name.map(str_bytes))
        };
        DescribeClientQuotasRequest::default()
            .with_components(
                self.components
                    .iter()
                    .map(|c| match c {
                        QuotaFilterComponent::Exact(t, name) => component(t, 0, Some(name)),
                        QuotaFilterComponent::Default(t) => component(t, 1, None),
                        QuotaFilterComponent::Any(t) => component(t, 2, None),
                    })
                    .collect(),
            )
            .with_strict(self.strict)
    }
}

/// Changes to one entity's quotas for [`Admin::alter_client_quotas`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ClientQuotaAlteration {
    /// The entity.
    pub entity: ClientQuotaEntity,
    /// Quota key to its new value; `None` removes the quota.
    pub ops: BTreeMap<String, Option<f64>>,
}

impl ClientQuotaAlteration {
    /// No change yet to `entity`'s quotas.
    pub fn new(entity: ClientQuotaEntity) -> Self {
        ClientQuotaAlteration {
            entity,
            ops: BTreeMap::new(),
        }
    }

    /// Sets quota `key` to `value`.
    pub fn set(mut self, key: &str, value: f64) -> Self {
        self.ops.insert(key.to_owned(), Some(value));
        self
    }

    /// Removes quota `key`.
    pub fn remove(mut self, key: &str) -> Self {
        self.ops.insert(key.to_owned(), None);
        self
    }
}

impl Admin {
    /// The quotas `filter` matches (DescribeClientQuotas): by entity, quota key to value.
    pub async fn describe_client_quotas(
        &self,
        filter: &ClientQuotaFilter,
    ) -> Result<BTreeMap<ClientQuotaEntity, BTreeMap<String, f64>>> {
        let response = self
            .within("DescribeClientQuotas", self.call_any(filter.request()))
            .await?;
        outcome(response.error_code, response.error_message.as_ref())?;
        Ok(response
            .entries
            .unwrap_or_default()
            .into_iter()
            .map(|entry| {
                let entity = entity_of!(entry.entity);
                let values = entry
                    .values
                    .iter()
                    .map(|v| (string(&v.key), v.value))
                    .collect();
                (entity, values)
            })
            .collect())
    }

    /// Sets or removes quotas (AlterClientQuotas), or with `validate_only` only checks that
    /// the broker would. One result per entity (INVALID_REQUEST with the broker's reason for
    /// an unknown key or entity type).
    pub async fn alter_client_quotas(
        &self,
        alterations: impl IntoIterator<Item = ClientQuotaAlteration>,
        validate_only: bool,
    ) -> Result<BTreeMap<ClientQuotaEntity, Result<()>>> {
        let request = AlterClientQuotasRequest::default()
            .with_entries(
                alterations
                    .into_iter()
                    .map(|a| {
                        EntryData::default().with_entity(a.entity.wire()).with_ops(
                            a.ops
                                .iter()
                                .map(|(key, value)| {
                                    OpData::default()
                                        .with_key(str_bytes(key))
                                        .with_value(value.unwrap_or_default())
                                        .with_remove(value.is_none())
                                })
                                .collect(),
                        )
                    })
                    .collect(),
            )
            .with_validate_only(validate_only);
        let response = self
            .within("AlterClientQuotas", self.call_any(request))
            .await?;
        Ok(response
            .entries
            .iter()
            .map(|entry| {
                let entity = entity_of!(entry.entity);
                (
                    entity,
                    outcome(entry.error_code, entry.error_message.as_ref()),
                )
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entities_and_filters_on_the_wire() {
        let entity = ClientQuotaEntity::user("bob").and("client-id", None);
        let wire = entity.wire();
        assert_eq!(wire.len(), 2);
        assert_eq!(wire[0].entity_type.as_str(), "client-id");
        assert_eq!(wire[0].entity_name, None, "the default client id");
        assert_eq!(
            wire[1].entity_name.as_ref().map(StrBytes::as_str),
            Some("bob")
        );
        let back = ClientQuotaEntity::from_wire(
            wire.iter()
                .map(|e| (&e.entity_type, e.entity_name.as_ref())),
        );
        assert_eq!(back, entity);

        let request = ClientQuotaFilter::all()
            .containing(QuotaFilterComponent::Exact("user".into(), "bob".into()))
            .containing(QuotaFilterComponent::Default("client-id".into()))
            .strict()
            .request();
        let types: Vec<i8> = request.components.iter().map(|c| c.match_type).collect();
        assert_eq!(types, [0, 1]);
        assert!(request.strict);
    }
}
