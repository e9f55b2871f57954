//! sasl_authenticate (placeholder: filled in by the codec work).
