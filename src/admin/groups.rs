//! Consumer groups: list (every broker: each lists the groups it coordinates), describe
//! (classic groups with DescribeGroups, KIP-848 consumer groups with ConsumerGroupDescribe,
//! picked by the type ListGroups v5 reports), committed offsets (OffsetFetch), moving them
//! (OffsetCommit from outside the group), deleting offsets (OffsetDelete) and groups
//! (DeleteGroups). Everything but the listing goes to the group's coordinator.

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, DeleteGroupsRequest,
    DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse, ListGroupsRequest,
    OffsetCommitRequest, OffsetDeleteRequest, OffsetDeleteResponse, OffsetFetchRequest,
    consumer_group_describe_response, describe_groups_response,
};

use kafka_protocol::protocol::StrBytes;

use super::wire::{by_topic, outcome, string};
use super::{Admin, CoordinatorAnswer, CoordinatorKind, coordinator_error};
use crate::consumer::assignor::decode_assignment;
use crate::error::{Error, Result};
use crate::protocol::error_code::ErrorCode;
use crate::protocol::generated::{group_id, str_bytes, topic_name};
use crate::protocol::messages::offset_commit::OffsetCommitResponse;
use crate::protocol::messages::offset_fetch::OffsetFetchResponse;
use crate::types::TopicPartition;

/// Which group protocol a group runs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GroupType {
    /// The classic protocol (JoinGroup / SyncGroup), consumers' or Connect's.
    Classic,
    /// KIP-848's consumer group protocol (ConsumerGroupHeartbeat).
    Consumer,
    /// Another type (`share`, `streams`), by Kafka's name.
    Other(String),
}

impl GroupType {
    /// The type ListGroups names; a broker below ListGroups v5 names none, and has only
    /// classic groups to list then.
    fn from_name(name: &str) -> Self {
        match name {
            "" | "classic" => GroupType::Classic,
            "consumer" => GroupType::Consumer,
            other => GroupType::Other(other.to_owned()),
        }
    }
}

/// One group of [`Admin::list_groups`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupListing {
    /// The group id.
    pub group_id: String,
    /// Its protocol.
    pub group_type: GroupType,
    /// Its state (`Stable`, `Empty`, `PreparingRebalance`, ...; Kafka's names).
    pub state: String,
    /// The classic protocol type (`consumer`, `connect`; empty for a KIP-848 group).
    pub protocol_type: String,
}

/// A group as its coordinator describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupDescription {
    /// The group id.
    pub group_id: String,
    /// Its protocol.
    pub group_type: GroupType,
    /// Its state (Kafka's names: `Stable`, `Empty`, `Dead`, ...).
    pub state: String,
    /// The assignor: the classic group's chosen protocol (`range`, `cooperative-sticky`) or
    /// the KIP-848 group's server-side assignor (`uniform`).
    pub assignor: String,
    /// The KIP-848 group's epoch; `None` for a classic group.
    pub group_epoch: Option<i32>,
    /// The coordinator's node id.
    pub coordinator: i32,
    /// The members.
    pub members: Vec<GroupMember>,
}

/// One member of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupMember {
    /// The member id.
    pub member_id: String,
    /// The static member's instance id (KIP-345).
    pub instance_id: Option<String>,
    /// The member's `client.id`.
    pub client_id: String,
    /// The host it connected from, as the broker saw it.
    pub host: String,
    /// The partitions assigned to it.
    pub assignment: Vec<TopicPartition>,
}

/// A committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommittedOffset {
    /// The next offset the group consumes.
    pub offset: i64,
    /// The leader epoch committed with it, if any.
    pub leader_epoch: Option<i32>,
    /// The metadata committed with it.
    pub metadata: Option<String>,
}

impl CoordinatorAnswer for DescribeGroupsResponse {
    fn coordinator_error(&self) -> Option<ErrorCode> {
        coordinator_error(self.groups.iter().map(|g| g.error_code))
    }
}

impl CoordinatorAnswer for ConsumerGroupDescribeResponse {
    fn coordinator_error(&self) -> Option<ErrorCode> {
        coordinator_error(self.groups.iter().map(|g| g.error_code))
    }
}

impl CoordinatorAnswer for DeleteGroupsResponse {
    fn coordinator_error(&self) -> Option<ErrorCode> {
        coordinator_error(self.results.iter().map(|g| g.error_code))
    }
}

