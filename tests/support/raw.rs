//! One small blocking connection to a broker for the tests that speak the protocol by hand:
//! requests through the crate's codec ([`RawConnection::call`]) or entirely through
//! `kafka-protocol`'s generated messages ([`RawConnection::call_generated`], independent of
//! the crate's own codec), over the same framing (a 4-byte size, then header and body).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use exactly::__private::protocol::header::{ResponseHeader, encode_request_frame};
use exactly::__private::protocol::{Decode, Decoder, Request};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};

/// A blocking connection to one broker.
pub struct RawConnection {
    stream: TcpStream,
    correlation_id: i32,
}

impl RawConnection {
    /// Connects to `address` (`host:port`).
    pub fn connect(address: &str) -> Self {
        let stream =
            TcpStream::connect(address).unwrap_or_else(|e| panic!("connect to {address}: {e}"));
        stream.set_read_timeout(Some(Duration::from_secs(60))).ok();
        Self {
            stream,
            correlation_id: 0,
        }
    }

    /// Sends `request` at `version` with the crate's codec and decodes the response.
    pub fn call<R: Request>(&mut self, request: &R, version: i16) -> R::Response {
        self.correlation_id += 1;
        let frame =
            encode_request_frame(request, version, self.correlation_id, Some("exactly-tests"))
                .expect("encode request");
        let body = self.exchange(&frame);
        let mut d = Decoder::new(&body);
        let header = ResponseHeader::decode(
            &mut d,
            ResponseHeader::is_v1(R::API_KEY as i16, R::is_flexible(version)),
        )
        .expect("response header");
        assert_eq!(header.correlation_id, self.correlation_id);
        R::Response::read_body(&mut d, version).expect("response body")
    }

    /// Sends `request` (API `key`) at `version` and decodes the answer, both with
    /// `kafka-protocol`'s generated messages.
    pub fn call_generated<Q, A>(&mut self, key: ApiKey, version: i16, request: &Q) -> A
    where
        Q: Encodable + HeaderVersion,
        A: Decodable + HeaderVersion,
    {
        self.correlation_id += 1;
        let header = kafka_protocol::messages::RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation_id)
            .with_client_id(Some(StrBytes::from_static_str("exactly-tests")));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, Q::header_version(version))
            .expect("encode header");
        request.encode(&mut body, version).expect("encode request");
        let mut frame = (body.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        let mut answer = Bytes::from(self.exchange(&frame));
        let header = kafka_protocol::messages::ResponseHeader::decode(
            &mut answer,
            A::header_version(version),
        )
        .expect("response header");
        assert_eq!(header.correlation_id, self.correlation_id);
        A::decode(&mut answer, version).expect("response body")
    }

    /// Writes one request `frame` and reads one response frame: its bytes after the size.
    fn exchange(&mut self, frame: &[u8]) -> Vec<u8> {
        self.stream.write_all(frame).expect("write request");
        let mut size = [0u8; 4];
        self.stream
            .read_exact(&mut size)
            .expect("read response size");
        let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut body).expect("read response");
        body
    }
}
