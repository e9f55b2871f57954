//! Topics: create (partitions and replication factor, or a replica assignment, with configs;
//! or only validated), delete, list, describe, add partitions.
//!
//! CreateTopics, DeleteTopics and CreatePartitions go to any broker: under KRaft every broker
//! forwards them to the active controller (KIP-590).

use std::collections::BTreeMap;

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::{CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest};

use super::routing::topic_description;
use super::wire::{broker_ids, millis_left, outcome, string};
use super::{Admin, TopicDescription};
use crate::error::Result;
use crate::protocol::generated::{str_bytes, topic_name};

/// A topic to create: [`Admin::create_topics`].
///
/// ```
/// use exactly::NewTopic;
///
/// let orders = NewTopic::new("orders")
///     .partitions(6)
///     .replication_factor(3)
///     .config("cleanup.policy", "compact");
/// # let _ = orders;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    name: String,
    partitions: i32,
    replication_factor: i16,
    assignment: BTreeMap<i32, Vec<i32>>,
    configs: Vec<(String, String)>,
}

impl NewTopic {
    /// A topic with the broker's default partition count and replication factor
    /// (`num.partitions`, `default.replication.factor`; KIP-464).
    pub fn new(name: impl Into<String>) -> Self {
        NewTopic {
            name: name.into(),
            partitions: -1,
            replication_factor: -1,
            assignment: BTreeMap::new(),
            configs: Vec::new(),
        }
    }

    /// The number of partitions.
    pub fn partitions(mut self, count: i32) -> Self {
        self.partitions = count;
        self
    }

    /// The replication factor.
    pub fn replication_factor(mut self, factor: i16) -> Self {
        self.replication_factor = factor;
        self
    }

    /// The replicas of `partition` (node ids, the preferred leader first). With an assignment
    /// the broker takes the partition count and the replication factor from it, so those two
    /// must be left unset (the broker refuses both together with INVALID_REQUEST).
    pub fn assign(mut self, partition: i32, replicas: impl Into<Vec<i32>>) -> Self {
        self.assignment.insert(partition, replicas.into());
        self
    }

    /// A topic config (`retention.ms`, `cleanup.policy`, ...).
    pub fn config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.configs.push((key.into(), value.into()));
        self
    }

    fn to_wire(&self) -> CreatableTopic {
        CreatableTopic::default()
            .with_name(topic_name(&self.name))
            .with_num_partitions(self.partitions)
            .with_replication_factor(self.replication_factor)
            .with_assignments(
                self.assignment
                    .iter()
                    .map(|(partition, replicas)| {
                        CreatableReplicaAssignment::default()
                            .with_partition_index(*partition)
                            .with_broker_ids(broker_ids(replicas))
                    })
                    .collect(),
            )
            .with_configs(
                self.configs
                    .iter()
                    .map(|(key, value)| {
                        CreatableTopicConfig::default()
                            .with_name(str_bytes(key))
                            .with_value(Some(str_bytes(value)))
                    })
                    .collect(),
            )
    }
}

/// What the broker reports about a topic it created (or, with `validate_only`, would
/// create).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CreatedTopic {
    /// The topic's id (KIP-516; all zeros when only validated).
    pub topic_id: [u8; 16],
    /// Its partition count (-1 if the broker did not say).
    pub partitions: i32,
    /// Its replication factor (-1 if the broker did not say).
    pub replication_factor: i16,
    /// Its configs as created (name, value; a sensitive value is `None`).
    pub configs: Vec<(String, Option<String>)>,
}

impl Admin {
    /// Creates topics, or with `validate_only` only checks that they could be (nothing is
    /// created). One result per topic: an existing topic is [`crate::Error::Broker`] with
    /// TOPIC_ALREADY_EXISTS, an impossible replication factor INVALID_REPLICATION_FACTOR,
    /// each with the broker's message. (A request whose answer was lost on the way is sent to
    /// another broker; if the first had created the topic, the second answer is
    /// TOPIC_ALREADY_EXISTS.)
    pub async fn create_topics(
        &self,
        topics: impl IntoIterator<Item = NewTopic>,
        validate_only: bool,
    ) -> Result<BTreeMap<String, Result<CreatedTopic>>> {
        let topics: Vec<NewTopic> = topics.into_iter().collect();
        self.within("CreateTopics", async {
            let request = CreateTopicsRequest::default()
                .with_topics(topics.iter().map(NewTopic::to_wire).collect())
                .with_timeout_ms(millis_left(self.deadline()))
                .with_validate_only(validate_only);
            let response = self.call_any(request).await?;
            let mut results = BTreeMap::new();
            for topic in response.topics {
                let result = outcome(topic.error_code, topic.error_message.as_ref()).map(|()| {
                    CreatedTopic {
                        topic_id: *topic.topic_id.as_bytes(),
                        partitions: topic.num_partitions,
                        replication_factor: topic.replication_factor,
                        configs: topic
                            .configs
                            .unwrap_or_default()
                            .iter()
                            .map(|c| (string(&c.name), c.value.as_ref().map(string)))
                            .collect(),
                    }
                });
                results.insert(string(&topic.name.0), result);
            }
            Ok(results)
        })
        .await
    }

