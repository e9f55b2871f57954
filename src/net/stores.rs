//! Java's trust and key stores, JKS and PKCS#12, read into what rustls takes: the trusted
//! certificates, and the client's certificate chain with its private key.
//!
//! As Java's `TrustManagerFactory` does, a trust store trusts every certificate entry and the
//! first certificate of every private-key entry. A key store must hold exactly one private key:
//! Java's key manager chooses among several by the issuers the broker asks for, which rustls'
//! fixed client certificate cannot do, so more than one is refused rather than guessed at.
//! Passwords are [`Secret`]s and never appear in an error.

use std::io::Read;
use std::path::Path;

#[cfg(feature = "keystores")]
use rustls::pki_types::PrivatePkcs8KeyDer;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::properties::config_error;
use super::secret::Secret;
use super::security::StoreType;
use crate::error::Error;

/// A store format this module reads (PEM files go to the PEM reader).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoreFormat {
    Jks,
    Pkcs12,
}

/// The store format of the file at `path`: `given` (`ssl.*.type`), else what its first bytes
/// say (JKS's magic number `FEEDFEED`, PKCS#12's DER sequence); `None` for PEM.
pub(crate) fn store_format(path: &Path, given: Option<StoreType>) -> Option<StoreFormat> {
    match given {
        Some(StoreType::Jks) => Some(StoreFormat::Jks),
        Some(StoreType::Pkcs12) => Some(StoreFormat::Pkcs12),
        Some(StoreType::Pem) => None,
        None => {
            let mut head = [0u8; 4];
            let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut head));
            match (read, head) {
                (Ok(()), [0xfe, 0xed, 0xfe, 0xed]) => Some(StoreFormat::Jks),
                (Ok(()), [0x30, ..]) => Some(StoreFormat::Pkcs12),
                // Text, or unreadable: the PEM reader names the file and the reason.
                _ => None,
            }
        }
    }
}

/// What a store holds, as rustls takes it.
#[derive(Default)]
pub(crate) struct StoreContents {
    /// Every certificate entry and each private-key entry's own certificate.
    pub(crate) trusted: Vec<CertificateDer<'static>>,
    /// Each private key with its certificate chain, leaf first.
    pub(crate) keys: Vec<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
}

/// The certificates the trust store at `path` trusts.
pub(crate) fn trusted_certificates(
    path: &Path,
    kind: StoreFormat,
    password: Option<&Secret>,
) -> Result<Vec<CertificateDer<'static>>, Error> {
    const SETTING: &str = "ssl.truststore.location";
    let contents = read(path, kind, password, None, SETTING)?;
    if contents.trusted.is_empty() {
        return Err(config_error(
            SETTING,
            format!("{} holds no certificate", path.display()),
        ));
    }
    Ok(contents.trusted)
}

/// The one private key and its certificate chain in the key store at `path`.
pub(crate) fn client_identity(
    path: &Path,
    kind: StoreFormat,
    password: Option<&Secret>,
    key_password: Option<&Secret>,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), Error> {
    const SETTING: &str = "ssl.keystore.location";
    let password = password.ok_or_else(|| {
        config_error(
            "ssl.keystore.password",
            "a JKS or PKCS12 key store is read with its password",
        )
    })?;
    let mut contents = read(path, kind, Some(password), key_password, SETTING)?;
    match contents.keys.len() {
        1 => Ok(contents.keys.remove(0)),
        0 => Err(config_error(
            SETTING,
            format!("{} holds no private key", path.display()),
        )),
        n => Err(config_error(
            SETTING,
            format!(
                "{} holds {n} private keys; give a key store with the client's one key",
                path.display()
            ),
        )),
    }
}

#[cfg(feature = "keystores")]
fn read(
    path: &Path,
    kind: StoreFormat,
    password: Option<&Secret>,
    key_password: Option<&Secret>,
    setting: &str,
) -> Result<StoreContents, Error> {
    let bytes = std::fs::read(path)
        .map_err(|e| config_error(setting, format!("cannot read {}: {e}", path.display())))?;
    let contents = match kind {
        StoreFormat::Jks => read_jks(&bytes, password, key_password.or(password)),
        // A PKCS#12 store without a password (Java 18's cacerts) is read with the empty one.
        StoreFormat::Pkcs12 => read_pkcs12(&bytes, password.map_or("", Secret::expose)),
    };
    contents.map_err(|reason| config_error(setting, format!("{}: {reason}", path.display())))
}

#[cfg(not(feature = "keystores"))]
fn read(
    path: &Path,
    _: StoreFormat,
    _: Option<&Secret>,
    _: Option<&Secret>,
    setting: &str,
) -> Result<StoreContents, Error> {
    Err(config_error(
        setting,
        format!(
            "{} is a JKS or PKCS12 store, which needs the crate feature `keystores`",
            path.display()
        ),
    ))
}

