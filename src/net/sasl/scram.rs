//! SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677; Kafka KIP-84), client side:
//!
//! ```text
//! C: n,,n=<user>,r=<client nonce>
//! S: r=<client nonce><server nonce>,s=<salt>,i=<iterations>
//! C: c=biws,r=<nonce>,p=<client proof>
//! S: v=<server signature>
//! ```
//!
//! The client nonce comes from the operating system's CSPRNG (getrandom). The server's
//! signature is checked (in constant time): a server that cannot prove it knows the password
//! is an authentication failure (RFC 5802 §5). The password is prepared with SASLprep (RFC
//! 4013, through the `stringprep` crate) as RFC 5802 §2.2 asks. Kafka's own `ScramFormatter`
//! hashes the UTF-8 bytes without SASLprep; the two agree for every password SASLprep leaves
//! unchanged, which includes all printable ASCII. Primitives are RustCrypto's (sha2, hmac,
//! pbkdf2); nothing here is hand-rolled crypto.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256, Sha512};

use super::SaslClient;
use crate::net::secret::Secret;

/// Kafka's minimum iteration count for both SCRAM mechanisms (`ScramMechanism.minIterations`),
/// also RFC 7677's floor: fewer would let a server weaken the stored key.
const MIN_ITERATIONS: u32 = 4096;
/// An upper bound, so a hostile server cannot make the client spin (Kafka's maximum is 16384).
const MAX_ITERATIONS: u32 = 1 << 20;

/// The hash function of a SCRAM mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScramHash {
    Sha256,
    Sha512,
}

/// SCRAM's `SaltedPassword` (`Hi(password, salt, iterations)`, RFC 5802 §3) for a credential
/// the admin client stores (KIP-554: the broker keeps only what is derived from it). A
/// password that SASLprep would change is refused: Kafka's own clients and tools hash the
/// UTF-8 bytes as they are, this crate's login hashes the prepared form, and a credential
/// only one of them could log in with is worse than none.
pub(crate) fn salted_password_for_credential(
    hash: ScramHash,
    password: &Secret,
    salt: &[u8],
    iterations: u32,
) -> Result<Vec<u8>, String> {
    let raw = password.expose();
    match stringprep::saslprep(raw) {
        Ok(prepared) if prepared == raw => {}
        _ => {
            return Err(
                "the password is not left unchanged by SASLprep (RFC 4013), so Kafka's clients and this crate would hash it differently".into(),
            );
        }
    }
    Ok(hash.salted_password(raw.as_bytes(), salt, iterations))
}

impl ScramHash {
    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            ScramHash::Sha256 => {
                let mut out = [0u8; 32];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
                out.to_vec()
            }
            ScramHash::Sha512 => {
                let mut out = [0u8; 64];
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out);
                out.to_vec()
            }
        }
    }

    fn hmac(self, key: &[u8], message: &[u8]) -> Vec<u8> {
        match self {
            ScramHash::Sha256 => hmac_of::<hmac::Hmac<Sha256>>(key, message),
            ScramHash::Sha512 => hmac_of::<hmac::Hmac<Sha512>>(key, message),
        }
    }

    fn hash(self, message: &[u8]) -> Vec<u8> {
        match self {
            ScramHash::Sha256 => Sha256::digest(message).to_vec(),
            ScramHash::Sha512 => Sha512::digest(message).to_vec(),
        }
    }
}

fn hmac_of<M: Mac + KeyInit>(key: &[u8], message: &[u8]) -> Vec<u8> {
    // HMAC takes keys of any length; `new_from_slice` cannot fail for it.
    let mut mac = <M as KeyInit>::new_from_slice(key).unwrap_or_else(|_| unreachable!());
    mac.update(message);
    mac.finalize().into_bytes().to_vec()
}

enum State {
    Initial,
    /// Sent client-first; holds its bare part for the AuthMessage.
    SentFirst {
        client_first_bare: String,
    },
    /// Sent client-final; holds the server signature we expect.
    SentFinal {
        server_signature: Vec<u8>,
    },
    Done,
}

/// The client side of one SCRAM exchange.
pub(crate) struct ScramClient {
    hash: ScramHash,
    username: String,
    password: Secret,
    nonce: String,
    state: State,
}

