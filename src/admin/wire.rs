//! Small conversions between the admin client's types and `kafka-protocol`'s fields, kept in
//! one place.

use std::collections::BTreeMap;

use kafka_protocol::messages::{BrokerId, GroupId, TopicName};
use kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::protocol::error_code::ErrorCode;
use crate::types::TopicPartition;

/// A string field.
pub(super) fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// A topic name field.
pub(super) fn topic_name(name: &str) -> TopicName {
    TopicName(text(name))
}

/// A group id field.
pub(super) fn group_id(group: &str) -> GroupId {
    GroupId(text(group))
}

/// Node ids as broker id fields.
pub(super) fn broker_ids(ids: &[i32]) -> Vec<BrokerId> {
    ids.iter().copied().map(BrokerId).collect()
}

/// A string field as ours.
pub(super) fn string(s: &StrBytes) -> String {
    s.as_str().to_owned()
}

/// `Ok` for error code 0, else [`Error::Broker`] with the code and the broker's message (an
/// empty one is none).
pub(super) fn outcome(code: i16, message: Option<&StrBytes>) -> Result<()> {
    if code == 0 {
        return Ok(());
    }
    Err(Error::Broker {
        code: ErrorCode(code),
        message: message.filter(|m| !m.is_empty()).map(string),
    })
}

/// The milliseconds left until `deadline`, for the requests that tell the broker how long it
/// may take (CreateTopics, DeleteTopics, ...).
pub(super) fn millis_left(deadline: Instant) -> i32 {
    let left = deadline
        .saturating_duration_since(Instant::now())
        .as_millis();
    i32::try_from(left).unwrap_or(i32::MAX).max(1)
}

/// Per-partition items by topic, in order: how requests nest their partitions.
pub(super) fn by_topic<T>(
    items: impl IntoIterator<Item = (TopicPartition, T)>,
) -> BTreeMap<String, Vec<(i32, T)>> {
    let mut topics: BTreeMap<String, Vec<(i32, T)>> = BTreeMap::new();
    for (tp, item) in items {
        topics
            .entry(tp.topic.to_string())
            .or_default()
            .push((tp.partition, item));
    }
    topics
}
