//! api_versions (placeholder: filled in by the codec work).