impl CoordinatorAnswer for OffsetDeleteResponse {
    fn coordinator_error(&self) -> Option<ErrorCode> {
        coordinator_error(std::iter::once(self.error_code))
    }
}

impl CoordinatorAnswer for OffsetFetchResponse {
    fn coordinator_error(&self) -> Option<ErrorCode> {
        let groups = self.groups.iter().map(|g| g.error_code);
        coordinator_error(std::iter::once(self.error_code).chain(groups))
    }
}

impl CoordinatorAnswer for OffsetCommitResponse {
    fn coordinator_error(&self) -> Option<ErrorCode> {
        coordinator_error(
            self.topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
        )
    }
}

impl Admin {
    /// Every group of the cluster: ListGroups on every broker (each lists the groups it
    /// coordinates), sorted by group id. A broker that does not answer fails the call: the
    /// groups it coordinates could not be listed.
    pub async fn list_groups(&self) -> Result<Vec<GroupListing>> {
        self.within("ListGroups", async {
            let cluster = self.cluster().await?;
            let mut groups = BTreeMap::new();
            for broker in cluster.brokers.keys() {
                let response = self
                    .call_broker(*broker, ListGroupsRequest::default())
                    .await?;
                outcome(response.error_code, None)?;
                for g in response.groups {
                    let listing = GroupListing {
                        group_id: string(&g.group_id.0),
                        group_type: GroupType::from_name(g.group_type.as_str()),
                        state: string(&g.group_state),
                        protocol_type: string(&g.protocol_type),
                    };
                    groups.insert(listing.group_id.clone(), listing);
                }
            }
            Ok(groups.into_values().collect())
        })
        .await
    }