    /// Deletes topics: one result per topic (UNKNOWN_TOPIC_OR_PARTITION for one that does not
    /// exist).
    pub async fn delete_topics(
        &self,
        topics: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> Result<BTreeMap<String, Result<()>>> {
        let topics: Vec<DeleteTopicState> = topics
            .into_iter()
            .map(|t| DeleteTopicState::default().with_name(Some(topic_name(t.as_ref()))))
            .collect();
        self.within("DeleteTopics", async {
            let request = DeleteTopicsRequest::default()
                .with_topics(topics)
                .with_timeout_ms(millis_left(self.deadline()));
            let response = self.call_any(request).await?;
            Ok(response
                .responses
                .iter()
                .map(|t| {
                    let name = t.name.as_ref().map(|n| string(&n.0)).unwrap_or_default();
                    (name, outcome(t.error_code, t.error_message.as_ref()))
                })
                .collect())
        })
        .await
    }

    /// The names of the cluster's topics, Kafka's internal ones (`__consumer_offsets`,
    /// `__transaction_state`) left out, sorted.
    pub async fn list_topics(&self) -> Result<Vec<String>> {
        let cluster = self.within("Metadata", self.cluster()).await?;
        Ok(cluster
            .topics
            .into_values()
            .filter(|t| !t.internal)
            .map(|t| t.name)
            .collect())
    }

    /// The names of every topic of the cluster, Kafka's internal ones included, sorted.
    pub async fn list_topics_including_internal(&self) -> Result<Vec<String>> {
        let cluster = self.within("Metadata", self.cluster()).await?;
        Ok(cluster.topics.into_keys().collect())
    }

    /// Describes topics: partitions with leader, replicas and in-sync replicas. One result
    /// per topic (UNKNOWN_TOPIC_OR_PARTITION for one that does not exist; it is not created).
    pub async fn describe_topics(
        &self,
        topics: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> Result<BTreeMap<String, Result<TopicDescription>>> {
        let names: Vec<String> = topics.into_iter().map(|t| t.as_ref().to_owned()).collect();
        if names.is_empty() {
            return Ok(BTreeMap::new());
        }
        let response = self.within("Metadata", self.metadata(Some(names))).await?;
        Ok(response
            .topics
            .iter()
            .map(|t| (t.name.clone().unwrap_or_default(), topic_description(t)))
            .collect())
    }

    /// Grows topics to `total` partitions each (Kafka never removes partitions), or with
    /// `validate_only` only checks that it could. One result per topic (INVALID_PARTITIONS
    /// for a count not above the current one).
    pub async fn create_partitions(
        &self,
        totals: impl IntoIterator<Item = (impl AsRef<str>, i32)>,
        validate_only: bool,
    ) -> Result<BTreeMap<String, Result<()>>> {
        let topics: Vec<CreatePartitionsTopic> = totals
            .into_iter()
            .map(|(topic, total)| {
                CreatePartitionsTopic::default()
                    .with_name(topic_name(topic.as_ref()))
                    .with_count(total)
                    // None: the broker places the new partitions (an empty list would be an
                    // assignment of none of them).
                    .with_assignments(None)
            })
            .collect();
        self.within("CreatePartitions", async {
            let request = CreatePartitionsRequest::default()
                .with_topics(topics)
                .with_timeout_ms(millis_left(self.deadline()))
                .with_validate_only(validate_only);
            let response = self.call_any(request).await?;
            Ok(response
                .results
                .iter()
                .map(|t| {
                    (
                        string(&t.name.0),
                        outcome(t.error_code, t.error_message.as_ref()),
                    )
                })
                .collect())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::generated::lowest_version;

    #[test]
    fn a_new_topic_is_writable_at_every_version_spoken() {
        let topic = NewTopic::new("t")
            .assign(0, [2, 1])
            .assign(1, [1, 2])
            .config("cleanup.policy", "compact")
            .to_wire();
        assert_eq!((topic.num_partitions, topic.replication_factor), (-1, -1));
        assert_eq!(topic.assignments[0].broker_ids, broker_ids(&[2, 1]));
        let request = CreateTopicsRequest::default()
            .with_topics(vec![topic])
            .with_timeout_ms(1000)
            .with_validate_only(true);
        assert_eq!(lowest_version(&request), 2);
        let grow = CreatePartitionsRequest::default().with_topics(vec![
            CreatePartitionsTopic::default()
                .with_name(topic_name("t"))
                .with_count(3)
                .with_assignments(None),
        ]);
        assert_eq!(lowest_version(&grow), 0);
    }
}
