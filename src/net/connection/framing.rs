//! Kafka's framing on a stream: a 4-byte size, then the body. Reading a frame bounds its size
//! (a hostile or confused peer cannot make us allocate gigabytes), and the first frame of a
//! connection is checked for a TLS record header where a size belongs, which is how a
//! plaintext link learns it reached a TLS listener.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::{LinkSecurity, Stream, io_error};
use crate::error::Error;
use crate::protocol::{Decode, Decoder, Request};

/// The largest response frame accepted (a hostile size prefix must not allocate gigabytes).
/// Below every size a TLS record header read as one gives (0x15030000 and up, 352 MB), so a
/// TLS record is never taken for a response.
pub(super) const MAX_RESPONSE_BYTES: usize = 256 * 1024 * 1024;

pub(super) fn decode_response<R: Request>(body: &[u8], version: i16) -> Result<R::Response, Error> {
    let mut d = Decoder::new(body);
    let response = R::Response::read_body(&mut d, version)?;
    d.finish("response body")?;
    Ok(response)
}

/// Writes one request frame and flushes it: over TLS, `write_all` can leave the last records
/// in the session's buffer, and a request must be on the socket once it counts as written.
/// (Over TCP the flush does nothing.) A frame in several parts (a Produce request's batches,
/// see [`RequestFrame::produce`]) goes out with vectored writes, one `writev` when the socket
/// takes it all.
pub(super) async fn write_frame<W: AsyncWrite + Unpin>(
    writer: &mut W,
    mut frame: impl Buf,
) -> std::io::Result<()> {
    writer.write_all_buf(&mut frame).await?;
    writer.flush().await
}

/// Reads one size-prefixed frame, refusing a hostile size.
pub(super) async fn read_frame<R: AsyncRead + Unpin + ?Sized>(
    reader: &mut R,
) -> std::io::Result<Bytes> {
    let size = reader.read_i32().await?;
    read_frame_body(reader, size).await
}

/// Whether the four bytes where a response's size belongs are the start of a TLS record
/// header: content type alert (0x15) or handshake (0x16), then protocol version 3.x (SSL 3.0
/// to TLS 1.3 all start 0x03 0x00..0x04). As a size that is more than 352 MB, which no
/// response reaches.
pub(super) fn looks_like_tls_record(size: [u8; 4]) -> bool {
    matches!(size, [0x15 | 0x16, 0x03, 0x00..=0x04, _])
}

/// Reads the answer to a request of the connection's opening (ApiVersions). On a plaintext
/// connection, a TLS record where the size belongs means the listener speaks TLS: a fatal
/// [`Error::SecurityProtocolMismatch`], not an I/O error to retry.
pub(super) async fn read_opening_frame(
    stream: &mut Stream,
    address: &str,
    security: &LinkSecurity,
) -> Result<Bytes, Error> {
    let mut size = [0u8; 4];
    stream
        .read_exact(&mut size)
        .await
        .map_err(|e| io_error(address, &e))?;
    if !security.uses_tls() && looks_like_tls_record(size) {
        return Err(security.mismatch(
            address,
            &format!(
                "it answered with a TLS record (bytes {:02x} {:02x} {:02x}), so it is a TLS \
                 listener",
                size[0], size[1], size[2]
            ),
        ));
    }
    read_frame_body(stream, i32::from_be_bytes(size))
        .await
        .map_err(|e| io_error(address, &e))
}

/// Reads the `size` bytes of a frame whose size prefix was read, refusing a hostile size.
pub(super) async fn read_frame_body<R: AsyncRead + Unpin + ?Sized>(
    reader: &mut R,
    size: i32,
) -> std::io::Result<Bytes> {
    let size = usize::try_from(size)
        .ok()
        .filter(|&s| s <= MAX_RESPONSE_BYTES)
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("response size {size}"),
            )
        })?;
    // Room that is not zeroed first: zeroing a fetch answer's megabytes cost about as much
    // as reading them. Each read fills some of it or ends the loop, so it ends within `size`
    // reads.
    let mut frame = BytesMut::with_capacity(size);
    while frame.len() < size {
        let room = size - frame.len();
        if reader.read_buf(&mut (&mut frame).limit(room)).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
    }
    Ok(frame.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_record_headers_are_told_from_response_sizes() {
        // A TLS 1.2 alert and a TLS 1.0 ClientHello record, as the first four bytes.
        assert!(looks_like_tls_record([0x15, 0x03, 0x03, 0x00]));
        assert!(looks_like_tls_record([0x16, 0x03, 0x01, 0x01]));
        for size in [0, 1, 1_000_000, MAX_RESPONSE_BYTES as i32] {
            assert!(!looks_like_tls_record(size.to_be_bytes()), "{size}");
        }
        // Each TLS header is larger than any response we accept, so none was a valid size.
        let smallest = i32::from_be_bytes([0x15, 0x03, 0x00, 0x00]);
        assert!(smallest as usize > MAX_RESPONSE_BYTES);
    }
}
