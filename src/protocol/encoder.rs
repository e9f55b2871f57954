//! Writing Kafka's primitive types into any [`BufMut`] (`Vec<u8>`, `BytesMut`).
//!
//! Encoding is infallible: lengths are written as the wire type requires, and the values the
//! crate encodes are validated where they enter it (topic names, client id, record sizes), so
//! an out-of-range length here is a bug in the caller, caught by a debug assertion.

use bytes::BufMut;

/// Kafka's primitive types on top of [`BufMut`]'s fixed-width big-endian writers
/// (`put_i8`, `put_i16`, `put_i32`, `put_i64`, `put_u32`, ...).
pub trait WireWrite: BufMut {
    /// BOOLEAN.
    fn put_bool(&mut self, v: bool) {
        self.put_u8(u8::from(v));
    }

    /// UUID (16 raw bytes).
    fn put_uuid(&mut self, v: &[u8; 16]) {
        self.put_slice(v);
    }

    /// UNSIGNED_VARINT.
    fn put_uvarint(&mut self, v: u32) {
        self.put_uvarlong(u64::from(v));
    }

    /// Unsigned LEB128 of a 64-bit value.
    fn put_uvarlong(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.put_u8((v as u8) | 0x80);
            v >>= 7;
        }
        self.put_u8(v as u8);
    }

    /// VARINT (zig-zag).
    fn put_varint(&mut self, v: i32) {
        self.put_uvarint(((v << 1) ^ (v >> 31)) as u32);
    }

    /// VARLONG (zig-zag).
    fn put_varlong(&mut self, v: i64) {
        self.put_uvarlong(((v << 1) ^ (v >> 63)) as u64);
    }

    /// The length prefix of a compact (flexible) string, bytes or array: N + 1, or 0 for null.
    fn put_compact_len(&mut self, len: Option<usize>) {
        match len {
            None => self.put_uvarint(0),
            Some(n) => {
                debug_assert!(n < u32::MAX as usize, "compact length {n} too large");
                self.put_uvarint(n as u32 + 1)
            }
        }
    }

    /// STRING or COMPACT_STRING, chosen by `flexible`.
    fn put_string(&mut self, flexible: bool, v: &str) {
        self.put_nullable_string(flexible, Some(v));
    }

    /// NULLABLE_STRING or COMPACT_NULLABLE_STRING, chosen by `flexible`.
    fn put_nullable_string(&mut self, flexible: bool, v: Option<&str>) {
        if flexible {
            self.put_compact_len(v.map(str::len));
        } else {
            match v {
                None => self.put_i16(-1),
                Some(s) => {
                    debug_assert!(s.len() <= i16::MAX as usize, "string of {} bytes", s.len());
                    self.put_i16(s.len() as i16)
                }
            }
        }
        if let Some(s) = v {
            self.put_slice(s.as_bytes());
        }
    }

    /// BYTES or COMPACT_BYTES, chosen by `flexible`. (Not `put_bytes`: `BufMut` has one.)
    fn put_bytes_field(&mut self, flexible: bool, v: &[u8]) {
        self.put_nullable_bytes(flexible, Some(v));
    }

    /// NULLABLE_BYTES or COMPACT_NULLABLE_BYTES, chosen by `flexible`.
    fn put_nullable_bytes(&mut self, flexible: bool, v: Option<&[u8]>) {
        self.put_nullable_len(flexible, v.map(<[u8]>::len));
        if let Some(b) = v {
            self.put_slice(b);
        }
    }

    /// The length prefix of NULLABLE_BYTES or COMPACT_NULLABLE_BYTES alone, for bytes the
    /// caller writes (or references) itself.
    fn put_nullable_len(&mut self, flexible: bool, len: Option<usize>) {
        if flexible {
            self.put_compact_len(len);
        } else {
            match len {
                None => self.put_i32(-1),
                Some(n) => {
                    debug_assert!(n <= i32::MAX as usize, "bytes of {n} bytes");
                    self.put_i32(n as i32)
                }
            }
        }
    }

    /// The length prefix of an ARRAY or COMPACT_ARRAY (`None` for a null array).
    fn put_array_len(&mut self, flexible: bool, len: Option<usize>) {
        if flexible {
            self.put_compact_len(len);
        } else {
            match len {
                None => self.put_i32(-1),
                Some(n) => self.put_i32(n as i32),
            }
        }
    }

    /// An ARRAY or COMPACT_ARRAY: the length, then each element through `element`.
    fn put_array<T>(&mut self, flexible: bool, items: &[T], mut element: impl FnMut(&mut Self, &T))
    where
        Self: Sized,
    {
        self.put_array_len(flexible, Some(items.len()));
        for item in items {
            element(self, item);
        }
    }

    /// An empty tagged-field section (count 0).
    fn put_empty_tagged_fields(&mut self) {
        self.put_uvarint(0);
    }

    /// One tagged field: `(tag, size, bytes)`. The caller writes the count first.
    fn put_tagged_field(&mut self, tag: u32, body: &[u8]) {
        self.put_uvarint(tag);
        self.put_uvarint(body.len() as u32);
        self.put_slice(body);
    }
}

impl<B: BufMut + ?Sized> WireWrite for B {}
