//! SASL/PLAIN (RFC 4616): one message, `authzid NUL authcid NUL password`, with an empty
//! authorization id (act as the authenticated user). The broker answers with an empty message.

use super::SaslClient;
use crate::net::secret::Secret;

/// The client side of one PLAIN exchange.
pub(crate) struct PlainClient {
    username: String,
    password: Secret,
}

impl PlainClient {
    pub fn new(username: &str, password: &Secret) -> Self {
        PlainClient {
            username: username.to_owned(),
            password: password.clone(),
        }
    }
}

impl SaslClient for PlainClient {
    fn initial(&mut self) -> Result<Vec<u8>, String> {
        // RFC 4616 §2: neither part may contain NUL, or the message would be ambiguous.
        if self.username.contains('\0') || self.password.expose().contains('\0') {
            return Err("PLAIN credentials must not contain NUL characters".into());
        }
        Ok(format!("\0{}\0{}", self.username, self.password.expose()).into_bytes())
    }

    fn step(&mut self, _challenge: &[u8]) -> Result<Option<Vec<u8>>, String> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_is_nul_separated() {
        let mut client = PlainClient::new("alice", &Secret::new("pw"));
        assert_eq!(client.initial().unwrap(), b"\0alice\0pw");
        assert_eq!(client.step(b"").unwrap(), None);
        let mut bad = PlainClient::new("a\0b", &Secret::new("pw"));
        assert!(bad.initial().is_err());
    }
}
