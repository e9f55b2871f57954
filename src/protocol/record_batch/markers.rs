//! Writing transaction markers: the control batches a partition leader appends when a
//! transaction ends (KIP-98). Producers never send these; the simulation's model broker and
//! the tests write them, so this module exists only for them.

use super::builder::{BatchBuilder, SealedBatch};
use super::compression::Compression;
use super::decode::{ControlRecord, ControlRecordKind};
use super::{CONTROL, NO_SEQUENCE, TRANSACTIONAL};

/// A control batch holding one transaction marker, as a transaction coordinator has the
/// partition leader write it at the end of a transaction (KIP-98): transactional and control
/// bits set, base sequence -1, one record whose key is `version 0, type (0 abort, 1 commit)`
/// and whose value is `version 0, coordinator epoch`. Producers never send these; the model
/// broker and tests write them.
pub fn encode_control_batch(
    marker: ControlRecord,
    timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
) -> SealedBatch {
    const CONTROL_RECORD_VERSION: i16 = 0;
    let kind: i16 = match marker.kind {
        ControlRecordKind::Abort => 0,
        ControlRecordKind::Commit => 1,
    };
    let mut key = [0u8; 4];
    key[..2].copy_from_slice(&CONTROL_RECORD_VERSION.to_be_bytes());
    key[2..].copy_from_slice(&kind.to_be_bytes());
    let mut value = [0u8; 6];
    value[..2].copy_from_slice(&CONTROL_RECORD_VERSION.to_be_bytes());
    value[2..].copy_from_slice(&marker.coordinator_epoch.to_be_bytes());
    let mut builder = BatchBuilder::new(timestamp, 16);
    builder.append(timestamp, Some(&key), Some(&value), &[]);
    let mut sealed = builder.seal_with_attributes(TRANSACTIONAL | CONTROL, Compression::None);
    sealed.stamp(producer_id, producer_epoch, NO_SEQUENCE);
    sealed
}