impl ScramClient {
    /// A client with a fresh nonce: 32 bytes from the OS CSPRNG, base64 (printable, no comma).
    pub fn new(hash: ScramHash, username: &str, password: &Secret) -> Result<Self, String> {
        let mut random = [0u8; 32];
        getrandom::fill(&mut random).map_err(|e| format!("no random nonce: {e}"))?;
        Ok(Self::with_nonce(
            hash,
            username,
            password,
            BASE64.encode(random),
        ))
    }

    fn with_nonce(hash: ScramHash, username: &str, password: &Secret, nonce: String) -> Self {
        ScramClient {
            hash,
            username: username.to_owned(),
            password: password.clone(),
            nonce,
            state: State::Initial,
        }
    }

    fn client_final(
        &mut self,
        server_first: &[u8],
        client_first_bare: &str,
    ) -> Result<Vec<u8>, String> {
        let server_first = std::str::from_utf8(server_first)
            .map_err(|_| "the server-first message is not UTF-8".to_owned())?;
        let attribute = |name: char| {
            server_first
                .split(',')
                .find_map(|part| part.strip_prefix(name)?.strip_prefix('='))
        };
        if let Some(error) = attribute('e') {
            return Err(format!("the broker refused: {error}"));
        }
        if server_first.starts_with("m=") {
            return Err("the broker asks for a mandatory SCRAM extension we do not know".into());
        }
        let nonce = attribute('r').ok_or("the server-first message has no nonce")?;
        // The server's nonce must extend ours, or this answers someone else's exchange.
        if nonce.len() <= self.nonce.len() || !nonce.starts_with(&self.nonce) {
            return Err("the broker's nonce does not extend the client's".into());
        }
        let salt = attribute('s')
            .and_then(|s| BASE64.decode(s).ok())
            .ok_or("the server-first message has no valid salt")?;
        let iterations: u32 = attribute('i')
            .and_then(|i| i.parse().ok())
            .ok_or("the server-first message has no valid iteration count")?;
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
            return Err(format!(
                "iteration count {iterations} is outside {MIN_ITERATIONS}..={MAX_ITERATIONS}"
            ));
        }
        let password = stringprep::saslprep(self.password.expose())
            .map_err(|_| "the password holds characters SASLprep prohibits".to_owned())?;
        let salted = self
            .hash
            .salted_password(password.as_bytes(), &salt, iterations);
        let client_key = self.hash.hmac(&salted, b"Client Key");
        let stored_key = self.hash.hash(&client_key);
        // "biws" is base64("n,,"): no channel binding, no authorization id.
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let client_signature = self.hash.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&client_signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = self.hash.hmac(&salted, b"Server Key");
        self.state = State::SentFinal {
            server_signature: self.hash.hmac(&server_key, auth_message.as_bytes()),
        };
        Ok(format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes())
    }
}

/// A user name as a SCRAM `saslname`: `=` and `,` escaped (RFC 5802 §5.1).
fn sasl_name(username: &str) -> String {
    username.replace('=', "=3D").replace(',', "=2C")
}

