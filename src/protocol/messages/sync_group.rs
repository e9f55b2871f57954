//! sync_group (placeholder: filled in by the codec work).
