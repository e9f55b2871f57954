//! init_producer_id (placeholder: filled in by the codec work).
