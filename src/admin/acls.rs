//! Access control lists (KIP-140): CreateAcls, DescribeAcls and DeleteAcls.
//!
//! Any broker answers: under KRaft a broker forwards the change to the active controller,
//! which keeps ACLs in the metadata log, and `StandardAuthorizer` enforces them. An ACL is a
//! *binding*: a resource pattern (a topic, a group, the cluster, ...; by literal name or
//! prefix) and an entry (principal, host, operation, allow or deny). A *filter* matches
//! bindings, each field either exact or "any".

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};
use kafka_protocol::protocol::StrBytes;

use super::Admin;
use super::wire::{outcome, string, wire_enum};
use crate::error::{Error, Result};
use crate::protocol::generated::str_bytes;

wire_enum! {
    /// What kind of resource an ACL is about (Kafka's `ResourceType`).
    ResourceType: i8 {
        /// Any type (filters only).
        Any = 1,
        /// A topic.
        Topic = 2,
        /// A consumer group.
        Group = 3,
        /// The cluster (its one resource is named `kafka-cluster`).
        Cluster = 4,
        /// A transactional id.
        TransactionalId = 5,
        /// A delegation token.
        DelegationToken = 6,
        /// A user (for delegation tokens made on another's behalf, KIP-373).
        User = 7,
    }
}

wire_enum! {
    /// How an ACL's resource name matches (Kafka's `PatternType`, KIP-290).
    PatternType: i8 {
        /// Any pattern type (filters only).
        Any = 1,
        /// Every binding that would apply to the filter's name: literal, wildcard and
        /// matching prefixes (filters only).
        Match = 2,
        /// The name exactly (`*` is the wildcard for every resource of the type).
        Literal = 3,
        /// Every resource whose name starts with the name.
        Prefixed = 4,
    }
}

wire_enum! {
    /// What an ACL allows or denies (Kafka's `AclOperation`).
    AclOperation: i8 {
        /// Any operation (filters only).
        Any = 1,
        /// Every operation.
        All = 2,
        /// Read (consume, fetch offsets).
        Read = 3,
        /// Write (produce).
        Write = 4,
        /// Create (topics).
        Create = 5,
        /// Delete (topics, records, groups).
        Delete = 6,
        /// Alter (partitions, ACLs).
        Alter = 7,
        /// Describe (metadata, offsets, producers).
        Describe = 8,
        /// Cluster actions (the brokers' own requests, WriteTxnMarkers).
        ClusterAction = 9,
        /// Describe configs.
        DescribeConfigs = 10,
        /// Alter configs.
        AlterConfigs = 11,
        /// Idempotent produce.
        IdempotentWrite = 12,
        /// Create delegation tokens.
        CreateTokens = 13,
        /// Describe delegation tokens.
        DescribeTokens = 14,
        /// Two-phase commit (KIP-939).
        TwoPhaseCommit = 15,
    }
}

wire_enum! {
    /// Whether an ACL allows or denies (Kafka's `AclPermissionType`); a deny wins.
    AclPermission: i8 {
        /// Either (filters only).
        Any = 1,
        /// Denies.
        Deny = 2,
        /// Allows.
        Allow = 3,
    }
}

impl AclOperation {
    /// The operations of an authorized-operations bit field (KIP-430: bit `n` set means
    /// operation code `n` is allowed); `None` for Kafka's "not asked" value, `i32::MIN`.
    pub(crate) fn from_bits(bits: i32) -> Option<Vec<AclOperation>> {
        (bits != i32::MIN).then(|| {
            (0..32)
                .filter(|bit| bits & (1 << bit) != 0)
                .filter_map(|bit| i8::try_from(bit).ok())
                .map(AclOperation::from_code)
                .collect()
        })
    }
}

/// The resources an ACL applies to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub struct ResourcePattern {
    /// The kind of resource.
    pub resource_type: ResourceType,
    /// The name (or prefix).
    pub name: String,
    /// How the name matches.
    pub pattern_type: PatternType,
}

