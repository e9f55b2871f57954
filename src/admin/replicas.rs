//! Where partitions' replicas are and which one leads: leader elections (ElectLeaders,
//! KIP-460) and partition reassignments (AlterPartitionReassignments and
//! ListPartitionReassignments, KIP-455). Any broker answers; under KRaft it forwards to the
//! active controller, which makes the change.

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, ElectLeadersRequest, ListPartitionReassignmentsRequest,
};

use super::Admin;
use super::wire::{broker_ids, by_topic, millis_left, outcome, string};
use crate::error::Result;
use crate::protocol::generated::topic_name;
use crate::types::TopicPartition;

/// Which leader [`Admin::elect_leaders`] elects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ElectionType {
    /// The preferred replica (the first of the partition's replicas), if it is in sync.
    Preferred,
    /// Any live replica, in sync or not, when no in-sync replica is left: records the old
    /// leader had and the new one lacks are lost (`unclean.leader.election.enable` for one
    /// election).
    Unclean,
}

impl ElectionType {
    fn code(self) -> i8 {
        match self {
            ElectionType::Preferred => 0,
            ElectionType::Unclean => 1,
        }
    }
}

/// A reassignment in progress (ListPartitionReassignments).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartitionReassignment {
    /// The replicas now, those being added and removed included.
    pub replicas: Vec<i32>,
    /// The replicas being added (catching up).
    pub adding: Vec<i32>,
    /// The replicas being removed once the new ones are in sync.
    pub removing: Vec<i32>,
}

/// The per-partition outcomes of an answer's topics (ElectLeaders and
/// AlterPartitionReassignments answer alike, under other field names): each topic's
/// `$name`, its partitions' list `$partitions`, each with its index `$index`, error code and
/// message.
macro_rules! partition_outcomes {
    ($topics:expr, $name:ident, $partitions:ident, $index:ident) => {
        $topics
            .iter()
            .flat_map(|topic| {
                let name = string(&topic.$name.0);
                topic.$partitions.iter().map(move |p| {
                    (
                        TopicPartition::new(name.as_str(), p.$index),
                        outcome(p.error_code, p.error_message.as_ref()),
                    )
                })
            })
            .collect()
    };
}

/// Partitions nested by topic, as ElectLeaders and ListPartitionReassignments name them.
fn partitions_by_topic(
    partitions: Vec<TopicPartition>,
) -> impl Iterator<Item = (kafka_protocol::messages::TopicName, Vec<i32>)> {
    by_topic(partitions.into_iter().map(|tp| (tp, ())))
        .into_iter()
        .map(|(name, ps)| (topic_name(&name), ps.into_iter().map(|(p, ())| p).collect()))
}

impl Admin {
    /// Elects leaders (ElectLeaders; the principal needs ALTER on the cluster) for
    /// `partitions` (`None`: every partition of the cluster). One result per partition:
    /// ELECTION_NOT_NEEDED when the replica it would elect already leads (for a preferred
    /// election of every partition, only those that needed one are answered),
    /// PREFERRED_LEADER_NOT_AVAILABLE when it is not in sync, ELIGIBLE_LEADERS_NOT_AVAILABLE
    /// when no replica may lead.
    pub async fn elect_leaders(
        &self,
        election: ElectionType,
        partitions: Option<Vec<TopicPartition>>,
    ) -> Result<BTreeMap<TopicPartition, Result<()>>> {
        let request = ElectLeadersRequest::default()
            .with_election_type(election.code())
            .with_topic_partitions(partitions.map(|ps| {
                partitions_by_topic(ps)
                    .map(|(topic, partitions)| {
                        TopicPartitions::default()
                            .with_topic(topic)
                            .with_partitions(partitions)
                    })
                    .collect()
            }))
            .with_timeout_ms(millis_left(self.deadline()));
        let response = self.within("ElectLeaders", self.call_any(request)).await?;
        outcome(response.error_code, None)?;
        Ok(partition_outcomes!(
            response.replica_election_results,
            topic,
            partition_result,
            partition_id
        ))
    }

    /// Moves partitions to new replicas (AlterPartitionReassignments; the principal needs
    /// ALTER on the cluster): for each partition its target replicas, the preferred leader
    /// first, or `None` to cancel the reassignment in progress. The controller starts the
    /// move and answers; the new replicas catch up afterwards (see
    /// [`Admin::list_partition_reassignments`]). One result per partition
    /// (NO_REASSIGNMENT_IN_PROGRESS for a cancel with none; INVALID_REPLICA_ASSIGNMENT).
    pub async fn alter_partition_reassignments(
        &self,
        reassignments: impl IntoIterator<Item = (TopicPartition, Option<Vec<i32>>)>,
    ) -> Result<BTreeMap<TopicPartition, Result<()>>> {
        let request = AlterPartitionReassignmentsRequest::default()
            .with_topics(
                by_topic(reassignments)
                    .into_iter()
                    .map(|(name, partitions)| {
                        ReassignableTopic::default()
                            .with_name(topic_name(&name))
                            .with_partitions(
                                partitions
                                    .into_iter()
                                    .map(|(partition, replicas)| {
                                        ReassignablePartition::default()
                                            .with_partition_index(partition)
                                            .with_replicas(replicas.as_deref().map(broker_ids))
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
            .with_timeout_ms(millis_left(self.deadline()));
        let response = self
            .within("AlterPartitionReassignments", self.call_any(request))
            .await?;
        outcome(response.error_code, response.error_message.as_ref())?;
        Ok(partition_outcomes!(
            response.responses,
            name,
            partitions,
            partition_index
        ))
    }

    /// The reassignments in progress (ListPartitionReassignments) among `partitions`
    /// (`None`: all of the cluster's); a partition not being moved is left out.
    pub async fn list_partition_reassignments(
        &self,
        partitions: Option<Vec<TopicPartition>>,
    ) -> Result<BTreeMap<TopicPartition, PartitionReassignment>> {
        let request = ListPartitionReassignmentsRequest::default()
            .with_topics(partitions.map(|ps| {
                partitions_by_topic(ps)
                    .map(|(name, partitions)| {
                        ListPartitionReassignmentsTopics::default()
                            .with_name(name)
                            .with_partition_indexes(partitions)
                    })
                    .collect()
            }))
            .with_timeout_ms(millis_left(self.deadline()));
        let response = self
            .within("ListPartitionReassignments", self.call_any(request))
            .await?;
        outcome(response.error_code, response.error_message.as_ref())?;
        let ids = |ids: &[kafka_protocol::messages::BrokerId]| ids.iter().map(|b| b.0).collect();
        Ok(response
            .topics
            .iter()
            .flat_map(|topic| {
                let name = string(&topic.name.0);
                topic.partitions.iter().map(move |p| {
                    (
                        TopicPartition::new(name.as_str(), p.partition_index),
                        PartitionReassignment {
                            replicas: ids(&p.replicas),
                            adding: ids(&p.adding_replicas),
                            removing: ids(&p.removing_replicas),
                        },
                    )
                })
            })
            .collect())
    }
}
