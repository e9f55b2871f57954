//! The settings of a SASL/GSSAPI (Kerberos) login, under Java's names
//! (`sasl.kerberos.service.name`, the `Krb5LoginModule` options `principal`, `keyTab`,
//! `serviceName`) and librdkafka's (`sasl.kerberos.principal`, `sasl.kerberos.keytab`). The
//! exchange itself is in `gssapi.rs` (crate feature `gssapi`).
//!
//! Credentials come from the process's Kerberos environment, as they do for MIT krb5's own
//! tools and for librdkafka (which runs `kinit` into the default ticket cache): a ticket cache
//! (`KRB5CCNAME`, filled by `kinit`) or a client keytab, from which MIT's GSSAPI library gets
//! and renews tickets by itself (`KRB5_CLIENT_KTNAME`, or `default_client_keytab_name` in
//! krb5.conf). A keytab named in the settings must be the one `KRB5_CLIENT_KTNAME` names: the
//! library's safe binding has no call that points one client at a keytab of its own (that
//! would be `gss_acquire_cred_from`), and changing the environment of a running, threaded
//! process is not safe. So a `client.properties` whose JAAS line names a keytab works when the
//! environment names the same file, and is refused with the line to set otherwise.

use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::net::properties::config_error;
use crate::net::secret::Secret;

// The settings' names; their rows (default, documentation) are in `settings.rs`.
pub(crate) const SASL_KERBEROS_SERVICE_NAME: &str = "sasl.kerberos.service.name";
pub(crate) const SASL_KERBEROS_PRINCIPAL: &str = "sasl.kerberos.principal";
pub(crate) const SASL_KERBEROS_KEYTAB: &str = "sasl.kerberos.keytab";
const SASL_JAAS_CONFIG: &str = "sasl.jaas.config";

/// Every name [`KerberosLogin::set`] takes.
pub(crate) const SETTINGS: [&str; 3] = [
    SASL_KERBEROS_SERVICE_NAME,
    SASL_KERBEROS_PRINCIPAL,
    SASL_KERBEROS_KEYTAB,
];

/// The environment variable MIT krb5 reads the client keytab's name from.
pub(crate) const CLIENT_KEYTAB_VARIABLE: &str = "KRB5_CLIENT_KTNAME";

/// The first part of the brokers' service principal when `sasl.kerberos.service.name` is not
/// set. Java has no default (the setting is required); librdkafka's is `kafka`, which is also
/// what Kafka's documentation names its brokers' principals.
#[cfg(feature = "gssapi")]
const DEFAULT_SERVICE_NAME: &str = "kafka";

/// A SASL/GSSAPI login (crate feature `gssapi`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct KerberosLogin {
    /// `sasl.kerberos.service.name` (or the JAAS `serviceName`): the first part of the
    /// brokers' principals, `<service>/<broker host>@REALM`; `None`: `kafka`.
    pub service_name: Option<String>,
    /// `sasl.kerberos.principal` (or the JAAS `principal`): the client principal to log in as;
    /// `None`: the ticket cache's principal, else the client keytab's first.
    pub principal: Option<String>,
    /// `sasl.kerberos.keytab` (or the JAAS `keyTab`): the client keytab. It must exist and be
    /// the file `KRB5_CLIENT_KTNAME` names (see the module's documentation).
    pub keytab: Option<PathBuf>,
}

impl KerberosLogin {
    /// Sets one of [`SETTINGS`].
    pub(crate) fn set(&mut self, key: &str, value: &str) -> Result<(), Error> {
        let value = non_empty(key, value)?;
        match key {
            SASL_KERBEROS_SERVICE_NAME => self.service_name = Some(value.to_owned()),
            SASL_KERBEROS_PRINCIPAL => self.principal = Some(value.to_owned()),
            SASL_KERBEROS_KEYTAB => self.keytab = Some(keytab_path(value)),
            _ => return Err(config_error(key, "not a Kerberos property")),
        }
        Ok(())
    }

