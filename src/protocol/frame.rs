//! A request frame as the byte strings to write in order, so a Produce request's record
//! batches go to the socket straight from the buffers they were encoded into
//! (ARCHITECTURE.md, performance shape: batch buffers go on the wire without another copy).
//!
//! The frame is a [`Buf`] whose [`Buf::chunks_vectored`] hands every part to the writer at
//! once: tokio's `write_all_buf` then writes a Produce request with one `writev` over the
//! request's fields and each batch's header and body.

use std::collections::VecDeque;
use std::io::IoSlice;

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::header::{RequestHeader, encode_request_frame};
use super::messages::produce::{ProduceRecords, ProduceRequest, RecordsOut};
use super::{ApiKey, EncodeError, Message, Request};

/// An encoded request (its size prefix included) as parts written back to back.
#[derive(Debug, Clone, Default)]
pub struct RequestFrame {
    parts: VecDeque<Bytes>,
    remaining: usize,
    api_key: i16,
    flexible: bool,
}

impl RequestFrame {
    /// Encodes `request` at `version` into one buffer (every request but Produce).
    pub fn contiguous<R: Request>(
        request: &R,
        version: i16,
        correlation_id: i32,
        client_id: Option<&str>,
    ) -> Result<Self, EncodeError> {
        let frame = encode_request_frame(request, version, correlation_id, client_id)?.freeze();
        Ok(Self {
            remaining: frame.len(),
            parts: VecDeque::from([frame]),
            api_key: R::API_KEY as i16,
            flexible: R::is_flexible(version),
        })
    }

    /// Encodes a Produce request with its records referenced, not copied: the fields go into
    /// small buffers, each partition's record parts (a stamped batch's header and body) are
    /// cloned handles to the batch's own bytes.
    pub fn produce(
        request: &ProduceRequest,
        version: i16,
        correlation_id: i32,
        client_id: Option<&str>,
    ) -> Self {
        let header = RequestHeader {
            api_key: ApiKey::Produce as i16,
            api_version: version,
            correlation_id,
            client_id: client_id.map(str::to_owned),
        };
        let mut fields = BytesMut::with_capacity(256);
        header.encode(ProduceRequest::is_flexible(version), &mut fields);
        let mut splice = Splice {
            parts: VecDeque::with_capacity(2 + 3 * request.topic_data.len()),
        };
        // The size prefix is its own part: it is known only once everything is encoded.
        splice.parts.push_back(Bytes::new());
        request.encode_records_with(version, &mut fields, &mut splice);
        splice.parts.push_back(fields.freeze());
        let mut parts = splice.parts;
        parts.retain(|p| !p.is_empty());
        let size: usize = parts.iter().map(Bytes::len).sum();
        let mut prefix = BytesMut::with_capacity(4);
        prefix.put_i32(i32::try_from(size).unwrap_or(i32::MAX));
        parts.push_front(prefix.freeze());
        Self {
            remaining: size + 4,
            parts,
            api_key: ApiKey::Produce as i16,
            flexible: ProduceRequest::is_flexible(version),
        }
    }

    /// Whether the request was written at a flexible version, so its response header is v1
    /// (see [`super::header::ResponseHeader::is_v1`]): known from the request's own type, not
    /// from a table of API keys a new API could be missing from.
    pub fn flexible(&self) -> bool {
        self.flexible
    }

    /// The request's API key.
    pub fn api_key(&self) -> i16 {
        self.api_key
    }

    /// The whole frame in one buffer (tests, and readers of the frame such as the simulation).
    #[cfg(any(test, feature = "internals"))]
    pub fn to_bytes(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(self.remaining);
        for part in &self.parts {
            out.put_slice(part);
        }
        out.freeze()
    }
}

/// Hands each partition's records to the frame as parts, after cutting off the fields
/// encoded so far.
struct Splice {
    parts: VecDeque<Bytes>,
}

impl RecordsOut<BytesMut> for Splice {
    fn put(&mut self, fields: &mut BytesMut, records: &ProduceRecords) {
        self.parts.push_back(fields.split().freeze());
        self.parts.extend(records.parts().iter().cloned());
    }
}

impl Buf for RequestFrame {
    fn remaining(&self) -> usize {
        self.remaining
    }

