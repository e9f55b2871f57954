//! A password, key or token that must never be printed (ARCHITECTURE.md, connections
//! and security): `Debug` and `Display` show a placeholder, so a secret inside a configuration, an
//! error or a tracing event cannot leak by formatting.

use std::fmt;

/// A secret string. Its `Debug` and `Display` print `[redacted]`; read the value with
/// [`Secret::expose`], only where it goes on the wire or into a key derivation.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret value itself.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Secret::new(value)
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Secret(value)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formatting_never_shows_the_value() {
        let secret = Secret::new("hunter2");
        assert_eq!(format!("{secret:?}"), "Secret([redacted])");
        assert_eq!(format!("{secret}"), "[redacted]");
        assert_eq!(
            format!("{:#?}", Some(&secret)),
            "Some(\n    Secret([redacted]),\n)"
        );
        assert_eq!(secret.expose(), "hunter2");
    }
}
