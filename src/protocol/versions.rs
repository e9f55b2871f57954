//! Version negotiation (placeholder: filled in by the codec work).
