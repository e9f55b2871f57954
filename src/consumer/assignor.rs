//! The classic protocol's client-side `range` assignor and the consumer protocol's embedded
//! formats (`ConsumerProtocolSubscription.json` / `ConsumerProtocolAssignment.json`).
//!
//! `range` (the Java consumer's old first default): per topic, members sorted by member id
//! take contiguous runs of partitions, the first `count % members` one more. It is used with
//! the eager rebalance protocol (every member gives up everything before rejoining). The
//! default classic strategy is `cooperative-sticky` ([`super::sticky_assignor`], KIP-429),
//! whose subscriptions carry the partitions a member owns (subscription v1+) and its
//! generation (v2+). Using Kafka's names means a group can mix this consumer with Java ones.

use std::collections::{BTreeMap, BTreeSet};

use bytes::{BufMut, Bytes};

use crate::protocol::{DecodeError, Decoder, WireWrite};

/// The protocol name of the eager `range` assignor in JoinGroup.
pub const RANGE: &str = "range";
/// The protocol name of the cooperative sticky assignor (KIP-429) in JoinGroup.
pub const COOPERATIVE_STICKY: &str = "cooperative-sticky";
/// The protocol type of consumer groups.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// A subscription (version 0): the topics, no user data.
pub fn encode_subscription(topics: &[String]) -> Bytes {
    let mut out = Vec::new();
    out.extend_from_slice(&0i16.to_be_bytes());
    out.put_array(false, topics, |out, t| out.put_string(false, t));
    out.put_nullable_bytes(false, None);
    Bytes::from(out)
}

/// A subscription with what the cooperative protocol needs from it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Subscription {
    /// The subscribed topics.
    pub topics: Vec<String>,
    /// The partitions the member owns (v1+; empty before).
    pub owned: BTreeMap<String, Vec<i32>>,
    /// The generation in which the member got `owned` (v2+; -1 when unknown).
    pub generation: i32,
}

/// A subscription of version 2: topics, no user data, the owned partitions and the generation
/// they were assigned in (the sticky assignor trusts the highest generation when two members
/// claim a partition, as Java's `AbstractStickyAssignor` does).
pub fn encode_cooperative_subscription(
    topics: &[String],
    owned: &BTreeMap<String, Vec<i32>>,
    generation: i32,
) -> Bytes {
    let mut out = Vec::new();
    out.extend_from_slice(&2i16.to_be_bytes());
    out.put_array(false, topics, |out, t| out.put_string(false, t));
    out.put_nullable_bytes(false, None);
    let entries: Vec<_> = owned.iter().collect();
    out.put_array(false, &entries, |out, (topic, parts)| {
        out.put_string(false, topic);
        out.put_array(false, parts, |out, p| out.put_i32(*p));
    });
    out.put_i32(generation);
    Bytes::from(out)
}

/// A subscription of any version: fields a version lacks keep their defaults, fields of
/// later versions (rack id, v3) are ignored.
pub fn decode_subscription(bytes: &[u8]) -> Result<Subscription, DecodeError> {
    let mut d = Decoder::new(bytes);
    let version = d.i16("ConsumerProtocolSubscription.version")?;
    let topics = d.array_of(false, "ConsumerProtocolSubscription.topics", |d| {
        d.string(false, "ConsumerProtocolSubscription.topic")
    })?;
    let mut subscription = Subscription {
        topics,
        owned: BTreeMap::new(),
        generation: -1,
    };
    if version >= 1 {
        let _user_data = d.nullable_bytes(false, "ConsumerProtocolSubscription.user_data")?;
        let owned = d.array_of(
            false,
            "ConsumerProtocolSubscription.owned_partitions",
            |d| {
                let topic = d.string(false, "ConsumerProtocolSubscription.owned_topic")?;
                let partitions =
                    d.array_of(false, "ConsumerProtocolSubscription.partitions", |d| {
                        d.i32("ConsumerProtocolSubscription.partition")
                    })?;
                Ok((topic, partitions))
            },
        )?;
        for (topic, partitions) in owned {
            subscription
                .owned
                .entry(topic)
                .or_default()
                .extend(partitions);
        }
    }
    if version >= 2 {
        subscription.generation = d.i32("ConsumerProtocolSubscription.generation_id")?;
    }
    Ok(subscription)
}

/// An assignment (version 0): partitions by topic, no user data.
pub fn encode_assignment(partitions: &BTreeMap<String, Vec<i32>>) -> Bytes {
    let mut out = Vec::new();
    out.extend_from_slice(&0i16.to_be_bytes());
    let entries: Vec<_> = partitions.iter().collect();
    out.put_array(false, &entries, |out, (topic, parts)| {
        out.put_string(false, topic);
        out.put_array(false, parts, |out, p| out.put_i32(*p));
    });
    out.put_nullable_bytes(false, None);
    Bytes::from(out)
}

