//! The hand-written bodies, one module per API, each implementing [`super::Message`] for every
//! version spoken: Produce and Fetch in both directions (the hot path), and the responses the
//! producer and consumer read (bounded decoders; see [`super::generated`] for why). The other
//! requests are generated.

pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod api_versions;
pub mod consumer_group_heartbeat;
pub mod end_txn;
pub mod fetch;
mod fields;
pub mod find_coordinator;
pub mod heartbeat;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_offsets;
pub mod metadata;
pub mod offset_commit;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod sync_group;
mod tagged;
pub mod telemetry;
#[cfg(test)]
pub(crate) mod test_support;
pub mod txn_offset_commit;