impl ResourcePattern {
    /// The resource named exactly `name` (`*`: every resource of the type).
    pub fn literal(resource_type: ResourceType, name: impl Into<String>) -> Self {
        ResourcePattern {
            resource_type,
            name: name.into(),
            pattern_type: PatternType::Literal,
        }
    }

    /// Every resource of the type whose name starts with `prefix`.
    pub fn prefixed(resource_type: ResourceType, prefix: impl Into<String>) -> Self {
        ResourcePattern {
            resource_type,
            name: prefix.into(),
            pattern_type: PatternType::Prefixed,
        }
    }

    /// The cluster itself (the resource `kafka-cluster`).
    pub fn cluster() -> Self {
        ResourcePattern::literal(ResourceType::Cluster, "kafka-cluster")
    }
}

/// Who may (or may not) do what, from where.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub struct AccessControlEntry {
    /// The principal, `User:<name>` (`User:*`: everyone).
    pub principal: String,
    /// The client host, `*` for any.
    pub host: String,
    /// The operation.
    pub operation: AclOperation,
    /// Allow or deny.
    pub permission: AclPermission,
}

impl AccessControlEntry {
    /// Allows `principal` `operation` from any host.
    pub fn allow(principal: impl Into<String>, operation: AclOperation) -> Self {
        AccessControlEntry {
            principal: principal.into(),
            host: "*".into(),
            operation,
            permission: AclPermission::Allow,
        }
    }

    /// Denies `principal` `operation` from any host.
    pub fn deny(principal: impl Into<String>, operation: AclOperation) -> Self {
        AccessControlEntry {
            permission: AclPermission::Deny,
            ..AccessControlEntry::allow(principal, operation)
        }
    }

    /// The same entry for `host` only.
    pub fn from_host(mut self, host: impl Into<String>) -> Self {
        self.host = host.into();
        self
    }
}

/// One ACL: an entry bound to a resource pattern.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub struct AclBinding {
    /// The resources.
    pub pattern: ResourcePattern,
    /// Who, from where, what, allowed or denied.
    pub entry: AccessControlEntry,
}

impl AclBinding {
    /// `entry` on `pattern`.
    pub fn new(pattern: ResourcePattern, entry: AccessControlEntry) -> Self {
        AclBinding { pattern, entry }
    }

    /// The filter that matches this binding exactly.
    pub fn to_filter(&self) -> AclBindingFilter {
        AclBindingFilter {
            resource_type: self.pattern.resource_type,
            name: Some(self.pattern.name.clone()),
            pattern_type: self.pattern.pattern_type,
            principal: Some(self.entry.principal.clone()),
            host: Some(self.entry.host.clone()),
            operation: self.entry.operation,
            permission: self.entry.permission,
        }
    }
}

/// Which ACLs [`Admin::describe_acls`] and [`Admin::delete_acls`] match: every field set
/// must match; `Any` and `None` match anything. The default matches every ACL.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub struct AclBindingFilter {
    /// The resource type.
    pub resource_type: ResourceType,
    /// The resource name.
    pub name: Option<String>,
    /// The pattern type ([`PatternType::Match`]: every pattern that applies to `name`).
    pub pattern_type: PatternType,
    /// The principal.
    pub principal: Option<String>,
    /// The host.
    pub host: Option<String>,
    /// The operation.
    pub operation: AclOperation,
    /// The permission.
    pub permission: AclPermission,
}

impl Default for AclBindingFilter {
    fn default() -> Self {
        AclBindingFilter {
            resource_type: ResourceType::Any,
            name: None,
            pattern_type: PatternType::Any,
            principal: None,
            host: None,
            operation: AclOperation::Any,
            permission: AclPermission::Any,
        }
    }
}

