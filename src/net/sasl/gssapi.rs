//! SASL/GSSAPI (RFC 4752): Kerberos V5 through the system's GSSAPI library (MIT krb5), as
//! Java's `GssKrb5Client` and librdkafka (through Cyrus SASL) speak it to Kafka's brokers.
//!
//! The exchange, each message in one SaslAuthenticate request (KIP-152):
//! 1. the client's first context token (a Kerberos AP-REQ for `<service>@<broker host>`);
//! 2. the broker's answer (the AP-REP: mutual authentication is asked for, so the client
//!    knows it talks to the principal it named), after which the client's context is
//!    established; it sends an empty message, as RFC 4752 §3.1 says when the last call made
//!    no token;
//! 3. the broker's wrapped security-layer offer (one octet of layers, three of maximum
//!    message size); the client answers, wrapped, that it takes no security layer (the
//!    connection's protection is TLS's, if any, as with every Kafka client) and no
//!    authorization identity;
//! 4. the broker's empty answer ends it.
//!
//! Getting credentials and the first token may talk to the KDC (blocking network I/O in the
//! library), so [`GssapiClient::start`] is run on a blocking thread; later steps only compute.

use libgssapi::context::{ClientCtx, CtxFlags, SecurityContext};
use libgssapi::credential::{Cred, CredUsage};
use libgssapi::name::Name;
use libgssapi::oid::{GSS_MECH_KRB5, GSS_NT_HOSTBASED_SERVICE, GSS_NT_KRB5_PRINCIPAL, OidSet};

use super::SaslClient;

/// RFC 4752 §3.3: the bit of the security-layer octet meaning "no security layer".
const NO_SECURITY_LAYER: u8 = 0x01;

/// Where the exchange is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Context tokens are exchanged.
    Context,
    /// The context is established; the broker's security-layer offer comes next.
    SecurityLayer,
    /// The client's last message is sent.
    Done,
}

/// One GSSAPI exchange with one broker.
pub(crate) struct GssapiClient {
    context: ClientCtx,
    first_token: Option<Vec<u8>>,
    stage: Stage,
}

impl GssapiClient {
    /// Gets the client's credentials (as `principal`, or the default one) and makes the first
    /// context token for `service@host`. Blocking: may ask the KDC for tickets.
    pub(crate) fn start(
        service: &str,
        host: &str,
        principal: Option<&str>,
    ) -> Result<Self, String> {
        let mechanisms = OidSet::singleton(GSS_MECH_KRB5).map_err(|e| format!("GSSAPI: {e}"))?;
        let client = principal
            .map(|principal| {
                Name::new(principal.as_bytes(), Some(GSS_NT_KRB5_PRINCIPAL))
                    .map_err(|e| format!("the principal {principal:?} is not a Kerberos name: {e}"))
            })
            .transpose()?;
        let credentials = Cred::acquire(
            client.as_ref(),
            None,
            CredUsage::Initiate,
            Some(&mechanisms),
        )
        .map_err(|e| {
            let whose = principal.map_or("the default principal".to_owned(), |p| p.to_owned());
            format!(
                "no Kerberos credentials for {whose} (a ticket cache from kinit, KRB5CCNAME, \
                     or a client keytab, KRB5_CLIENT_KTNAME): {e}"
            )
        })?;
        let target = format!("{service}@{host}");
        let target_name = Name::new(target.as_bytes(), Some(GSS_NT_HOSTBASED_SERVICE))
            .map_err(|e| format!("the service name {target:?} is not usable: {e}"))?;
        let mut context = ClientCtx::new(
            Some(credentials),
            target_name,
            CtxFlags::GSS_C_MUTUAL_FLAG | CtxFlags::GSS_C_INTEG_FLAG,
            Some(GSS_MECH_KRB5),
        );
        let first_token = context
            .step(None, None)
            .map_err(|e| format!("no ticket for the broker's principal {target}: {e}"))?
            .map(|token| token.to_vec())
            .ok_or("GSSAPI made no first token")?;
        Ok(GssapiClient {
            context,
            first_token: Some(first_token),
            stage: Stage::Context,
        })
    }

    /// The broker's wrapped offer (RFC 4752 §3.1): the answer taking no security layer.
    fn answer_security_layer(&mut self, offer: &[u8]) -> Result<Vec<u8>, String> {
        let offer = self
            .context
            .unwrap(offer)
            .map_err(|e| format!("the broker's security-layer offer does not unwrap: {e}"))?;
        // RFC 4752 §3.1: the layers offered (one octet), then the maximum message size (three).
        let [layers, _, _, _] = offer[..] else {
            return Err(format!(
                "the broker's security-layer offer is {} bytes, not 4",
                offer.len()
            ));
        };
        if layers & NO_SECURITY_LAYER == 0 {
            return Err(format!(
                "the broker requires a GSSAPI security layer (offer {layers:#04x}); only \
                 \"none\" is supported, with TLS for confidentiality"
            ));
        }
        // The layer taken, then a maximum message size of 0 (no layer), and no authorization
        // identity: the broker's principal is the authenticated one.
        let answer = [NO_SECURITY_LAYER, 0, 0, 0];
        let wrapped = self
            .context
            .wrap(false, &answer)
            .map_err(|e| format!("wrapping the security-layer answer failed: {e}"))?;
        Ok(wrapped.to_vec())
    }
}

impl SaslClient for GssapiClient {
    fn initial(&mut self) -> Result<Vec<u8>, String> {
        self.first_token
            .take()
            .ok_or_else(|| "the first GSSAPI token was already sent".into())
    }

    fn step(&mut self, challenge: &[u8]) -> Result<Option<Vec<u8>>, String> {
        match self.stage {
            Stage::Context => {
                let token = self
                    .context
                    .step(Some(challenge), None)
                    .map_err(|e| format!("the broker's GSSAPI token was refused: {e}"))?;
                if self.context.is_complete() {
                    self.stage = Stage::SecurityLayer;
                }
                // An established context with nothing left to say sends an empty message.
                Ok(Some(token.map(|token| token.to_vec()).unwrap_or_default()))
            }
            Stage::SecurityLayer => {
                let answer = self.answer_security_layer(challenge)?;
                self.stage = Stage::Done;
                Ok(Some(answer))
            }
            Stage::Done => Ok(None),
        }
    }
}
