//! add_offsets_to_txn (placeholder: filled in by the codec work).
