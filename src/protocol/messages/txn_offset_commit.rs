//! txn_offset_commit (placeholder: filled in by the codec work).
