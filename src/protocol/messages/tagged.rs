//! Writing a tagged-field section with content (flexible versions, KIP-482). Structs without
//! tagged fields to write use [`crate::protocol::WireWrite::put_empty_tagged_fields`]; reading
//! is [`crate::protocol::Decoder::tagged_fields`].

use bytes::BufMut;

use crate::protocol::WireWrite;

/// The tagged fields of one struct, gathered in ascending tag order and then written as one
/// tagged-field section: the count, then each field's tag, size and bytes. Callers add a
/// field only when it differs from its default, as Kafka's generated code does, so a struct
/// at its defaults writes an empty section.
#[derive(Debug, Default)]
pub(super) struct TaggedFields {
    fields: Vec<(u32, Vec<u8>)>,
}

impl TaggedFields {
    /// Adds field `tag`, whose bytes `write` produces. Tags must be added in ascending order.
    pub(super) fn add(&mut self, tag: u32, write: impl FnOnce(&mut Vec<u8>)) {
        debug_assert!(
            self.fields.last().is_none_or(|(last, _)| *last < tag),
            "tagged fields must be added in ascending tag order"
        );
        let mut body = Vec::new();
        write(&mut body);
        self.fields.push((tag, body));
    }

    /// Writes the section.
    pub(super) fn write<B: BufMut>(self, out: &mut B) {
        out.put_uvarint(self.fields.len() as u32);
        for (tag, body) in &self.fields {
            out.put_tagged_field(*tag, body);
        }
    }
}