/// Constant-time comparison, so a forged signature learns nothing from timing.
fn equal_in_constant_time(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl SaslClient for ScramClient {
    fn initial(&mut self) -> Result<Vec<u8>, String> {
        let client_first_bare = format!("n={},r={}", sasl_name(&self.username), self.nonce);
        let message = format!("n,,{client_first_bare}");
        self.state = State::SentFirst { client_first_bare };
        Ok(message.into_bytes())
    }

    fn step(&mut self, challenge: &[u8]) -> Result<Option<Vec<u8>>, String> {
        match std::mem::replace(&mut self.state, State::Done) {
            State::SentFirst { client_first_bare } => {
                self.client_final(challenge, &client_first_bare).map(Some)
            }
            State::SentFinal { server_signature } => {
                let text = std::str::from_utf8(challenge).unwrap_or("");
                if let Some(error) = text.strip_prefix("e=") {
                    return Err(format!("the broker refused: {error}"));
                }
                let signature = text
                    .split(',')
                    .find_map(|part| part.strip_prefix("v="))
                    .and_then(|v| BASE64.decode(v).ok())
                    .ok_or("the server-final message has no signature")?;
                if !equal_in_constant_time(&signature, &server_signature) {
                    return Err(
                        "the broker's SCRAM signature is wrong: it does not know the password"
                            .into(),
                    );
                }
                Ok(None)
            }
            State::Initial | State::Done => Err("unexpected SCRAM message".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677 §3, the SCRAM-SHA-256 example.
    #[test]
    fn rfc_7677_sha_256_vector() {
        let mut client = ScramClient::with_nonce(
            ScramHash::Sha256,
            "user",
            &Secret::new("pencil"),
            "rOprNGfwEbeRWgbNEkqO".into(),
        );
        assert_eq!(
            client.initial().unwrap(),
            b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
        );
        let client_final = client
            .step(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
            .unwrap()
            .unwrap();
        assert_eq!(
            String::from_utf8(client_final).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        assert_eq!(
            client
                .step(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
                .unwrap(),
            None
        );
    }

    /// A server that does not know the password cannot produce the signature.
    #[test]
    fn a_wrong_server_signature_fails() {
        let mut client = ScramClient::with_nonce(
            ScramHash::Sha256,
            "user",
            &Secret::new("pencil"),
            "rOprNGfwEbeRWgbNEkqO".into(),
        );
        client.initial().unwrap();
        client
            .step(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
            .unwrap();
        let error = client
            .step(b"v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap_err();
        assert!(error.contains("signature"), "{error}");
    }

    /// SCRAM-SHA-512 against a server computed the way Kafka's `ScramSaslServer` does: the
    /// stored credential (salt, iterations, StoredKey, ServerKey) is made once, the client's
    /// proof is checked against StoredKey, and the client checks the server's signature.
    #[test]
    fn sha_512_round_trip_with_a_server() {
        let hash = ScramHash::Sha512;
        let salt = b"kafka-salt-0123";
        let iterations = 4096;
        let salted = hash.salted_password(b"alice-secret", salt, iterations);
        let stored_key = hash.hash(&hash.hmac(&salted, b"Client Key"));
        let server_key = hash.hmac(&salted, b"Server Key");

        let mut client = ScramClient::new(hash, "alice", &Secret::new("alice-secret")).unwrap();
        let client_first = String::from_utf8(client.initial().unwrap()).unwrap();
        let client_first_bare = client_first.strip_prefix("n,,").unwrap();
        let client_nonce = client_first_bare.split_once(",r=").unwrap().1;
        let server_first = format!(
            "r={client_nonce}server-part,s={},i={iterations}",
            BASE64.encode(salt)
        );
        let client_final =
            String::from_utf8(client.step(server_first.as_bytes()).unwrap().unwrap()).unwrap();
        let (without_proof, proof) = client_final.rsplit_once(",p=").unwrap();
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        // Server: ClientKey = proof XOR ClientSignature; H(ClientKey) must equal StoredKey.
        let client_signature = hash.hmac(&stored_key, auth_message.as_bytes());
        let client_key: Vec<u8> = BASE64
            .decode(proof)
            .unwrap()
            .iter()
            .zip(&client_signature)
            .map(|(p, s)| p ^ s)
            .collect();
        assert_eq!(hash.hash(&client_key), stored_key);
        let server_final = format!(
            "v={}",
            BASE64.encode(hash.hmac(&server_key, auth_message.as_bytes()))
        );
        assert_eq!(client.step(server_final.as_bytes()).unwrap(), None);
    }

    #[test]
    fn hostile_server_first_messages_are_refused() {
        for server_first in [
            "r=other-nonce,s=c2FsdA==,i=4096",
            "r=abc,s=c2FsdA==,i=4096",
            "r=abcdef,s=***,i=4096",
            "r=abcdef,s=c2FsdA==,i=1",
            "r=abcdef,s=c2FsdA==,i=4294967295",
            "e=unknown-user",
            "m=ext,r=abcdef,s=c2FsdA==,i=4096",
        ] {
            let mut client =
                ScramClient::with_nonce(ScramHash::Sha256, "u", &Secret::new("p"), "abc".into());
            client.initial().unwrap();
            assert!(
                client.step(server_first.as_bytes()).is_err(),
                "{server_first}"
            );
        }
    }

    #[test]
    fn user_names_are_escaped() {
        assert_eq!(sasl_name("a=b,c"), "a=3Db=2Cc");
        let mut client =
            ScramClient::with_nonce(ScramHash::Sha512, "a,b", &Secret::new("p"), "n".into());
        assert_eq!(client.initial().unwrap(), b"n,,n=a=2Cb,r=n");
    }
}
