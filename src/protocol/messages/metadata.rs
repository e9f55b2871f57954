//! MetadataResponse (API key 3): the brokers of the cluster and the leaders of topic partitions.
//! The request is generated (`super::super::generated`).
//!
//! Schemas `MetadataRequest.json` / `MetadataResponse.json`: versions 0–13 (Kafka 4.0 and 4.1
//! add nothing above 13), flexible from v9 (KIP-482).
//!
//! Version history: v1 adds the broker rack, the controller id and `is_internal`, and makes a
//! null topic list mean "all topics"; v2 adds the cluster id; v3 adds throttle time; v4 adds
//! `allow_auto_topic_creation` (KIP-204); v5 adds offline replicas; v6 is the same as v5; v7 adds
//! the partition leader epoch (KIP-320); v8 adds authorized operations (KIP-430); v9 is the
//! first flexible version; v10 adds topic ids (KIP-516), though brokers only serve lookups by
//! id from v12, which lets response topic names be null; v11 drops the cluster authorized
//! operations (KIP-700); v13 adds a top-level error code (KIP-1102, REBOOTSTRAP_REQUIRED).

use bytes::BufMut;

use super::fields::{put_string_nullable_if, read_string_nullable_if};
use crate::protocol::header::check_version;
use crate::protocol::{ApiKey, DecodeError, Decoder, Message, WireWrite};

/// The authorized-operations value meaning "not requested" (`INT32_MIN`, the schema default).
pub const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;

/// Metadata response body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataResponse {
    /// v3+: how long the request was throttled by a quota, in milliseconds.
    pub throttle_time_ms: i32,
    /// The brokers of the cluster.
    pub brokers: Vec<BrokerEndpoint>,
    /// v2+: the cluster id, or null.
    pub cluster_id: Option<String>,
    /// v1+: the controller's broker id; -1 when unknown (the default).
    pub controller_id: i32,
    /// Each topic asked for.
    pub topics: Vec<MetadataResponseTopic>,
    /// v8–10: the cluster's authorized operations bit field (KIP-430);
    /// [`AUTHORIZED_OPERATIONS_OMITTED`] when not requested.
    pub cluster_authorized_operations: i32,
    /// v13+: the top-level error code (KIP-1102).
    pub error_code: i16,
}

impl Default for MetadataResponse {
    fn default() -> Self {
        Self {
            throttle_time_ms: 0,
            brokers: Vec::new(),
            cluster_id: None,
            controller_id: -1,
            topics: Vec::new(),
            cluster_authorized_operations: AUTHORIZED_OPERATIONS_OMITTED,
            error_code: 0,
        }
    }
}

/// A broker's id and address. Used by Metadata (`brokers`) and by the `NodeEndpoints` of
/// Produce v10+ and Fetch v16+ responses (KIP-951), which have the same fields.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BrokerEndpoint {
    /// The broker id.
    pub node_id: i32,
    /// The broker's host name.
    pub host: String,
    /// The broker's port.
    pub port: i32,
    /// The broker's rack, or null (Metadata v1+).
    pub rack: Option<String>,
}