/// The partitions of an assignment of any version; an empty input is an empty assignment.
pub fn decode_assignment(bytes: &[u8]) -> Result<Vec<(String, Vec<i32>)>, DecodeError> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    let mut d = Decoder::new(bytes);
    let _version = d.i16("ConsumerProtocolAssignment.version")?;
    d.array_of(false, "ConsumerProtocolAssignment.partitions", |d| {
        let topic = d.string(false, "ConsumerProtocolAssignment.topic")?;
        let partitions = d.array_of(false, "ConsumerProtocolAssignment.partitions", |d| {
            d.i32("ConsumerProtocolAssignment.partition")
        })?;
        Ok((topic, partitions))
    })
}

/// The range assignment: member id -> topic -> partitions. `members` maps each member id to
/// its subscribed topics; `partition_count` gives a topic's partitions (unknown topics are
/// left out). Every member gets an entry, possibly empty.
pub fn assign_range(
    members: &BTreeMap<String, Vec<String>>,
    partition_count: impl Fn(&str) -> Option<i32>,
) -> BTreeMap<String, BTreeMap<String, Vec<i32>>> {
    let mut out: BTreeMap<String, BTreeMap<String, Vec<i32>>> = members
        .keys()
        .map(|m| (m.clone(), BTreeMap::new()))
        .collect();
    let topics: BTreeSet<&String> = members.values().flatten().collect();
    for topic in topics {
        let Some(count) = partition_count(topic).filter(|c| *c > 0) else {
            continue;
        };
        let subscribers: Vec<&String> = members
            .iter()
            .filter(|(_, t)| t.contains(topic))
            .map(|(m, _)| m)
            .collect();
        let n = subscribers.len() as i32;
        let (per, extra) = (count / n, count % n);
        let mut next = 0;
        for (i, member) in subscribers.into_iter().enumerate() {
            let take = per + i32::from((i as i32) < extra);
            if take > 0 {
                out.entry(member.clone())
                    .or_default()
                    .insert(topic.clone(), (next..next + take).collect());
            }
            next += take;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscription_and_assignment_round_trip() {
        let topics = vec!["a".to_owned(), "b".to_owned()];
        assert_eq!(
            decode_subscription(&encode_subscription(&topics))
                .unwrap()
                .topics,
            topics
        );
        let mut assignment = BTreeMap::new();
        assignment.insert("a".to_owned(), vec![0, 2]);
        let bytes = encode_assignment(&assignment);
        assert_eq!(
            decode_assignment(&bytes).unwrap(),
            vec![("a".to_owned(), vec![0, 2])]
        );
        assert!(decode_assignment(&[]).unwrap().is_empty());
        let owned: BTreeMap<String, Vec<i32>> = [("a".to_owned(), vec![1, 3])].into();
        let bytes = encode_cooperative_subscription(&topics, &owned, 9);
        assert_eq!(
            decode_subscription(&bytes).unwrap(),
            Subscription {
                topics: topics.clone(),
                owned,
                generation: 9
            }
        );
        assert!(decode_subscription(&bytes[..bytes.len() - 2]).is_err());
        let v0 = decode_subscription(&encode_subscription(&topics)).unwrap();
        assert!(v0.owned.is_empty() && v0.generation == -1);
        assert!(decode_assignment(&bytes[..bytes.len() - 6]).is_err());
        // The bytes Java writes for a v0 subscription to "t" (as tests/support/group.rs).
        assert_eq!(
            &encode_subscription(&["t".to_owned()])[..],
            &[0, 0, 0, 0, 0, 1, 0, 1, b't', 0xff, 0xff, 0xff, 0xff]
        );
    }

    #[test]
    fn range_splits_contiguously_with_the_remainder_first() {
        let mut members = BTreeMap::new();
        members.insert("m1".to_owned(), vec!["t".to_owned()]);
        members.insert("m2".to_owned(), vec!["t".to_owned(), "u".to_owned()]);
        let out = assign_range(&members, |t| match t {
            "t" => Some(5),
            "u" => Some(2),
            _ => None,
        });
        assert_eq!(out["m1"]["t"], vec![0, 1, 2]);
        assert_eq!(out["m2"]["t"], vec![3, 4]);
        assert_eq!(out["m2"]["u"], vec![0, 1]);
        assert!(!out["m1"].contains_key("u"));
        // More members than partitions: the last ones get nothing.
        members.insert("m3".to_owned(), vec!["u".to_owned()]);
        let out = assign_range(&members, |_| Some(1));
        assert_eq!(out["m2"]["u"], vec![0]);
        assert!(out["m3"].is_empty());
    }
}
