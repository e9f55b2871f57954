//! Field shapes that several messages share: the topic entry (a topic and its partitions) and
//! a string that becomes nullable from some version.

use bytes::BufMut;

use crate::protocol::{DecodeError, Decoder, WireWrite};

/// Which field a message version names topics by. Several messages moved from topic names to
/// topic ids (KIP-516) and keep both fields, writing the one their version has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TopicKey {
    /// The topic name: a STRING (COMPACT_STRING when flexible).
    Name,
    /// The topic id: a UUID.
    Id,
}

impl TopicKey {
    /// [`TopicKey::Id`] from version `ids_from` on, [`TopicKey::Name`] below it.
    pub(super) fn from_version(version: i16, ids_from: i16) -> Self {
        if version >= ids_from {
            Self::Id
        } else {
            Self::Name
        }
    }

    /// The one of `name` and `topic_id` this key writes.
    pub(super) fn pick<'a>(self, name: &'a str, topic_id: &'a [u8; 16]) -> TopicRef<'a> {
        match self {
            Self::Name => TopicRef::Name(name),
            Self::Id => TopicRef::Id(topic_id),
        }
    }
}

/// A topic as one version of a message writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TopicRef<'a> {
    /// By name.
    Name(&'a str),
    /// By id (KIP-516).
    Id(&'a [u8; 16]),
}

/// Writes a topic entry, the topic level of most messages (Produce, Fetch, ListOffsets,
/// OffsetFetch, AddPartitionsToTxn, TxnOffsetCommit): the topic, the array of its partition
/// entries (each through `put_partition`) and, when `flexible`, the entry's empty tagged-field
/// section.
pub(super) fn put_topic_entry<B: BufMut, P>(
    out: &mut B,
    flexible: bool,
    topic: TopicRef<'_>,
    partitions: &[P],
    put_partition: impl FnMut(&mut B, &P),
) {
    match topic {
        TopicRef::Name(name) => out.put_string(flexible, name),
        TopicRef::Id(topic_id) => out.put_uuid(topic_id),
    }
    out.put_array(flexible, partitions, put_partition);
    if flexible {
        out.put_empty_tagged_fields();
    }
}

/// Reads a topic entry written by [`put_topic_entry`], the topic named by `key`: the topic's
/// name and id (the one the version lacks left empty, or all zero) and its partitions.
pub(super) fn read_topic_entry<'a, P>(
    d: &mut Decoder<'a>,
    flexible: bool,
    key: TopicKey,
    context: &'static str,
    read_partition: impl FnMut(&mut Decoder<'a>) -> Result<P, DecodeError>,
) -> Result<(String, [u8; 16], Vec<P>), DecodeError> {
    let (name, topic_id) = match key {
        TopicKey::Name => (d.string(flexible, context)?, [0; 16]),
        TopicKey::Id => (String::new(), d.uuid(context)?),
    };
    let partitions = d.array_of(flexible, context, read_partition)?;
    if flexible {
        d.skip_tagged_fields(context)?;
    }
    Ok((name, topic_id, partitions))
}

/// Writes a string field that is nullable only in some versions: NULLABLE_STRING when
/// `nullable`, else STRING, where `None` (which those versions cannot say) is written as the
/// empty string.
pub(super) fn put_string_nullable_if<B: BufMut>(
    out: &mut B,
    flexible: bool,
    nullable: bool,
    value: Option<&str>,
) {
    if nullable {
        out.put_nullable_string(flexible, value);
    } else {
        out.put_string(flexible, value.unwrap_or_default());
    }
}

/// Reads a string field written by [`put_string_nullable_if`]; never `None` unless `nullable`.
pub(super) fn read_string_nullable_if(
    d: &mut Decoder<'_>,
    flexible: bool,
    nullable: bool,
    context: &'static str,
) -> Result<Option<String>, DecodeError> {
    if nullable {
        d.nullable_string(flexible, context)
    } else {
        d.string(flexible, context).map(Some)
    }
}