impl BrokerEndpoint {
    /// Writes the endpoint; `with_rack` says whether the version has the rack.
    pub(crate) fn encode<B: BufMut>(&self, with_rack: bool, flexible: bool, out: &mut B) {
        out.put_i32(self.node_id);
        out.put_string(flexible, &self.host);
        out.put_i32(self.port);
        if with_rack {
            out.put_nullable_string(flexible, self.rack.as_deref());
        }
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    /// Reads an endpoint written by [`BrokerEndpoint::encode`] with the same flags.
    pub(crate) fn decode(
        d: &mut Decoder<'_>,
        with_rack: bool,
        flexible: bool,
    ) -> Result<Self, DecodeError> {
        let mut broker = Self {
            node_id: d.i32("BrokerEndpoint.node_id")?,
            host: d.string(flexible, "BrokerEndpoint.host")?,
            port: d.i32("BrokerEndpoint.port")?,
            rack: None,
        };
        if with_rack {
            broker.rack = d.nullable_string(flexible, "BrokerEndpoint.rack")?;
        }
        if flexible {
            d.skip_tagged_fields("BrokerEndpoint.tagged_fields")?;
        }
        Ok(broker)
    }

    /// Writes a `NodeEndpoints` array (KIP-951). It only exists in tagged fields, so it is
    /// always flexible, and its endpoints always have the rack.
    pub(super) fn put_node_endpoints<B: BufMut>(out: &mut B, endpoints: &[Self]) {
        out.put_array(true, endpoints, |out, e| e.encode(true, true, out));
    }

    /// Reads an array written by [`BrokerEndpoint::put_node_endpoints`].
    pub(super) fn read_node_endpoints(
        d: &mut Decoder<'_>,
        context: &'static str,
    ) -> Result<Vec<Self>, DecodeError> {
        d.array_of(true, context, |d| Self::decode(d, true, true))
    }
}

/// One topic of a [`MetadataResponse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataResponseTopic {
    /// The topic's error code.
    pub error_code: i16,
    /// The topic name. Null only from v12, for a topic asked by id that does not exist;
    /// below v12 `None` is written as an empty name.
    pub name: Option<String>,
    /// v10+: the topic id (KIP-516); zero for a topic asked by name that does not exist.
    pub topic_id: [u8; 16],
    /// v1+: whether the topic is internal.
    pub is_internal: bool,
    /// The topic's partitions.
    pub partitions: Vec<MetadataResponsePartition>,
    /// v8+: the topic's authorized operations bit field (KIP-430);
    /// [`AUTHORIZED_OPERATIONS_OMITTED`] when not requested.
    pub topic_authorized_operations: i32,
}

impl Default for MetadataResponseTopic {
    fn default() -> Self {
        Self {
            error_code: 0,
            name: None,
            topic_id: [0; 16],
            is_internal: false,
            partitions: Vec::new(),
            topic_authorized_operations: AUTHORIZED_OPERATIONS_OMITTED,
        }
    }
}

/// One partition of a [`MetadataResponseTopic`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataResponsePartition {
    /// The partition's error code.
    pub error_code: i16,
    /// The partition index.
    pub partition_index: i32,
    /// The leader's broker id, -1 when there is none.
    pub leader_id: i32,
    /// v7+: the leader epoch (KIP-320); -1 when unknown (the default).
    pub leader_epoch: i32,
    /// The brokers holding a replica.
    pub replica_nodes: Vec<i32>,
    /// The in-sync replicas.
    pub isr_nodes: Vec<i32>,
    /// v5+: the offline replicas.
    pub offline_replicas: Vec<i32>,
}

impl Default for MetadataResponsePartition {
    fn default() -> Self {
        Self {
            error_code: 0,
            partition_index: 0,
            leader_id: 0,
            leader_epoch: -1,
            replica_nodes: Vec::new(),
            isr_nodes: Vec::new(),
            offline_replicas: Vec::new(),
        }
    }
}

impl MetadataResponsePartition {
    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = MetadataResponse::is_flexible(version);
        out.put_i16(self.error_code);
        out.put_i32(self.partition_index);
        out.put_i32(self.leader_id);
        if version >= 7 {
            out.put_i32(self.leader_epoch);
        }
        out.put_array(flexible, &self.replica_nodes, |out, id| out.put_i32(*id));
        out.put_array(flexible, &self.isr_nodes, |out, id| out.put_i32(*id));
        if version >= 5 {
            out.put_array(flexible, &self.offline_replicas, |out, id| out.put_i32(*id));
        }
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        const REPLICA: &str = "MetadataResponsePartition.replica_nodes";
        let flexible = MetadataResponse::is_flexible(version);
        let mut partition = Self {
            error_code: d.i16("MetadataResponsePartition.error_code")?,
            partition_index: d.i32("MetadataResponsePartition.partition_index")?,
            leader_id: d.i32("MetadataResponsePartition.leader_id")?,
            ..Self::default()
        };
        if version >= 7 {
            partition.leader_epoch = d.i32("MetadataResponsePartition.leader_epoch")?;
        }
        partition.replica_nodes = d.array_of(flexible, REPLICA, |d| d.i32(REPLICA))?;
        partition.isr_nodes = d.array_of(flexible, REPLICA, |d| d.i32(REPLICA))?;
        if version >= 5 {
            partition.offline_replicas = d.array_of(flexible, REPLICA, |d| d.i32(REPLICA))?;
        }
        if flexible {
            d.skip_tagged_fields("MetadataResponsePartition.tagged_fields")?;
        }
        Ok(partition)
    }
}