impl AclBindingFilter {
    /// Only ACLs on resources of `resource_type` named `name` (literally, as stored).
    pub fn resource(mut self, resource_type: ResourceType, name: impl Into<String>) -> Self {
        self.resource_type = resource_type;
        self.name = Some(name.into());
        self
    }

    /// Only ACLs of this pattern type.
    pub fn pattern_type(mut self, pattern_type: PatternType) -> Self {
        self.pattern_type = pattern_type;
        self
    }

    /// Only ACLs of `principal`.
    pub fn principal(mut self, principal: impl Into<String>) -> Self {
        self.principal = Some(principal.into());
        self
    }

    /// Only ACLs for `operation`.
    pub fn operation(mut self, operation: AclOperation) -> Self {
        self.operation = operation;
        self
    }

    /// Only ACLs with `permission`.
    pub fn permission(mut self, permission: AclPermission) -> Self {
        self.permission = permission;
        self
    }

    fn optional(s: &Option<String>) -> Option<StrBytes> {
        s.as_deref().map(str_bytes)
    }
}

/// `$wire` (a DescribeAclsRequest or a DeleteAcls filter: the same fields under the same
/// names) with the fields of the [`AclBindingFilter`] `$filter`.
macro_rules! with_filter {
    ($wire:expr, $filter:expr) => {{
        let filter: &AclBindingFilter = $filter;
        $wire
            .with_resource_type_filter(filter.resource_type.code())
            .with_resource_name_filter(AclBindingFilter::optional(&filter.name))
            .with_pattern_type_filter(filter.pattern_type.code())
            .with_principal_filter(AclBindingFilter::optional(&filter.principal))
            .with_host_filter(AclBindingFilter::optional(&filter.host))
            .with_operation(filter.operation.code())
            .with_permission_type(filter.permission.code())
    }};
}

/// A binding of a DescribeAcls or DeleteAcls answer.
fn binding(
    (resource_type, name, pattern_type): (i8, &StrBytes, i8),
    (principal, host, operation, permission): (&StrBytes, &StrBytes, i8, i8),
) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern {
            resource_type: ResourceType::from_code(resource_type),
            name: string(name),
            pattern_type: PatternType::from_code(pattern_type),
        },
        entry: AccessControlEntry {
            principal: string(principal),
            host: string(host),
            operation: AclOperation::from_code(operation),
            permission: AclPermission::from_code(permission),
        },
    }
}

/// The ACLs each filter of [`Admin::delete_acls`] deleted, each with its own outcome.
pub type DeletedAcls = Vec<(AclBinding, Result<()>)>;

impl Admin {
    /// Creates ACLs (CreateAcls; the principal needs ALTER on the cluster). One result per
    /// binding, in the order given: an invalid one (an `Any` field, a malformed principal) is
    /// refused alone with INVALID_REQUEST and the broker's reason.
    pub async fn create_acls(
        &self,
        bindings: impl IntoIterator<Item = AclBinding>,
    ) -> Result<Vec<(AclBinding, Result<()>)>> {
        let bindings: Vec<AclBinding> = bindings.into_iter().collect();
        let request = CreateAclsRequest::default().with_creations(
            bindings
                .iter()
                .map(|b| {
                    AclCreation::default()
                        .with_resource_type(b.pattern.resource_type.code())
                        .with_resource_name(str_bytes(&b.pattern.name))
                        .with_resource_pattern_type(b.pattern.pattern_type.code())
                        .with_principal(str_bytes(&b.entry.principal))
                        .with_host(str_bytes(&b.entry.host))
                        .with_operation(b.entry.operation.code())
                        .with_permission_type(b.entry.permission.code())
                })
                .collect(),
        );
        let response = self.within("CreateAcls", self.call_any(request)).await?;
        if response.results.len() != bindings.len() {
            return Err(Error::InvalidState(format!(
                "CreateAcls answered {} results for {} ACLs",
                response.results.len(),
                bindings.len()
            )));
        }
        Ok(bindings
            .into_iter()
            .zip(response.results)
            .map(|(b, r)| (b, outcome(r.error_code, r.error_message.as_ref())))
            .collect())
    }

