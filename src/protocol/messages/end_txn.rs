//! end_txn (placeholder: filled in by the codec work).
