//! SCRAM credentials (KIP-554): DescribeUserScramCredentials and
//! AlterUserScramCredentials.
//!
//! The password never leaves the client: an upsertion carries a random salt and the salted
//! password (`Hi(password, salt, iterations)`, RFC 5802), computed here with the RustCrypto
//! primitives the SCRAM login uses (feature `sasl-scram`), and the broker derives the stored
//! and server keys from them. Any broker answers (forwarded to the controller under KRaft).

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest,
};

use super::Admin;
use super::wire::{outcome, string, wire_enum};
use crate::error::Result;
use crate::protocol::generated::str_bytes;

wire_enum! {
    /// A SCRAM mechanism (Kafka's `ScramMechanism`).
    ScramMechanism: i8 {
        /// SCRAM-SHA-256.
        Sha256 = 1,
        /// SCRAM-SHA-512.
        Sha512 = 2,
    }
}

/// One SCRAM credential a user has (the salt and keys are never described).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScramCredentialInfo {
    /// The mechanism.
    pub mechanism: ScramMechanism,
    /// Its iteration count.
    pub iterations: i32,
}

/// A change to one user's SCRAM credentials.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScramCredentialAlteration {
    /// Creates or replaces the user's credential for a mechanism.
    Upsert {
        /// The user.
        user: String,
        /// The mechanism.
        mechanism: ScramMechanism,
        /// The iteration count (Kafka accepts 4096 to 16384).
        iterations: i32,
        /// The random salt.
        salt: Vec<u8>,
        /// The salted password: as good as the password for logging in, so never printed.
        salted_password: Vec<u8>,
    },
    /// Removes the user's credential for a mechanism.
    Delete {
        /// The user.
        user: String,
        /// The mechanism.
        mechanism: ScramMechanism,
    },
}

impl std::fmt::Debug for ScramCredentialAlteration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScramCredentialAlteration::Upsert {
                user,
                mechanism,
                iterations,
                ..
            } => f
                .debug_struct("Upsert")
                .field("user", user)
                .field("mechanism", mechanism)
                .field("iterations", iterations)
                .finish_non_exhaustive(),
            ScramCredentialAlteration::Delete { user, mechanism } => f
                .debug_struct("Delete")
                .field("user", user)
                .field("mechanism", mechanism)
                .finish(),
        }
    }
}

impl ScramCredentialAlteration {
    /// The credential of `user` for `mechanism` with `password`, salted here with 32 bytes
    /// from the operating system's CSPRNG. Refused with [`crate::error::Error::Config`] for an
    /// unknown mechanism, an iteration count below 1, or a password SASLprep would change
    /// (Kafka's clients and this crate's login would disagree on it).
    #[cfg(feature = "sasl-scram")]
    pub fn upsert(
        user: impl Into<String>,
        mechanism: ScramMechanism,
        iterations: i32,
        password: &crate::net::secret::Secret,
    ) -> Result<Self> {
        use crate::net::sasl::scram::{ScramHash, salted_password_for_credential};
        let refused = |reason: String| crate::error::Error::Config {
            setting: "scram credential".into(),
            reason,
        };
        let hash = match mechanism {
            ScramMechanism::Sha256 => ScramHash::Sha256,
            ScramMechanism::Sha512 => ScramHash::Sha512,
            ScramMechanism::Unknown(code) => {
                return Err(refused(format!("unknown SCRAM mechanism {code}")));
            }
        };
        let rounds = u32::try_from(iterations)
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| refused(format!("iteration count {iterations}")))?;
        let mut salt = vec![0u8; 32];
        getrandom::fill(&mut salt).map_err(|e| refused(format!("no random salt: {e}")))?;
        let salted_password =
            salted_password_for_credential(hash, password, &salt, rounds).map_err(refused)?;
        Ok(ScramCredentialAlteration::Upsert {
            user: user.into(),
            mechanism,
            iterations,
            salt,
            salted_password,
        })
    }

    /// Removes `user`'s credential for `mechanism`.
    pub fn delete(user: impl Into<String>, mechanism: ScramMechanism) -> Self {
        ScramCredentialAlteration::Delete {
            user: user.into(),
            mechanism,
        }
    }

    fn user(&self) -> &str {
        match self {
            ScramCredentialAlteration::Upsert { user, .. }
            | ScramCredentialAlteration::Delete { user, .. } => user,
        }
    }
}