    fn chunk(&self) -> &[u8] {
        self.parts.front().map_or(&[], |p| p.as_ref())
    }

    fn advance(&mut self, mut cnt: usize) {
        assert!(cnt <= self.remaining, "advance past the end of the frame");
        self.remaining -= cnt;
        while cnt > 0 {
            let Some(front) = self.parts.front_mut() else {
                return;
            };
            if cnt < front.len() {
                front.advance(cnt);
                return;
            }
            cnt -= front.len();
            self.parts.pop_front();
        }
    }

    fn chunks_vectored<'a>(&'a self, dst: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        for (slot, part) in dst.iter_mut().zip(&self.parts) {
            *slot = IoSlice::new(part);
            n += 1;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::produce::{PartitionProduceData, TopicProduceData};

    fn request() -> ProduceRequest {
        let batch = |n: u8| {
            ProduceRecords::from_parts(vec![
                Bytes::from(vec![n; 61]),
                Bytes::from(vec![n + 1; 1000]),
            ])
        };
        ProduceRequest {
            transactional_id: Some("txn".into()),
            acks: -1,
            timeout_ms: 30_000,
            topic_data: vec![
                TopicProduceData {
                    name: "a".into(),
                    partition_data: vec![
                        PartitionProduceData {
                            index: 0,
                            records: Some(batch(1)),
                        },
                        PartitionProduceData {
                            index: 3,
                            records: Some(batch(5)),
                        },
                    ],
                    ..TopicProduceData::default()
                },
                TopicProduceData {
                    name: "b".into(),
                    partition_data: vec![PartitionProduceData {
                        index: 1,
                        records: None,
                    }],
                    ..TopicProduceData::default()
                },
            ],
        }
    }

    #[test]
    fn a_frame_knows_whether_its_response_header_is_flexible() {
        // Heartbeat is flexible from v4, the response header with it (KIP-482); Produce from v9.
        let heartbeat = kafka_protocol::messages::HeartbeatRequest::default();
        for (version, flexible) in [(3, false), (4, true)] {
            let frame = RequestFrame::contiguous(&heartbeat, version, 1, None).expect("encodes");
            assert_eq!(
                (frame.api_key(), frame.flexible()),
                (12, flexible),
                "v{version}"
            );
        }
        assert!(!RequestFrame::produce(&request(), 8, 1, None).flexible());
        assert!(RequestFrame::produce(&request(), 9, 1, None).flexible());
    }

    #[test]
    fn the_spliced_frame_has_the_bytes_of_the_copied_one() {
        for version in [3, 8, 9, 12] {
            let copied =
                encode_request_frame(&request(), version, 7, Some("client")).expect("encodes");
            let spliced = RequestFrame::produce(&request(), version, 7, Some("client"));
            assert_eq!(spliced.remaining(), copied.len(), "v{version}");
            assert_eq!(spliced.to_bytes(), copied.freeze(), "v{version}");
            assert_eq!(spliced.api_key(), 0);
        }
    }

    #[test]
    fn records_are_referenced_not_copied() {
        let request = request();
        let body = &request.topic_data[0].partition_data[0]
            .records
            .as_ref()
            .unwrap()
            .parts()[1];
        let frame = RequestFrame::produce(&request, 12, 1, None);
        assert!(
            frame.parts.iter().any(|p| p.as_ptr() == body.as_ptr()),
            "the batch body is one of the frame's parts"
        );
    }

    #[test]
    fn advancing_through_the_parts_reads_the_frame_in_order() {
        let mut frame = RequestFrame::produce(&request(), 9, 1, None);
        let whole = frame.to_bytes();
        let mut read = Vec::new();
        while frame.has_remaining() {
            let mut slices = [IoSlice::new(&[]); 4];
            let n = frame.chunks_vectored(&mut slices);
            let offered: usize = slices[..n].iter().map(|s| s.len()).sum();
            assert!(n > 0 && offered <= frame.remaining());
            // Read part of the first chunk only, as a short write would.
            let take = frame.chunk().len().min(7);
            read.extend_from_slice(&frame.chunk()[..take]);
            frame.advance(take);
        }
        assert_eq!(read, whole);
    }
}