    /// Takes the options of a JAAS `Krb5LoginModule` entry (Java's `client.properties` for a
    /// Kerberos cluster).
    pub(crate) fn set_jaas_options<'a>(
        &mut self,
        options: impl Iterator<Item = (&'a String, &'a Secret)>,
    ) -> Result<(), Error> {
        for (option, value) in options {
            let value = value.expose();
            match option.as_str() {
                "principal" => self.principal = Some(non_empty(SASL_JAAS_CONFIG, value)?.into()),
                "keyTab" => self.keytab = Some(keytab_path(non_empty(SASL_JAAS_CONFIG, value)?)),
                "serviceName" => {
                    self.service_name = Some(non_empty(SASL_JAAS_CONFIG, value)?.into());
                }
                // What they ask for (a keytab, the ticket cache, no password prompt, the login
                // being the initiator) is what the GSSAPI library does anyway; `debug` only
                // changes what Java logs.
                "useKeyTab" | "storeKey" | "useTicketCache" | "doNotPrompt" | "isInitiator"
                | "refreshKrb5Config" | "renewTGT" | "debug" => {}
                "ticketCache" => {
                    return Err(config_error(
                        SASL_JAAS_CONFIG,
                        "Krb5LoginModule option ticketCache is not supported: the GSSAPI \
                         library reads the ticket cache KRB5CCNAME names; set KRB5CCNAME to it",
                    ));
                }
                other => {
                    return Err(config_error(
                        SASL_JAAS_CONFIG,
                        format!(
                            "Krb5LoginModule option {other} is not supported (principal, keyTab, \
                             serviceName, useKeyTab, storeKey, useTicketCache, doNotPrompt, \
                             isInitiator, refreshKrb5Config, renewTGT and debug are)"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Checks a named keytab against `client_keytab_variable`, the value of
    /// `KRB5_CLIENT_KTNAME` (passed in, so that the check is testable).
    pub(crate) fn validate(&self, client_keytab_variable: Option<&str>) -> Result<(), Error> {
        let Some(keytab) = &self.keytab else {
            return Ok(());
        };
        let key = SASL_KERBEROS_KEYTAB;
        if !keytab.is_file() {
            return Err(config_error(
                key,
                format!("the keytab {} does not exist", keytab.display()),
            ));
        }
        let named = client_keytab_variable.map(keytab_path);
        if named
            .as_deref()
            .is_some_and(|named| same_file(named, keytab))
        {
            return Ok(());
        }
        let now = match client_keytab_variable {
            None => "is not set".to_owned(),
            Some(value) => format!("names {value}"),
        };
        Err(config_error(
            key,
            format!(
                "the GSSAPI library reads a client keytab from {CLIENT_KEYTAB_VARIABLE}, which \
                 {now}: set {CLIENT_KEYTAB_VARIABLE}={} in the process's environment",
                keytab.display()
            ),
        ))
    }

    /// The brokers' service name.
    #[cfg(feature = "gssapi")]
    pub(crate) fn service_name(&self) -> &str {
        self.service_name.as_deref().unwrap_or(DEFAULT_SERVICE_NAME)
    }
}

fn non_empty<'a>(key: &str, value: &'a str) -> Result<&'a str, Error> {
    let value = value.trim();
    if value.is_empty() {
        return Err(config_error(key, "must not be empty"));
    }
    Ok(value)
}

/// A keytab name as MIT writes it (`FILE:/path` or `/path`) as a path.
fn keytab_path(name: &str) -> PathBuf {
    PathBuf::from(name.trim().strip_prefix("FILE:").unwrap_or(name.trim()))
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::jaas;

    #[test]
    fn a_java_kerberos_jaas_line_lands_in_the_same_fields_as_librdkafka_names() {
        let entry = jaas::parse(
            r#"com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true
               storeKey=true keyTab="/etc/security/keytabs/app.keytab"
               principal="app@EXAMPLE.COM" serviceName="kafka";"#,
        )
        .unwrap();
        let mut from_jaas = KerberosLogin::default();
        from_jaas.set_jaas_options(entry.options.iter()).unwrap();
        let mut from_names = KerberosLogin::default();
        from_names.set(SASL_KERBEROS_SERVICE_NAME, "kafka").unwrap();
        from_names
            .set(SASL_KERBEROS_PRINCIPAL, "app@EXAMPLE.COM")
            .unwrap();
        from_names
            .set(
                SASL_KERBEROS_KEYTAB,
                "FILE:/etc/security/keytabs/app.keytab",
            )
            .unwrap();
        assert_eq!(from_jaas, from_names);
        #[cfg(feature = "gssapi")]
        assert_eq!(KerberosLogin::default().service_name(), "kafka");
    }

    #[test]
    fn unsupported_jaas_options_and_empty_values_are_refused() {
        let mut login = KerberosLogin::default();
        for line in [
            r#"x.Krb5LoginModule required ticketCache="/tmp/cache";"#,
            r#"x.Krb5LoginModule required useFirstPass=true;"#,
            r#"x.Krb5LoginModule required principal="";"#,
        ] {
            let entry = jaas::parse(line).unwrap();
            assert!(
                login.set_jaas_options(entry.options.iter()).is_err(),
                "{line}"
            );
        }
        assert!(login.set(SASL_KERBEROS_PRINCIPAL, " ").is_err());
    }

    #[test]
    fn a_named_keytab_must_exist_and_be_the_environments() {
        let dir = std::env::temp_dir().join(format!("exactly-keytab-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let keytab = dir.join("client.keytab");
        std::fs::write(&keytab, b"\x05\x02").unwrap();
        let reason = |result: Result<(), Error>| match result {
            Err(Error::Config { reason, .. }) => reason,
            other => panic!("{other:?}"),
        };
        let mut login = KerberosLogin::default();
        login.validate(None).unwrap();
        login
            .set(
                SASL_KERBEROS_KEYTAB,
                &dir.join("missing.keytab").display().to_string(),
            )
            .unwrap();
        assert!(reason(login.validate(None)).contains("does not exist"));
        login
            .set(SASL_KERBEROS_KEYTAB, &keytab.display().to_string())
            .unwrap();
        assert!(reason(login.validate(None)).contains("KRB5_CLIENT_KTNAME="));
        assert!(reason(login.validate(Some("/elsewhere.keytab"))).contains("names /elsewhere"));
        login
            .validate(Some(&format!("FILE:{}", keytab.display())))
            .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