impl MetadataResponseTopic {
    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = MetadataResponse::is_flexible(version);
        out.put_i16(self.error_code);
        put_string_nullable_if(out, flexible, version >= 12, self.name.as_deref());
        if version >= 10 {
            out.put_uuid(&self.topic_id);
        }
        if version >= 1 {
            out.put_bool(self.is_internal);
        }
        out.put_array(flexible, &self.partitions, |out, p| p.encode(version, out));
        if version >= 8 {
            out.put_i32(self.topic_authorized_operations);
        }
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        let flexible = MetadataResponse::is_flexible(version);
        let mut topic = Self {
            error_code: d.i16("MetadataResponseTopic.error_code")?,
            name: read_string_nullable_if(
                d,
                flexible,
                version >= 12,
                "MetadataResponseTopic.name",
            )?,
            ..Self::default()
        };
        if version >= 10 {
            topic.topic_id = d.uuid("MetadataResponseTopic.topic_id")?;
        }
        if version >= 1 {
            topic.is_internal = d.bool("MetadataResponseTopic.is_internal")?;
        }
        topic.partitions = d.array_of(flexible, "MetadataResponseTopic.partitions", |d| {
            MetadataResponsePartition::decode(d, version)
        })?;
        if version >= 8 {
            topic.topic_authorized_operations =
                d.i32("MetadataResponseTopic.topic_authorized_operations")?;
        }
        if flexible {
            d.skip_tagged_fields("MetadataResponseTopic.tagged_fields")?;
        }
        Ok(topic)
    }
}

impl Message for MetadataResponse {
    const API_KEY: ApiKey = ApiKey::Metadata;
    const MIN_VERSION: i16 = 0;
    const MAX_VERSION: i16 = 13;
    const FLEXIBLE_FROM: i16 = 9;