    /// The ACLs `filter` matches (DescribeAcls; the principal needs DESCRIBE on the cluster),
    /// sorted.
    pub async fn describe_acls(&self, filter: &AclBindingFilter) -> Result<Vec<AclBinding>> {
        let request = with_filter!(DescribeAclsRequest::default(), filter);
        let response = self.within("DescribeAcls", self.call_any(request)).await?;
        outcome(response.error_code, response.error_message.as_ref())?;
        let mut bindings: Vec<AclBinding> = response
            .resources
            .iter()
            .flat_map(|r| {
                r.acls.iter().map(move |a| {
                    binding(
                        (r.resource_type, &r.resource_name, r.pattern_type),
                        (&a.principal, &a.host, a.operation, a.permission_type),
                    )
                })
            })
            .collect();
        bindings.sort();
        Ok(bindings)
    }

    /// Deletes every ACL each filter matches (DeleteAcls; the principal needs ALTER on the
    /// cluster). One result per filter, in the order given: the ACLs it deleted, each with
    /// its own outcome.
    pub async fn delete_acls(
        &self,
        filters: impl IntoIterator<Item = AclBindingFilter>,
    ) -> Result<Vec<(AclBindingFilter, Result<DeletedAcls>)>> {
        let filters: Vec<AclBindingFilter> = filters.into_iter().collect();
        let request = DeleteAclsRequest::default().with_filters(
            filters
                .iter()
                .map(|f| with_filter!(DeleteAclsFilter::default(), f))
                .collect(),
        );
        let response = self.within("DeleteAcls", self.call_any(request)).await?;
        if response.filter_results.len() != filters.len() {
            return Err(Error::InvalidState(format!(
                "DeleteAcls answered {} results for {} filters",
                response.filter_results.len(),
                filters.len()
            )));
        }
        Ok(filters
            .into_iter()
            .zip(response.filter_results)
            .map(|(filter, result)| {
                let deleted = outcome(result.error_code, result.error_message.as_ref()).map(|()| {
                    result
                        .matching_acls
                        .iter()
                        .map(|m| {
                            let acl = binding(
                                (m.resource_type, &m.resource_name, m.pattern_type),
                                (&m.principal, &m.host, m.operation, m.permission_type),
                            );
                            (acl, outcome(m.error_code, m.error_message.as_ref()))
                        })
                        .collect()
                });
                (filter, deleted)
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_unknown_codes_are_kept() {
        for code in 1..=7 {
            assert_eq!(ResourceType::from_code(code).code(), code);
        }
        assert_eq!(ResourceType::from_code(2), ResourceType::Topic);
        assert_eq!(ResourceType::from_code(42), ResourceType::Unknown(42));
        assert_eq!(AclOperation::from_code(4), AclOperation::Write);
        assert_eq!(PatternType::Prefixed.code(), 4);
        assert_eq!(AclPermission::Allow.code(), 3);
    }

    #[test]
    fn authorized_operations_bits() {
        assert_eq!(AclOperation::from_bits(i32::MIN), None, "not asked");
        assert_eq!(
            AclOperation::from_bits((1 << 3) | (1 << 8)),
            Some(vec![AclOperation::Read, AclOperation::Describe])
        );
    }

    #[test]
    fn a_binding_filters_for_itself() {
        let binding = AclBinding::new(
            ResourcePattern::literal(ResourceType::Topic, "t"),
            AccessControlEntry::deny("User:bob", AclOperation::Read).from_host("10.0.0.1"),
        );
        let filter = binding.to_filter();
        assert_eq!(filter.name.as_deref(), Some("t"));
        assert_eq!(filter.host.as_deref(), Some("10.0.0.1"));
        assert_eq!(filter.permission, AclPermission::Deny);
        assert_eq!(AclBindingFilter::default().operation, AclOperation::Any);
    }
}
