//! The Kafka wire protocol: primitives, headers, requests and responses, and RecordBatch v2.
//!
//! Pure code: no I/O, no clock. Every decoder takes untrusted bytes and returns a
//! [`DecodeError`] rather than panicking or allocating more than the input justifies.

pub mod decoder;
pub mod encoder;
pub mod error;
pub mod error_code;
pub mod frame;
pub mod generated;
pub mod header;
pub mod messages;
pub mod record_batch;
pub mod versions;

pub use decoder::Decoder;
pub use encoder::WireWrite;
pub use error::{DecodeError, DecodeErrorKind, EncodeError};

use bytes::{BufMut, BytesMut};

/// The API keys this crate speaks (Kafka's `ApiKeys`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i16)]
#[allow(missing_docs)] // the variants are Kafka's API names
pub enum ApiKey {
    Produce = 0,
    Fetch = 1,
    ListOffsets = 2,
    Metadata = 3,
    OffsetCommit = 8,
    OffsetFetch = 9,
    FindCoordinator = 10,
    JoinGroup = 11,
    Heartbeat = 12,
    LeaveGroup = 13,
    SyncGroup = 14,
    DescribeGroups = 15,
    ListGroups = 16,
    SaslHandshake = 17,
    ApiVersions = 18,
    CreateTopics = 19,
    DeleteTopics = 20,
    DeleteRecords = 21,
    InitProducerId = 22,
    OffsetForLeaderEpoch = 23,
    AddPartitionsToTxn = 24,
    AddOffsetsToTxn = 25,
    EndTxn = 26,
    WriteTxnMarkers = 27,
    TxnOffsetCommit = 28,
    DescribeAcls = 29,
    CreateAcls = 30,
    DeleteAcls = 31,
    DescribeConfigs = 32,
    AlterReplicaLogDirs = 34,
    DescribeLogDirs = 35,
    SaslAuthenticate = 36,
    CreatePartitions = 37,
    CreateDelegationToken = 38,
    RenewDelegationToken = 39,
    ExpireDelegationToken = 40,
    DescribeDelegationToken = 41,
    DeleteGroups = 42,
    ElectLeaders = 43,
    IncrementalAlterConfigs = 44,
    AlterPartitionReassignments = 45,
    ListPartitionReassignments = 46,
    OffsetDelete = 47,
    DescribeClientQuotas = 48,
    AlterClientQuotas = 49,
    DescribeUserScramCredentials = 50,
    AlterUserScramCredentials = 51,
    UpdateFeatures = 57,
    DescribeCluster = 60,
    DescribeProducers = 61,
    DescribeTransactions = 65,
    ListTransactions = 66,
    ConsumerGroupHeartbeat = 68,
    ConsumerGroupDescribe = 69,
    GetTelemetrySubscriptions = 71,
    PushTelemetry = 72,
}

/// One hand-written message body (request or response) of one API, in every version this
/// crate implements: the hot path (Produce, Fetch) and the responses a client reads from a
/// broker. The other requests are `kafka-protocol`'s generated messages (see [`generated`]).
pub trait Message: Sized {
    /// The API this message belongs to.
    const API_KEY: ApiKey;
    /// The lowest version implemented.
    const MIN_VERSION: i16;
    /// The highest version implemented.
    const MAX_VERSION: i16;
    /// The first flexible version (compact encodings and tagged fields); `i16::MAX` if none.
    const FLEXIBLE_FROM: i16;

    /// Whether `version` uses the flexible encoding.
    fn is_flexible(version: i16) -> bool {
        version >= Self::FLEXIBLE_FROM
    }

    /// Writes the body at `version`. Fields the version lacks are left out; the caller picks
    /// a version in `MIN_VERSION..=MAX_VERSION`.
    fn encode<B: BufMut>(&self, version: i16, out: &mut B);

    /// Reads the body at `version`.
    fn decode(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError>;
}

/// The API a body belongs to and the versions of it this crate speaks, for hand-written and
/// generated bodies alike: what version negotiation and the headers need.
pub trait Versioned {
    /// The API this body belongs to.
    const API_KEY: ApiKey;
    /// The lowest version spoken.
    const MIN_VERSION: i16;
    /// The highest version spoken (a generated message may know newer ones; they are not
    /// used until tested here).
    const MAX_VERSION: i16;
    /// The first flexible version (compact encodings and tagged fields); `i16::MAX` if none.
    const FLEXIBLE_FROM: i16;

    /// Whether `version` uses the flexible encoding.
    fn is_flexible(version: i16) -> bool {
        version >= Self::FLEXIBLE_FROM
    }
}

/// A body this crate writes.
pub trait Encode: Versioned {
    /// Appends the body at `version` (in `MIN_VERSION..=MAX_VERSION`) to `out`. Fails when a
    /// field is set that `version` cannot carry.
    fn write_body(&self, version: i16, out: &mut BytesMut) -> Result<(), EncodeError>;
}

/// A body this crate reads.
pub trait Decode: Versioned + Sized {
    /// Reads the body at `version`.
    fn read_body(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError>;
}

impl<M: Message> Versioned for M {
    const API_KEY: ApiKey = M::API_KEY;
    const MIN_VERSION: i16 = M::MIN_VERSION;
    const MAX_VERSION: i16 = M::MAX_VERSION;
    const FLEXIBLE_FROM: i16 = M::FLEXIBLE_FROM;
}

impl<M: Message> Encode for M {
    fn write_body(&self, version: i16, out: &mut BytesMut) -> Result<(), EncodeError> {
        self.encode(version, out);
        Ok(())
    }
}

impl<M: Message> Decode for M {
    fn read_body(d: &mut Decoder<'_>, version: i16) -> Result<Self, DecodeError> {
        M::decode(d, version)
    }
}

/// A request body, tied to the response it gets.
pub trait Request: Encode {
    /// The response body to this request.
    type Response: Decode;
}
