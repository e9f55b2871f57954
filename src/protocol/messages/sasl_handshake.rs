//! sasl_handshake (placeholder: filled in by the codec work).