    fn encode<B: BufMut>(&self, version: i16, out: &mut B) {
        let flexible = Self::is_flexible(version);
        if version >= 3 {
            out.put_i32(self.throttle_time_ms);
        }
        out.put_array(flexible, &self.brokers, |out, b| {
            b.encode(version >= 1, flexible, out)
        });
        if version >= 2 {
            out.put_nullable_string(flexible, self.cluster_id.as_deref());
        }
        if version >= 1 {
            out.put_i32(self.controller_id);
        }
        out.put_array(flexible, &self.topics, |out, t| t.encode(version, out));
        if (8..=10).contains(&version) {
            out.put_i32(self.cluster_authorized_operations);
        }
        if version >= 13 {
            out.put_i16(self.error_code);
        }
        if flexible {
            out.put_empty_tagged_fields();
        }
    }

    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        check_version::<Self>(d, version)?;
        let flexible = Self::is_flexible(version);
        let mut response = Self::default();
        if version >= 3 {
            response.throttle_time_ms = d.i32("MetadataResponse.throttle_time_ms")?;
        }
        response.brokers = d.array_of(flexible, "MetadataResponse.brokers", |d| {
            BrokerEndpoint::decode(d, version >= 1, flexible)
        })?;
        if version >= 2 {
            response.cluster_id = d.nullable_string(flexible, "MetadataResponse.cluster_id")?;
        }
        if version >= 1 {
            response.controller_id = d.i32("MetadataResponse.controller_id")?;
        }
        response.topics = d.array_of(flexible, "MetadataResponse.topics", |d| {
            MetadataResponseTopic::decode(d, version)
        })?;
        if (8..=10).contains(&version) {
            response.cluster_authorized_operations =
                d.i32("MetadataResponse.cluster_authorized_operations")?;
        }
        if version >= 13 {
            response.error_code = d.i16("MetadataResponse.error_code")?;
        }
        if flexible {
            d.skip_tagged_fields("MetadataResponse.tagged_fields")?;
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::test_support::{assert_golden, assert_robust};

    fn sample_response() -> MetadataResponse {
        MetadataResponse {
            throttle_time_ms: 3,
            brokers: vec![BrokerEndpoint {
                node_id: 1,
                host: "127.0.0.1".into(),
                port: 9092,
                rack: Some("r1".into()),
            }],
            cluster_id: Some("cluster".into()),
            controller_id: 1,
            topics: vec![MetadataResponseTopic {
                error_code: 0,
                name: Some("orders".into()),
                topic_id: [9; 16],
                is_internal: false,
                partitions: vec![MetadataResponsePartition {
                    error_code: 0,
                    partition_index: 2,
                    leader_id: 1,
                    leader_epoch: 5,
                    replica_nodes: vec![1, 2],
                    isr_nodes: vec![1],
                    offline_replicas: vec![2],
                }],
                topic_authorized_operations: 0x0f,
            }],
            cluster_authorized_operations: 0x1f,
            error_code: 0,
        }
    }

    #[test]
    fn golden_response_v1_classic() {
        let response = MetadataResponse {
            brokers: vec![BrokerEndpoint {
                node_id: 1,
                host: "h".into(),
                port: 9092,
                rack: None,
            }],
            controller_id: 1,
            topics: vec![MetadataResponseTopic {
                error_code: 0,
                name: Some("t".into()),
                is_internal: true,
                partitions: vec![MetadataResponsePartition {
                    error_code: 0,
                    partition_index: 0,
                    leader_id: 1,
                    replica_nodes: vec![1],
                    isr_nodes: vec![1],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        #[rustfmt::skip]
        let v1 = [
            0x00, 0x00, 0x00, 0x01,       // brokers: 1
            0x00, 0x00, 0x00, 0x01,       //   node_id 1
            0x00, 0x01, b'h',             //   host "h"
            0x00, 0x00, 0x23, 0x84,       //   port 9092
            0xff, 0xff,                   //   rack null
            0x00, 0x00, 0x00, 0x01,       // controller_id 1
            0x00, 0x00, 0x00, 0x01,       // topics: 1
            0x00, 0x00,                   //   error_code 0
            0x00, 0x01, b't',             //   name "t"
            0x01,                         //   is_internal true
            0x00, 0x00, 0x00, 0x01,       //   partitions: 1
            0x00, 0x00,                   //     error_code 0
            0x00, 0x00, 0x00, 0x00,       //     partition_index 0
            0x00, 0x00, 0x00, 0x01,       //     leader_id 1
            0x00, 0x00, 0x00, 0x01,       //     replica_nodes: 1
            0x00, 0x00, 0x00, 0x01,       //       1
            0x00, 0x00, 0x00, 0x01,       //     isr_nodes: 1
            0x00, 0x00, 0x00, 0x01,       //       1
        ];
        assert_golden(&response, 1, &v1);
    }

    #[test]
    fn golden_response_v13_flexible() {
        let response = MetadataResponse {
            throttle_time_ms: 0,
            brokers: vec![BrokerEndpoint {
                node_id: 2,
                host: "h".into(),
                port: 1,
                rack: Some("r".into()),
            }],
            cluster_id: None,
            controller_id: 2,
            topics: vec![MetadataResponseTopic {
                error_code: 3,
                name: None,
                topic_id: [1; 16],
                is_internal: false,
                partitions: vec![],
                topic_authorized_operations: -2147483648,
            }],
            cluster_authorized_operations: AUTHORIZED_OPERATIONS_OMITTED,
            error_code: 7,
        };
        #[rustfmt::skip]
        let v13 = [
            0x00, 0x00, 0x00, 0x00,       // throttle_time_ms 0
            0x02,                         // brokers: compact 1+1
            0x00, 0x00, 0x00, 0x02,       //   node_id 2
            0x02, b'h',                   //   host "h"
            0x00, 0x00, 0x00, 0x01,       //   port 1
            0x02, b'r',                   //   rack "r"
            0x00,                         //   broker tagged fields
            0x00,                         // cluster_id: compact null
            0x00, 0x00, 0x00, 0x02,       // controller_id 2
            0x02,                         // topics: compact 1+1
            0x00, 0x03,                   //   error_code 3 (UNKNOWN_TOPIC_OR_PARTITION)
            0x00,                         //   name: compact null
            1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, // topic_id
            0x00,                         //   is_internal false
            0x01,                         //   partitions: compact 0+1
            0x80, 0x00, 0x00, 0x00,       //   topic_authorized_operations INT32_MIN
            0x00,                         //   topic tagged fields
            0x00, 0x07,                   // error_code 7
            0x00,                         // tagged fields
        ];
        assert_golden(&response, 13, &v13);
    }

    #[test]
    fn truncated_and_random_input_is_an_error_not_a_panic() {
        assert_robust(&sample_response());
    }
}