/// A JKS store: its SHA-1 integrity check is keyed with the store password, so a wrong
/// password and a damaged file look the same. Without a password the entries are read
/// unchecked, as Java reads a trust store given without one (AWS's MSK guides hand out the
/// JVM's `cacerts` that way); a private key always needs its password.
#[cfg(feature = "keystores")]
fn read_jks(
    bytes: &[u8],
    password: Option<&Secret>,
    key_password: Option<&Secret>,
) -> Result<StoreContents, String> {
    let unreadable = |e: jks::KeyStoreError| match e {
        jks::KeyStoreError::InvalidDigest => {
            "the store password is wrong (or the store is damaged)".to_owned()
        }
        jks::KeyStoreError::InvalidMagic => "not a JKS store".to_owned(),
        other => format!("not a readable JKS store: {other}"),
    };
    let entries: Vec<jks::Entry> = match password {
        Some(password) => {
            let mut store = jks::KeyStore::new();
            store
                .load(bytes, password.expose().as_bytes())
                .map_err(unreadable)?;
            let aliases = store.aliases();
            let mut entries = Vec::with_capacity(aliases.len());
            for alias in aliases {
                if store.is_private_key_entry(&alias) {
                    let key_password = key_password.unwrap_or(password);
                    let entry = store
                        .get_private_key_entry(&alias, key_password.expose().as_bytes())
                        .map_err(|e| {
                            format!(
                                "the private key {alias:?} cannot be read ({e}): is \
                                 ssl.key.password right?"
                            )
                        })?;
                    entries.push(jks::Entry::PrivateKey(entry));
                } else if let Ok(entry) = store.get_trusted_certificate_entry(&alias) {
                    entries.push(jks::Entry::TrustedCertificate(entry));
                }
            }
            entries
        }
        None => {
            let entries = unchecked_jks_entries(bytes).map_err(unreadable)?;
            if entries
                .iter()
                .any(|e| matches!(e, jks::Entry::PrivateKey(_)))
            {
                return Err(
                    "holds a private key, which is read with the store's password".to_owned(),
                );
            }
            entries
        }
    };
    let mut contents = StoreContents::default();
    for entry in entries {
        match entry {
            jks::Entry::PrivateKey(entry) => {
                let chain: Vec<CertificateDer<'static>> = entry
                    .certificate_chain
                    .into_iter()
                    .map(|c| CertificateDer::from(c.content))
                    .collect();
                contents.trusted.extend(chain.first().cloned());
                let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(entry.private_key));
                contents.keys.push((chain, key));
            }
            jks::Entry::TrustedCertificate(entry) => contents
                .trusted
                .push(CertificateDer::from(entry.certificate.content)),
        }
    }
    Ok(contents)
}

/// A JKS store's entries without its integrity check: magic, version, entry count, entries.
#[cfg(feature = "keystores")]
fn unchecked_jks_entries(mut bytes: &[u8]) -> Result<Vec<jks::Entry>, jks::KeyStoreError> {
    let mut decoder = jks::decoder::Decoder::new(&mut bytes);
    if decoder.read_u32()? != 0xfeed_feed {
        return Err(jks::KeyStoreError::InvalidMagic);
    }
    let version = decoder.read_u32()?;
    let count = decoder.read_u32()?;
    // Bounded by the file: each entry takes bytes, and a short file ends the loop in error.
    let mut entries = Vec::new();
    for _ in 0..count {
        entries.push(decoder.read_entry(version)?.1);
    }
    Ok(entries)
}

/// A PKCS#12 store: its MAC is keyed with the password, and its keys are encrypted with it
/// (keytool and OpenSSL use one password for both).
#[cfg(feature = "keystores")]
fn read_pkcs12(bytes: &[u8], password: &str) -> Result<StoreContents, String> {
    use p12_keystore::{KeyStore, KeyStoreEntry, Pkcs12ImportPolicy};
    let store = KeyStore::from_pkcs12(bytes, password, Pkcs12ImportPolicy::Strict).map_err(
        |e| match e {
            p12_keystore::error::Error::MacError(_) => {
                "the store password is wrong (or the store is damaged)".to_owned()
            }
            other => format!("not a readable PKCS12 store: {other}"),
        },
    )?;
    let mut contents = StoreContents::default();
    for (_, entry) in store.entries() {
        match entry {
            KeyStoreEntry::PrivateKeyChain(chain) => {
                let certs: Vec<CertificateDer<'static>> = chain
                    .certs()
                    .iter()
                    .map(|c| CertificateDer::from(c.as_der().to_vec()))
                    .collect();
                contents.trusted.extend(certs.first().cloned());
                let key =
                    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(chain.key().as_der().to_vec()));
                contents.keys.push((certs, key));
            }
            KeyStoreEntry::Certificate(cert) => contents
                .trusted
                .push(CertificateDer::from(cert.as_der().to_vec())),
            KeyStoreEntry::Secret(_) => {}
        }
    }
    Ok(contents)
}
