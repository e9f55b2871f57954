//! Fuzz logic for every response decoder, in one file that both the cargo-fuzz target
//! (`fuzz/fuzz_targets/decode_response.rs`) and the stable test (`tests/fuzz_decoders.rs`)
//! include with `#[path]`.
//!
//! The first input byte picks the response type, the second its version (folded into the range
//! the type implements), the rest is the body. Decoding must never panic; whatever decodes must
//! re-encode to bytes that decode again.

use exactly::__private::protocol::messages::{
    add_offsets_to_txn::AddOffsetsToTxnResponse,
    add_partitions_to_txn::AddPartitionsToTxnResponse,
    api_versions::ApiVersionsResponse,
    consumer_group_heartbeat::ConsumerGroupHeartbeatResponse,
    end_txn::EndTxnResponse,
    fetch::FetchResponse,
    find_coordinator::FindCoordinatorResponse,
    heartbeat::HeartbeatResponse,
    init_producer_id::InitProducerIdResponse,
    join_group::JoinGroupResponse,
    leave_group::LeaveGroupResponse,
    list_offsets::ListOffsetsResponse,
    metadata::MetadataResponse,
    offset_commit::OffsetCommitResponse,
    offset_fetch::OffsetFetchResponse,
    offset_for_leader_epoch::OffsetForLeaderEpochResponse,
    produce::ProduceResponse,
    sasl_authenticate::SaslAuthenticateResponse,
    sasl_handshake::SaslHandshakeResponse,
    sync_group::SyncGroupResponse,
    telemetry::{GetTelemetrySubscriptionsResponse, PushTelemetryResponse},
    txn_offset_commit::TxnOffsetCommitResponse,
};
use exactly::__private::protocol::{Decoder, Message};

/// The version of `M` that `selector` picks.
fn version_of<M: Message>(selector: u8) -> i16 {
    let span = M::MAX_VERSION - M::MIN_VERSION + 1;
    M::MIN_VERSION + i16::from(selector) % span
}

fn check<M: Message>(version_selector: u8, body: &[u8]) {
    let version = version_of::<M>(version_selector);
    let Ok(decoded) = M::decode(&mut Decoder::new(body), version) else {
        return;
    };
    let mut encoded = Vec::new();
    decoded.encode(version, &mut encoded);
    if let Err(e) = M::decode(&mut Decoder::new(&encoded), version) {
        panic!("v{version}: a decoded response re-encodes to bytes that do not decode: {e}");
    }
}

#[allow(dead_code)] // seeds for the stable test's mutations; the fuzzer finds its own
fn encode_default<M: Message + Default>(version_selector: u8) -> Vec<u8> {
    let mut out = Vec::new();
    M::default().encode(version_of::<M>(version_selector), &mut out);
    out
}

macro_rules! response_types {
    ($($ty:ty),* $(,)?) => {
        /// How many response types the first byte chooses from.
        pub const RESPONSE_TYPES: u8 = [$(stringify!($ty)),*].len() as u8;

        /// Runs the decoder that `data`'s first two bytes choose on the rest of `data`.
        pub fn decode_response(data: &[u8]) {
            let [kind, version, body @ ..] = data else { return };
            let mut index = 0;
            $(
                if kind % RESPONSE_TYPES == index {
                    check::<$ty>(*version, body);
                }
                index += 1;
            )*
            let _ = index;
        }

        #[allow(dead_code)] // used by the stable test only
        /// A valid input for each type and version selector: the type's default value encoded,
        /// behind the two selector bytes (seeds for mutation).
        pub fn valid_input(kind: u8, version: u8) -> Vec<u8> {
            let mut out = vec![kind, version];
            let mut index = 0;
            $(
                if kind % RESPONSE_TYPES == index {
                    out.extend(encode_default::<$ty>(version));
                }
                index += 1;
            )*
            let _ = index;
            out
        }
    };
}

response_types!(
    ApiVersionsResponse,
    MetadataResponse,
    InitProducerIdResponse,
    ProduceResponse,
    FindCoordinatorResponse,
    AddPartitionsToTxnResponse,
    AddOffsetsToTxnResponse,
    TxnOffsetCommitResponse,
    EndTxnResponse,
    ListOffsetsResponse,
    FetchResponse,
    OffsetFetchResponse,
    JoinGroupResponse,
    SyncGroupResponse,
    HeartbeatResponse,
    LeaveGroupResponse,
    SaslHandshakeResponse,
    SaslAuthenticateResponse,
    OffsetCommitResponse,
    ConsumerGroupHeartbeatResponse,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryResponse,
    OffsetForLeaderEpochResponse,
);
