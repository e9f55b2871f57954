//! RecordBatch v2 (placeholder: filled in by the codec work).
