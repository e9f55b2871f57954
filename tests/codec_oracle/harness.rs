//! What the message oracles share: the two-way check of one value, the mapping of our types
//! onto kafka-protocol's ([`Theirs`], written with [`theirs!`]) and conversions of field types.

use std::fmt::Debug;
use std::str::FromStr;

use bytes::{Bytes, BytesMut};
use exactly::__private::protocol::messages::metadata::BrokerEndpoint;
use exactly::__private::protocol::messages::produce::LeaderIdAndEpoch;
use exactly::__private::protocol::{Decoder, Message};
use kafka_protocol::messages::{self as kp, BrokerId, GroupId, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// Checks `ours` against `theirs`, the same value as kafka-protocol's type, at `version`: our
/// encoding decodes with theirs to `theirs`, their encoding decodes with ours to `ours`, and
/// both encodings are the same bytes.
pub fn assert_agree<M, T>(ours: &M, theirs: &T, version: i16)
where
    M: Message + PartialEq + Debug,
    T: Encodable + Decodable + PartialEq + Debug,
{
    let what = format!("{} v{version} {ours:?}", std::any::type_name::<M>());

    let mut our_bytes = Vec::new();
    ours.encode(version, &mut our_bytes);
    let mut buf = Bytes::from(our_bytes.clone());
    let decoded = T::decode(&mut buf, version)
        .unwrap_or_else(|e| panic!("{what}: theirs cannot decode ours: {e}"));
    assert!(buf.is_empty(), "{what}: theirs left {} bytes", buf.len());
    assert_eq!(&decoded, theirs, "{what}: ours decoded by theirs");

    let mut their_bytes = BytesMut::new();
    theirs
        .encode(&mut their_bytes, version)
        .unwrap_or_else(|e| panic!("{what}: theirs cannot encode: {e}"));
    let mut d = Decoder::new(&their_bytes);
    let back = M::decode(&mut d, version)
        .unwrap_or_else(|e| panic!("{what}: ours cannot decode theirs: {e}"));
    d.finish("their encoding")
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(&back, ours, "{what}: theirs decoded by ours");
    assert_eq!(our_bytes, their_bytes[..], "{what}: encodings differ");
}

/// The same value as kafka-protocol's `T`, field by field. Generic over `T` because one of our
/// types may stand for several of theirs (e.g. `BrokerEndpoint` for Metadata's brokers and for
/// Produce's and Fetch's node endpoints).
pub trait Theirs<T> {
    /// The conversion.
    fn theirs(&self) -> T;
}

/// Implements [`Theirs`]: `theirs!(Ours => Their, |v| { with_a(v.a), with_b(v.b) })` builds
/// `Their::default().with_a(v.a).with_b(v.b)` with `v` bound to the value converted.
/// `Ours => TheirA | TheirB` implements it for several of their types with the same setters.
macro_rules! theirs {
    (@one $ours:ty => $theirs:ty, |$v:ident| { $($with:ident($value:expr)),* $(,)? }) => {
        impl crate::harness::Theirs<$theirs> for $ours {
            fn theirs(&self) -> $theirs {
                let $v = self;
                <$theirs>::default()$(.$with($value))*
            }
        }
    };
    ($ours:ty => $($theirs:ty)|+, |$v:ident| $fields:tt) => {
        $(theirs!(@one $ours => $theirs, |$v| $fields);)+
    };
}

/// Each of `items` as kafka-protocol's `T`.
pub fn all<T, X: Theirs<T>>(items: &[X]) -> Vec<T> {
    items.iter().map(Theirs::theirs).collect()
}

/// kafka-protocol's string type.
pub fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// kafka-protocol's nullable string.
pub fn nullable_sb(s: &Option<String>) -> Option<StrBytes> {
    s.as_deref().map(sb)
}

/// kafka-protocol's topic name.
pub fn topic_name(s: &str) -> TopicName {
    TopicName(sb(s))
}

/// kafka-protocol's group id.
pub fn group_id(s: &str) -> GroupId {
    GroupId(sb(s))
}

/// kafka-protocol's UUID type (from the `uuid` crate, which is not our dependency: it is
/// reached through inference and its `FromStr`), built from its hyphen-less hex form.
pub fn uuid<U: FromStr<Err: Debug>>(id: &[u8; 16]) -> U {
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    hex.parse().expect("32 hex digits are a UUID")
}

// One of our types for several of theirs that have the same fields: a broker's address in
// Metadata's brokers and in the node endpoints of Produce and Fetch (KIP-951), and the current
// leader hint of Produce and Fetch partitions.

theirs!(
    BrokerEndpoint =>
        kp::metadata_response::MetadataResponseBroker
        | kp::produce_response::NodeEndpoint
        | kp::fetch_response::NodeEndpoint,
    |b| {
        with_node_id(BrokerId(b.node_id)),
        with_host(sb(&b.host)),
        with_port(b.port),
        with_rack(nullable_sb(&b.rack)),
    }
);

theirs!(
    LeaderIdAndEpoch =>
        kp::produce_response::LeaderIdAndEpoch | kp::fetch_response::LeaderIdAndEpoch,
    |l| {
        with_leader_id(BrokerId(l.leader_id)),
        with_leader_epoch(l.leader_epoch),
    }
);
