//! Reading Kafka's primitive types from a byte slice.
//!
//! [`Decoder`] is a cursor over borrowed bytes. Every read checks the bytes it needs against
//! what is left, so hostile lengths become [`DecodeError`]s; array capacities are bounded by
//! the bytes left (every element takes at least one byte), so a claimed length of two billion
//! elements never allocates two billion slots.

use bytes::Bytes;

use super::error::{DecodeError, DecodeErrorKind};

/// A cursor over the bytes of one frame.
#[derive(Debug, Clone)]
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
    /// The shared buffer `buf` is, if the decoder was made with [`Decoder::shared`]: byte
    /// strings read are slices of it instead of copies.
    shared: Option<&'a Bytes>,
}

impl<'a> Decoder<'a> {
    /// A decoder positioned at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self {
            buf,
            pos: 0,
            shared: None,
        }
    }

    /// A decoder over a shared frame: the byte strings it reads (a Fetch answer's records)
    /// are slices of `frame`, not copies, and keep it alive as long as they live.
    pub fn shared(frame: &'a Bytes) -> Self {
        Self {
            buf: frame,
            pos: 0,
            shared: Some(frame),
        }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The bytes not yet consumed, without consuming them.
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// An error of `kind` at the current position.
    pub fn error(&self, context: &'static str, kind: DecodeErrorKind) -> DecodeError {
        DecodeError {
            context,
            offset: self.pos,
            kind,
        }
    }

    /// Fails unless every byte was consumed.
    pub fn finish(&self, context: &'static str) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(self.error(context, DecodeErrorKind::TrailingBytes(n))),
        }
    }

    /// Consumes exactly `n` bytes.
    pub fn take(&mut self, n: usize, context: &'static str) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(self.error(
                context,
                DecodeErrorKind::UnexpectedEof {
                    needed: n,
                    remaining: self.remaining(),
                },
            ));
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, context: &'static str) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, context)?);
        Ok(out)
    }

    /// INT8.
    pub fn i8(&mut self, context: &'static str) -> Result<i8, DecodeError> {
        Ok(i8::from_be_bytes(self.array(context)?))
    }
    /// INT16.
    pub fn i16(&mut self, context: &'static str) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(self.array(context)?))
    }
    /// INT32.
    pub fn i32(&mut self, context: &'static str) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array(context)?))
    }
    /// UINT32.
    pub fn u32(&mut self, context: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array(context)?))
    }
    /// INT64.
    pub fn i64(&mut self, context: &'static str) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.array(context)?))
    }
    /// UUID (16 raw bytes).
    pub fn uuid(&mut self, context: &'static str) -> Result<[u8; 16], DecodeError> {
        self.array(context)
    }
    /// BOOLEAN: any non-zero byte is true, as the Java client reads it.
    pub fn bool(&mut self, context: &'static str) -> Result<bool, DecodeError> {
        Ok(self.array::<1>(context)?[0] != 0)
    }

    /// UNSIGNED_VARINT (at most 5 bytes).
    pub fn uvarint(&mut self, context: &'static str) -> Result<u32, DecodeError> {
        let v = self.uvarlong_bounded(5, context)?;
        u32::try_from(v).map_err(|_| self.error(context, DecodeErrorKind::VarintOverflow))
    }

    /// Unsigned LEB128 of at most 10 bytes.
    pub fn uvarlong(&mut self, context: &'static str) -> Result<u64, DecodeError> {
        self.uvarlong_bounded(10, context)
    }

    fn uvarlong_bounded(
        &mut self,
        max_bytes: u32,
        context: &'static str,
    ) -> Result<u64, DecodeError> {
        let mut value: u64 = 0;
        for i in 0..max_bytes {
            let byte = self.array::<1>(context)?[0];
            let bits = u64::from(byte & 0x7f);
            let shift = 7 * i;
            if shift == 63 && bits > 1 {
                return Err(self.error(context, DecodeErrorKind::VarintOverflow));
            }
            value |= bits << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.error(context, DecodeErrorKind::VarintOverflow))
    }

    /// VARINT (zig-zag, at most 5 bytes).
    pub fn varint(&mut self, context: &'static str) -> Result<i32, DecodeError> {
        let v = self.uvarint(context)?;
        Ok(((v >> 1) as i32) ^ -((v & 1) as i32))
    }

    /// VARLONG (zig-zag, at most 10 bytes).
    pub fn varlong(&mut self, context: &'static str) -> Result<i64, DecodeError> {
        let v = self.uvarlong(context)?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    /// A length that must fit in what is left of the input; `None` for -1 when `nullable`.
    fn length(
        &mut self,
        raw: i64,
        nullable: bool,
        context: &'static str,
    ) -> Result<Option<usize>, DecodeError> {
        if raw == -1 && nullable {
            return Ok(None);
        }
        match usize::try_from(raw) {
            Ok(n) if n <= self.remaining() => Ok(Some(n)),
            _ => Err(self.error(context, DecodeErrorKind::InvalidLength(raw))),
        }
    }

    fn utf8(&self, bytes: &'a [u8], context: &'static str) -> Result<String, DecodeError> {
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| self.error(context, DecodeErrorKind::InvalidUtf8))
    }

    fn string_of_len(
        &mut self,
        len: Option<usize>,
        context: &'static str,
    ) -> Result<Option<String>, DecodeError> {
        match len {
            None => Ok(None),
            Some(n) => {
                let bytes = self.take(n, context)?;
                self.utf8(bytes, context).map(Some)
            }
        }
    }

    fn classic_len(
        &mut self,
        nullable: bool,
        context: &'static str,
    ) -> Result<Option<usize>, DecodeError> {
        let raw = self.i16(context)?;
        self.length(i64::from(raw), nullable, context)
    }

    fn compact_len(
        &mut self,
        nullable: bool,
        context: &'static str,
    ) -> Result<Option<usize>, DecodeError> {
        let raw = i64::from(self.uvarint(context)?) - 1;
        self.length(raw, nullable, context)
    }

    fn required<T>(&self, v: Option<T>, context: &'static str) -> Result<T, DecodeError> {
        v.ok_or_else(|| self.error(context, DecodeErrorKind::InvalidLength(-1)))
    }

    /// STRING (int16 length) or COMPACT_STRING, chosen by `flexible`.
    pub fn string(&mut self, flexible: bool, context: &'static str) -> Result<String, DecodeError> {
        let s = self.nullable_string_inner(flexible, false, context)?;
        self.required(s, context)
    }

    /// NULLABLE_STRING or COMPACT_NULLABLE_STRING, chosen by `flexible`.
    pub fn nullable_string(
        &mut self,
        flexible: bool,
        context: &'static str,
    ) -> Result<Option<String>, DecodeError> {
        self.nullable_string_inner(flexible, true, context)
    }

    fn nullable_string_inner(
        &mut self,
        flexible: bool,
        nullable: bool,
        context: &'static str,
    ) -> Result<Option<String>, DecodeError> {
        let len = if flexible {
            self.compact_len(nullable, context)?
        } else {
            self.classic_len(nullable, context)?
        };
        self.string_of_len(len, context)
    }

    /// BYTES (int32 length) or COMPACT_BYTES, chosen by `flexible`; copies into [`Bytes`].
    pub fn bytes(&mut self, flexible: bool, context: &'static str) -> Result<Bytes, DecodeError> {
        let b = self.nullable_bytes_inner(flexible, false, context)?;
        self.required(b, context)
    }

    /// NULLABLE_BYTES or COMPACT_NULLABLE_BYTES, chosen by `flexible`.
    pub fn nullable_bytes(
        &mut self,
        flexible: bool,
        context: &'static str,
    ) -> Result<Option<Bytes>, DecodeError> {
        self.nullable_bytes_inner(flexible, true, context)
    }

    fn nullable_bytes_inner(
        &mut self,
        flexible: bool,
        nullable: bool,
        context: &'static str,
    ) -> Result<Option<Bytes>, DecodeError> {
        let len = if flexible {
            self.compact_len(nullable, context)?
        } else {
            let raw = self.i32(context)?;
            self.length(i64::from(raw), nullable, context)?
        };
        let shared = self.shared;
        Ok(len
            .map(|n| self.take(n, context))
            .transpose()?
            .map(|taken| match shared {
                Some(frame) => frame.slice_ref(taken),
                None => Bytes::copy_from_slice(taken),
            }))
    }

    /// The element count of an ARRAY (int32) or COMPACT_ARRAY, chosen by `flexible`; `None`
    /// for a null array. The count is checked against the bytes left (each element takes at
    /// least one byte); use [`initial_capacity`] before reserving room for that many
    /// elements of a larger type.
    pub fn array_len(
        &mut self,
        flexible: bool,
        context: &'static str,
    ) -> Result<Option<usize>, DecodeError> {
        let raw = if flexible {
            i64::from(self.uvarint(context)?) - 1
        } else {
            i64::from(self.i32(context)?)
        };
        self.length(raw, true, context)
    }

    /// An ARRAY or COMPACT_ARRAY decoded element by element; a null array reads as empty.
    pub fn array_of<T>(
        &mut self,
        flexible: bool,
        context: &'static str,
        mut element: impl FnMut(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Vec<T>, DecodeError> {
        let n = self.array_len(flexible, context)?.unwrap_or(0);
        let mut out = Vec::with_capacity(initial_capacity(n));
        for _ in 0..n {
            out.push(element(self)?);
        }
        Ok(out)
    }

    /// A nullable ARRAY or COMPACT_ARRAY decoded element by element.
    pub fn nullable_array_of<T>(
        &mut self,
        flexible: bool,
        context: &'static str,
        mut element: impl FnMut(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Option<Vec<T>>, DecodeError> {
        match self.array_len(flexible, context)? {
            None => Ok(None),
            Some(n) => {
                let mut out = Vec::with_capacity(initial_capacity(n));
                for _ in 0..n {
                    out.push(element(self)?);
                }
                Ok(Some(out))
            }
        }
    }

    /// A tagged-field section: a count, then `(tag, size, bytes)` entries. `known` is called
    /// with each tag and a decoder over exactly that field's bytes; it returns `Ok(false)` for
    /// a tag it does not know, which is skipped (tagged fields are optional by design).
    pub fn tagged_fields(
        &mut self,
        context: &'static str,
        mut known: impl FnMut(u32, &mut Decoder<'a>) -> Result<bool, DecodeError>,
    ) -> Result<(), DecodeError> {
        let count = self.uvarint(context)?;
        for _ in 0..count {
            let tag = self.uvarint(context)?;
            let size = self.uvarint(context)? as usize;
            let start = self.pos;
            let body = self.take(size, context)?;
            let mut field = Decoder {
                buf: &self.buf[..start + body.len()],
                pos: start,
                // The same memory, cut shorter: its slices are still the frame's.
                shared: self.shared,
            };
            if known(tag, &mut field)? {
                field.finish(context)?;
            }
        }
        Ok(())
    }

    /// Skips a tagged-field section, for messages that define no tagged fields we use.
    pub fn skip_tagged_fields(&mut self, context: &'static str) -> Result<(), DecodeError> {
        self.tagged_fields(context, |_, _| Ok(false))
    }
}

/// Room to reserve for `claimed` elements: a claimed count is only bounded by the bytes
/// left, and an element may be a hundred times larger in memory than its smallest encoding,
/// so a hostile frame could otherwise make us reserve far more than it is worth. Vectors grow
/// past this as elements actually decode.
pub fn initial_capacity(claimed: usize) -> usize {
    claimed.min(1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::encoder::WireWrite;
    use bytes::BufMut;

    #[test]
    fn varints_round_trip_at_the_edges() {
        for v in [0, 1, -1, 63, -64, 64, i32::MAX, i32::MIN] {
            let mut out = Vec::new();
            out.put_varint(v);
            assert_eq!(Decoder::new(&out).varint("t").unwrap(), v);
        }
        for v in [0, 1, -1, i64::MAX, i64::MIN, 1 << 40] {
            let mut out = Vec::new();
            out.put_varlong(v);
            assert_eq!(Decoder::new(&out).varlong("t").unwrap(), v);
        }
        for v in [0, 127, 128, u32::MAX] {
            let mut out = Vec::new();
            out.put_uvarint(v);
            assert_eq!(Decoder::new(&out).uvarint("t").unwrap(), v);
        }
    }

    #[test]
    fn zigzag_matches_the_spec_examples() {
        // Protobuf's zig-zag table, which Kafka's varints follow.
        for (v, wire) in [(0, 0u8), (-1, 1), (1, 2), (-2, 3), (2, 4)] {
            let mut out = Vec::new();
            out.put_varint(v);
            assert_eq!(out, [wire]);
        }
        let mut out = Vec::new();
        out.put_uvarint(300);
        assert_eq!(out, [0xac, 0x02]);
    }

    #[test]
    fn overlong_varints_are_errors() {
        let six = [0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert!(matches!(
            Decoder::new(&six).uvarint("t").unwrap_err().kind,
            DecodeErrorKind::VarintOverflow
        ));
        let too_big = [0xff, 0xff, 0xff, 0xff, 0x1f];
        assert!(Decoder::new(&too_big).uvarint("t").is_err());
        let eleven = [0xffu8; 11];
        assert!(Decoder::new(&eleven).uvarlong("t").is_err());
    }

    #[test]
    fn hostile_lengths_do_not_allocate() {
        // An array claiming i32::MAX elements with four bytes behind it.
        let buf = [0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0];
        let err = Decoder::new(&buf).array_len(false, "t").unwrap_err();
        assert_eq!(
            err.kind,
            DecodeErrorKind::InvalidLength(i64::from(i32::MAX))
        );
        // A string claiming more bytes than there are.
        let buf = [0x00, 0x05, b'a'];
        assert!(Decoder::new(&buf).string(false, "t").is_err());
        // A negative non-null length.
        let buf = [0xff, 0xfe];
        assert!(Decoder::new(&buf).nullable_string(false, "t").is_err());
    }

    #[test]
    fn nulls_read_as_none() {
        let mut d = Decoder::new(&[0xff, 0xff, 0x00]);
        assert_eq!(d.nullable_string(false, "t").unwrap(), None);
        assert_eq!(d.nullable_string(true, "t").unwrap(), None);
        assert!(Decoder::new(&[0xff, 0xff]).string(false, "t").is_err());
    }

    #[test]
    fn unknown_tagged_fields_are_skipped_and_known_ones_read() {
        let mut out = Vec::new();
        out.put_uvarint(2);
        out.put_uvarint(7);
        out.put_uvarint(3);
        out.extend_from_slice(b"xyz");
        out.put_uvarint(1);
        out.put_uvarint(4);
        out.put_i32(42);
        let mut seen = None;
        let mut d = Decoder::new(&out);
        d.tagged_fields("t", |tag, f| {
            if tag == 1 {
                seen = Some(f.i32("t")?);
                return Ok(true);
            }
            Ok(false)
        })
        .unwrap();
        assert_eq!(seen, Some(42));
        d.finish("t").unwrap();
    }
}
