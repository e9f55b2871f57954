//! offset_fetch (placeholder: filled in by the codec work).
