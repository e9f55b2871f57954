//! What the admin client's calls share around `kafka-protocol`'s fields (the field
//! constructors themselves are `protocol::generated`'s): strings out, outcomes, deadlines,
//! partitions nested by topic.

use std::collections::BTreeMap;

use kafka_protocol::messages::BrokerId;
use kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::protocol::error_code::ErrorCode;
use crate::types::TopicPartition;

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

/// A Kafka enumeration carried as a small integer (ACL resource types, operations, SCRAM
/// mechanisms, ...): one variant per code Kafka defines, and `Unknown` for a code a newer
/// broker may send, kept as it came rather than refused.
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        $name:ident: $repr:ty {
            $($(#[$vmeta:meta])* $variant:ident = $code:literal,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[non_exhaustive]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
            /// A code this crate does not know, as the broker sent it.
            Unknown($repr),
        }

        impl $name {
            /// The code on the wire.
            pub fn code(self) -> $repr {
                match self {
                    $($name::$variant => $code,)*
                    $name::Unknown(code) => code,
                }
            }

            /// The value of a code on the wire.
            pub fn from_code(code: $repr) -> Self {
                match code {
                    $($code => $name::$variant,)*
                    other => $name::Unknown(other),
                }
            }
        }
    };
}
pub(super) use wire_enum;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::generated::str_bytes;

    #[test]
    fn outcomes_keep_the_code_and_a_message_only_when_there_is_one() {
        assert!(outcome(0, Some(&str_bytes("ignored"))).is_ok());
        let Err(Error::Broker { code, message }) =
            outcome(36, Some(&str_bytes("Topic 't' already exists.")))
        else {
            panic!("an error code is an error");
        };
        assert_eq!(code, ErrorCode::TOPIC_ALREADY_EXISTS);
        assert_eq!(message.as_deref(), Some("Topic 't' already exists."));
        assert!(matches!(
            outcome(15, Some(&str_bytes(""))),
            Err(Error::Broker { message: None, .. })
        ));
    }

    #[test]
    fn partitions_nest_by_topic_in_order() {
        let nested = by_topic([
            (TopicPartition::new("b", 1), 'x'),
            (TopicPartition::new("a", 0), 'y'),
            (TopicPartition::new("b", 0), 'z'),
        ]);
        assert_eq!(
            nested.into_iter().collect::<Vec<_>>(),
            [
                ("a".to_owned(), vec![(0, 'y')]),
                ("b".to_owned(), vec![(1, 'x'), (0, 'z')])
            ]
        );
    }
}