    /// Describes groups: members, their assignments, state, assignor. One result per group;
    /// one that does not exist is GROUP_ID_NOT_FOUND with the broker's message (Kafka 4.x;
    /// older brokers describe it in state `Dead`). Share and streams groups are asked with
    /// DescribeGroups, which describes classic groups only: the broker's refusal is their
    /// result.
    pub async fn describe_groups(
        &self,
        groups: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> Result<BTreeMap<String, Result<GroupDescription>>> {
        let ids: Vec<String> = groups.into_iter().map(|g| g.as_ref().to_owned()).collect();
        self.within("DescribeGroups", async {
            let types: HashMap<String, GroupType> = self
                .list_groups()
                .await?
                .into_iter()
                .map(|g| (g.group_id, g.group_type))
                .collect();
            let mut results = BTreeMap::new();
            for id in ids {
                let result = match types.get(&id) {
                    Some(GroupType::Consumer) => self.describe_consumer_group(&id).await,
                    _ => self.describe_classic_group(&id).await,
                };
                results.insert(id, result);
            }
            Ok(results)
        })
        .await
    }

    async fn describe_classic_group(&self, group: &str) -> Result<GroupDescription> {
        let request = DescribeGroupsRequest::default().with_groups(vec![group_id(group)]);
        let response = self
            .call_coordinator(CoordinatorKind::Group, group, request)
            .await?;
        let described = the_one_group(response.groups, |g| {
            (g.error_code, g.error_message.as_ref())
        })?;
        let coordinator = self.group_coordinator(group).await?;
        classic_description(described, coordinator)
    }

    async fn describe_consumer_group(&self, group: &str) -> Result<GroupDescription> {
        let request = ConsumerGroupDescribeRequest::default().with_group_ids(vec![group_id(group)]);
        let response = self
            .call_coordinator(CoordinatorKind::Group, group, request)
            .await?;
        let described = the_one_group(response.groups, |g| {
            (g.error_code, g.error_message.as_ref())
        })?;
        let coordinator = self.group_coordinator(group).await?;
        Ok(consumer_description(described, coordinator))
    }

    /// The offsets `group` committed, for every partition it has one for.
    pub async fn list_group_offsets(
        &self,
        group: &str,
    ) -> Result<BTreeMap<TopicPartition, CommittedOffset>> {
        self.within("OffsetFetch", async {
            // Built in the v8+ shape (one entry in `Groups`; null topics: all of them);
            // v1–7 get it at the top level (`protocol::generated::shapes`).
            let request = OffsetFetchRequest::default().with_groups(vec![
                OffsetFetchRequestGroup::default()
                    .with_group_id(group_id(group))
                    .with_topics(None),
            ]);
            let response = self
                .call_coordinator(CoordinatorKind::Group, group, request)
                .await?;
            let (code, topics) = match response.groups.into_iter().next() {
                Some(g) => (g.error_code, g.topics),
                None => (response.error_code, response.topics),
            };
            outcome(code, None)?;
            // Topics come by name: OffsetFetch is spoken up to v9 (v10 names them by id).
            let mut offsets = BTreeMap::new();
            for topic in topics {
                let name = topic.name;
                for p in topic.partitions {
                    outcome(p.error_code, None)?;
                    if p.committed_offset < 0 {
                        continue;
                    }
                    offsets.insert(
                        TopicPartition::new(name.as_str(), p.partition_index),
                        CommittedOffset {
                            offset: p.committed_offset,
                            leader_epoch: (p.committed_leader_epoch >= 0)
                                .then_some(p.committed_leader_epoch),
                            metadata: p.metadata,
                        },
                    );
                }
            }
            Ok(offsets)
        })
        .await
    }

    /// Sets `group`'s committed offsets (the next offset each partition's consumer reads).
    /// The group must be empty: a commit from outside it (generation -1, no member id) is
    /// refused while members are in it, with UNKNOWN_MEMBER_ID (both protocols, Kafka 4.1),
    /// which the broker sends without a message, so one saying so is added. One result per
    /// partition.
    pub async fn alter_group_offsets(
        &self,
        group: &str,
        offsets: impl IntoIterator<Item = (TopicPartition, i64)>,
    ) -> Result<BTreeMap<TopicPartition, Result<()>>> {
        let topics: Vec<OffsetCommitRequestTopic> = by_topic(offsets)
            .into_iter()
            .map(|(name, partitions)| {
                OffsetCommitRequestTopic::default()
                    .with_name(topic_name(&name))
                    .with_partitions(
                        partitions
                            .into_iter()
                            .map(|(partition, offset)| {
                                OffsetCommitRequestPartition::default()
                                    .with_partition_index(partition)
                                    .with_committed_offset(offset)
                                    .with_committed_leader_epoch(-1)
                            })
                            .collect(),
                    )
            })
            .collect();
        self.within("OffsetCommit", async {
            // From outside the group: no generation (-1), no member.
            let request = OffsetCommitRequest::default()
                .with_group_id(group_id(group))
                .with_generation_id_or_member_epoch(-1)
                .with_member_id(str_bytes(""))
                .with_retention_time_ms(-1)
                .with_topics(topics);
            let response = self
                .call_coordinator(CoordinatorKind::Group, group, request)
                .await?;
            Ok(response
                .topics
                .iter()
                .flat_map(|t| {
                    t.partitions.iter().map(|p| {
                        (
                            TopicPartition::new(t.name.as_str(), p.partition_index),
                            outcome(p.error_code, None).map_err(|e| from_outside(e, group)),
                        )
                    })
                })
                .collect())
        })
        .await
    }

    /// Deletes `group`'s committed offsets of some partitions. The group must not be
    /// consuming those topics (GROUP_SUBSCRIBED_TO_TOPIC). One result per partition; a
    /// group-wide refusal (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP) is the call's error.
    pub async fn delete_group_offsets(
        &self,
        group: &str,
        partitions: impl IntoIterator<Item = TopicPartition>,
    ) -> Result<BTreeMap<TopicPartition, Result<()>>> {
        let topics: Vec<OffsetDeleteRequestTopic> =
            by_topic(partitions.into_iter().map(|tp| (tp, ())))
                .into_iter()
                .map(|(name, partitions)| {
                    OffsetDeleteRequestTopic::default()
                        .with_name(topic_name(&name))
                        .with_partitions(
                            partitions
                                .into_iter()
                                .map(|(p, ())| {
                                    OffsetDeleteRequestPartition::default().with_partition_index(p)
                                })
                                .collect(),
                        )
                })
                .collect();
        self.within("OffsetDelete", async {
            let request = OffsetDeleteRequest::default()
                .with_group_id(group_id(group))
                .with_topics(topics);
            let response = self
                .call_coordinator(CoordinatorKind::Group, group, request)
                .await?;
            outcome(response.error_code, None)?;
            Ok(response
                .topics
                .iter()
                .flat_map(|t| {
                    let name = string(&t.name.0);
                    t.partitions.iter().map(move |p| {
                        (
                            TopicPartition::new(name.as_str(), p.partition_index),
                            outcome(p.error_code, None),
                        )
                    })
                })
                .collect())
        })
        .await
    }

    /// Deletes groups (with their committed offsets). A group with members is refused
    /// (NON_EMPTY_GROUP), one that does not exist is GROUP_ID_NOT_FOUND. One result per
    /// group.
    pub async fn delete_groups(
        &self,
        groups: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> Result<BTreeMap<String, Result<()>>> {
        let ids: Vec<String> = groups.into_iter().map(|g| g.as_ref().to_owned()).collect();
        self.within("DeleteGroups", async {
            let mut results = BTreeMap::new();
            // One request per group: each goes to its own coordinator.
            for id in ids {
                let request = DeleteGroupsRequest::default().with_groups_names(vec![group_id(&id)]);
                let response = self
                    .call_coordinator(CoordinatorKind::Group, &id, request)
                    .await?;
                let result = match response.results.first() {
                    Some(r) => outcome(r.error_code, None),
                    None => Err(Error::broker(ErrorCode::GROUP_ID_NOT_FOUND)),
                };
                results.insert(id, result);
            }
            Ok(results)
        })
        .await
    }
}

/// A commit from outside the group refused because members are in it, said in words.
fn from_outside(error: Error, group: &str) -> Error {
    match error {
        Error::Broker {
            code: ErrorCode::UNKNOWN_MEMBER_ID,
            message: None,
        } => Error::Broker {
            code: ErrorCode::UNKNOWN_MEMBER_ID,
            message: Some(format!(
                "group {group:?} has members: its offsets can only be altered while it is empty"
            )),
        },
        other => other,
    }
}

/// The one group a describe request asked about, or its error (`error` reads the group's
/// error code and message; no group in the answer is GROUP_ID_NOT_FOUND).
fn the_one_group<G>(groups: Vec<G>, error: fn(&G) -> (i16, Option<&StrBytes>)) -> Result<G> {
    let described = groups
        .into_iter()
        .next()
        .ok_or_else(|| Error::broker(ErrorCode::GROUP_ID_NOT_FOUND))?;
    let (code, message) = error(&described);
    outcome(code, message)?;
    Ok(described)
}

fn classic_description(
    group: describe_groups_response::DescribedGroup,
    coordinator: i32,
) -> Result<GroupDescription> {
    // A consumer group's assignments are ConsumerProtocolAssignment bytes; another
    // protocol's (Connect's) are its own and left out.
    let consumer = group.protocol_type.as_str() == "consumer";
    let mut members = Vec::with_capacity(group.members.len());
    for m in &group.members {
        let assignment = if consumer {
            decode_assignment(&m.member_assignment)?
                .into_iter()
                .flat_map(|(topic, partitions)| {
                    partitions
                        .into_iter()
                        .map(move |p| TopicPartition::new(topic.as_str(), p))
                })
                .collect()
        } else {
            Vec::new()
        };
        members.push(GroupMember {
            member_id: string(&m.member_id),
            instance_id: m.group_instance_id.as_ref().map(string),
            client_id: string(&m.client_id),
            host: string(&m.client_host),
            assignment,
        });
    }
    Ok(GroupDescription {
        group_id: string(&group.group_id.0),
        group_type: GroupType::Classic,
        state: string(&group.group_state),
        assignor: string(&group.protocol_data),
        group_epoch: None,
        coordinator,
        members,
    })
}

fn consumer_description(
    group: consumer_group_describe_response::DescribedGroup,
    coordinator: i32,
) -> GroupDescription {
    GroupDescription {
        group_id: string(&group.group_id.0),
        group_type: GroupType::Consumer,
        state: string(&group.group_state),
        assignor: string(&group.assignor_name),
        group_epoch: Some(group.group_epoch),
        coordinator,
        members: group
            .members
            .iter()
            .map(|m| GroupMember {
                member_id: string(&m.member_id),
                instance_id: m.instance_id.as_ref().map(string),
                client_id: string(&m.client_id),
                host: string(&m.client_host),
                assignment: m
                    .assignment
                    .topic_partitions
                    .iter()
                    .flat_map(|t| {
                        let topic = string(&t.topic_name.0);
                        t.partitions
                            .iter()
                            .map(move |p| TopicPartition::new(topic.as_str(), *p))
                    })
                    .collect(),
            })
            .collect(),
    }
}
