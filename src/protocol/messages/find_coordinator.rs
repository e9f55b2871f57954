//! find_coordinator (placeholder: filled in by the codec work).