impl Admin {
    /// The SCRAM credentials of `users` (`None`: of every user that has one): mechanisms and
    /// iteration counts. One result per user (RESOURCE_NOT_FOUND for one without any).
    pub async fn describe_user_scram_credentials(
        &self,
        users: Option<Vec<String>>,
    ) -> Result<BTreeMap<String, Result<Vec<ScramCredentialInfo>>>> {
        let request = DescribeUserScramCredentialsRequest::default().with_users(users.map(|u| {
            u.iter()
                .map(|name| UserName::default().with_name(str_bytes(name)))
                .collect()
        }));
        let response = self
            .within("DescribeUserScramCredentials", self.call_any(request))
            .await?;
        outcome(response.error_code, response.error_message.as_ref())?;
        Ok(response
            .results
            .iter()
            .map(|r| {
                let infos = outcome(r.error_code, r.error_message.as_ref()).map(|()| {
                    r.credential_infos
                        .iter()
                        .map(|c| ScramCredentialInfo {
                            mechanism: ScramMechanism::from_code(c.mechanism),
                            iterations: c.iterations,
                        })
                        .collect()
                });
                (string(&r.user), infos)
            })
            .collect())
    }

    /// Creates, replaces or removes SCRAM credentials (AlterUserScramCredentials; the
    /// principal needs ALTER on the cluster). One result per user: every change to a user
    /// succeeds or fails together (UNACCEPTABLE_CREDENTIAL for an iteration count Kafka does
    /// not accept, RESOURCE_NOT_FOUND for removing a credential that is not there,
    /// DUPLICATE_RESOURCE for two changes of one user and mechanism).
    pub async fn alter_user_scram_credentials(
        &self,
        alterations: impl IntoIterator<Item = ScramCredentialAlteration>,
    ) -> Result<BTreeMap<String, Result<()>>> {
        let mut request = AlterUserScramCredentialsRequest::default();
        let mut users = Vec::new();
        for alteration in alterations {
            users.push(alteration.user().to_owned());
            match alteration {
                ScramCredentialAlteration::Upsert {
                    user,
                    mechanism,
                    iterations,
                    salt,
                    salted_password,
                } => request.upsertions.push(
                    ScramCredentialUpsertion::default()
                        .with_name(str_bytes(&user))
                        .with_mechanism(mechanism.code())
                        .with_iterations(iterations)
                        .with_salt(salt.into())
                        .with_salted_password(salted_password.into()),
                ),
                ScramCredentialAlteration::Delete { user, mechanism } => request.deletions.push(
                    ScramCredentialDeletion::default()
                        .with_name(str_bytes(&user))
                        .with_mechanism(mechanism.code()),
                ),
            }
        }
        let response = self
            .within("AlterUserScramCredentials", self.call_any(request))
            .await?;
        let mut results: BTreeMap<String, Result<()>> = response
            .results
            .iter()
            .map(|r| {
                (
                    string(&r.user),
                    outcome(r.error_code, r.error_message.as_ref()),
                )
            })
            .collect();
        for user in users {
            results.entry(user).or_insert_with(|| {
                Err(crate::error::Error::InvalidState(
                    "the broker did not answer for this user".into(),
                ))
            });
        }
        Ok(results)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "sasl-scram")]
    #[test]
    fn an_upsertion_is_salted_here_and_never_printed() {
        let password = crate::net::secret::Secret::from("pencil");
        let upsert =
            ScramCredentialAlteration::upsert("user", ScramMechanism::Sha512, 4096, &password)
                .expect("valid");
        let ScramCredentialAlteration::Upsert {
            salt,
            salted_password,
            ..
        } = &upsert
        else {
            panic!("an upsertion");
        };
        assert_eq!(salt.len(), 32);
        assert_eq!(salted_password.len(), 64, "SHA-512's size");
        let printed = format!("{upsert:?}");
        assert!(
            printed.contains("user") && !printed.contains("pencil"),
            "{printed}"
        );
        assert!(!printed.contains("salt"), "{printed}");
        // Another salt, another salted password.
        let again =
            ScramCredentialAlteration::upsert("user", ScramMechanism::Sha512, 4096, &password)
                .expect("valid");
        assert_ne!(upsert, again);
        // A password SASLprep changes (a non-ASCII space becomes an ASCII one) is refused.
        let changed = crate::net::secret::Secret::from("a\u{00A0}b");
        assert!(matches!(
            ScramCredentialAlteration::upsert("user", ScramMechanism::Sha256, 4096, &changed),
            Err(crate::error::Error::Config { .. })
        ));
        assert!(
            ScramCredentialAlteration::upsert("user", ScramMechanism::Unknown(9), 4096, &password)
                .is_err()
        );
    }
}
