//! list_offsets (placeholder: filled in by the codec work).
