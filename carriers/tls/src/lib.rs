//! The remote executor endpoint's TLS (issue 47). The daemon makes its
//! endpoint's certificate once (or is given one by path); the pairing
//! credential carries the certificate's SHA-256 [`Pin`]; the agent's
//! client trusts that pin and nothing else: no CA and no name to match,
//! since the pin is the identity, while the handshake still proves the
//! peer holds the certificate's key (its signatures are checked as any
//! client checks them). A certificate a man in the middle presents has
//! another pin and is refused before a byte of the credential is sent.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{WebPkiSupportedAlgorithms, ring};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use sha2::{Digest, Sha256};

pub use tokio_rustls::{TlsAcceptor, TlsConnector};

/// The certificate's file in the directory [`Identity::load_or_create`] keeps.
pub const CERT_FILE: &str = "executor-tls.crt";
/// Its private key's file there (owner-only).
pub const KEY_FILE: &str = "executor-tls.key";

/// Why the endpoint's TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or written.
    #[error("{path}: {why}")]
    File { path: PathBuf, why: String },
    /// The files hold no certificate or key of a usable form.
    #[error("{path}: {why}")]
    Pem { path: PathBuf, why: String },
    /// The key file is readable by others.
    #[error("{path} is readable by others (mode {mode:o}): chmod 600 it")]
    Exposed { path: PathBuf, mode: u32 },
    /// Making the certificate failed.
    #[error("making the endpoint's certificate: {0}")]
    Make(String),
    /// rustls refused the certificate and key.
    #[error("the certificate and key do not make a TLS server: {0}")]
    Tls(String),
}

/// The endpoint's certificate chain and key.
pub struct Identity {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl Identity {
    /// The certificate kept in `dir` ([`CERT_FILE`], [`KEY_FILE`]), made
    /// there first if there is none: self-signed, ECDSA P-256. A key
    /// without its certificate (a start cut short between the two writes)
    /// is made again: nothing was ever pinned to it.
    pub fn load_or_create(dir: &Path) -> Result<Identity, Error> {
        let (cert, key) = (dir.join(CERT_FILE), dir.join(KEY_FILE));
        if !cert.exists() {
            match std::fs::remove_file(&key) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(file(&key, e)),
                _ => {}
            }
            let key_pair = rcgen::KeyPair::generate().map_err(|e| Error::Make(e.to_string()))?;
            let params = rcgen::CertificateParams::new(vec!["orchestrator-executor-endpoint".to_owned()])
                .map_err(|e| Error::Make(e.to_string()))?;
            let made = params.self_signed(&key_pair).map_err(|e| Error::Make(e.to_string()))?;
            // The key first: a certificate is never there without its key.
            write_new(&key, &key_pair.serialize_pem(), 0o600)?;
            write_new(&cert, &made.pem(), 0o644)?;
        }
        Identity::load(&cert, &key)
    }

    /// The certificate chain at `cert` and the key at `key` (PEM; the key
    /// owner-only).
    pub fn load(cert: &Path, key: &Path) -> Result<Identity, Error> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(key).map_err(|e| file(key, e))?.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(Error::Exposed { path: key.to_owned(), mode });
            }
        }
        let pem = |path: &Path, why: String| Error::Pem { path: path.to_owned(), why };
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
            .map_err(|e| pem(cert, e.to_string()))?
            .collect::<Result<_, _>>()
            .map_err(|e| pem(cert, e.to_string()))?;
        if chain.is_empty() {
            return Err(pem(cert, "no certificate".into()));
        }
        let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| pem(key, e.to_string()))?;
        Ok(Identity { chain, key: key_der })
    }

    /// The pin of the certificate it presents (its first).
    pub fn pin(&self) -> Pin {
        Pin::of(&self.chain[0])
    }

    /// A TLS acceptor presenting it (TLS 1.2 and 1.3, HTTP/1.1).
    pub fn acceptor(&self) -> Result<TlsAcceptor, Error> {
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Tls(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(self.chain.clone(), self.key.clone_key())
            .map_err(|e| Error::Tls(e.to_string()))?;
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

fn file(path: &Path, e: std::io::Error) -> Error {
    Error::File { path: path.to_owned(), why: e.to_string() }
}

/// Writes `text` to a file that must not exist yet, with `mode`.
fn write_new(path: &Path, text: &str, mode: u32) -> Result<(), Error> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
    #[cfg(not(unix))]
    let _ = mode;
    let mut f = options.open(path).map_err(|e| file(path, e))?;
    f.write_all(text.as_bytes()).and_then(|()| f.sync_all()).map_err(|e| file(path, e))
}

/// A certificate's SHA-256, as a credential carries it: `sha256:<64 hex>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pin([u8; 32]);

impl Pin {
    /// The pin of `cert` (DER).
    pub fn of(cert: &[u8]) -> Pin {
        Pin(Sha256::digest(cert).into())
    }

    /// `sha256:<64 lowercase hex>` read back, or `None`.
    pub fn parse(text: &str) -> Option<Pin> {
        let hex = text.strip_prefix("sha256:")?;
        if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(Pin(out))
    }
}

impl std::fmt::Display for Pin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("sha256:")?;
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

/// The pin of the first certificate in `pem`, if it holds one.
pub fn pin_of_pem(pem: &[u8]) -> Option<Pin> {
    CertificateDer::pem_slice_iter(pem).next()?.ok().map(|cert| Pin::of(&cert))
}

/// A TLS client that accepts only a server presenting the certificate
/// `pin` names (TLS 1.2 and 1.3).
pub fn connector(pin: Pin) -> TlsConnector {
    let provider = Arc::new(ring::default_provider());
    let verifier = Pinned { pin, algorithms: provider.signature_verification_algorithms };
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    TlsConnector::from(Arc::new(config))
}

/// The name a client gives for the pinned endpoint (no name is checked).
pub fn server_name() -> ServerName<'static> {
    ServerName::try_from("orchestrator-executor-endpoint").expect("a valid DNS name")
}

/// Trusts the pinned certificate only; checks handshake signatures with
/// the provider's algorithms, as the default verifier does.
#[derive(Debug)]
struct Pinned {
    pin: Pin,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match Pin::of(end_entity) == self.pin {
            true => Ok(ServerCertVerified::assertion()),
            false => Err(rustls::Error::InvalidCertificate(rustls::CertificateError::ApplicationVerificationFailure)),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn pins_read_back_as_written() {
        let pin = Pin::of(b"certificate");
        assert_eq!(Pin::parse(&pin.to_string()), Some(pin));
        for bad in ["sha256:", "sha1:00", &pin.to_string().to_uppercase(), &format!("{pin}0")] {
            assert_eq!(Pin::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_certificate_is_made_once_and_its_key_kept_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let first = Identity::load_or_create(dir.path()).unwrap().pin();
        assert_eq!(Identity::load_or_create(dir.path()).unwrap().pin(), first, "kept, not made again");
        // A start cut short after the key: made again, not refused for ever.
        std::fs::remove_file(dir.path().join(CERT_FILE)).unwrap();
        let again = Identity::load_or_create(dir.path()).unwrap().pin();
        assert_ne!(again, first);
        assert_eq!(Identity::load_or_create(dir.path()).unwrap().pin(), again);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let key = dir.path().join(KEY_FILE);
            assert_eq!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600);
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
            assert!(matches!(Identity::load_or_create(dir.path()), Err(Error::Exposed { .. })));
        }
    }

    /// One TLS exchange on loopback: the client's pin against the server's identity.
    async fn exchange(server: &Identity, pin: Pin) -> Result<Vec<u8>, std::io::Error> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let acceptor = server.acceptor().unwrap();
        tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            if let Ok(mut tls) = acceptor.accept(tcp).await {
                let _ = tls.write_all(b"hello").await;
                let _ = tls.shutdown().await;
            }
        });
        let tcp = tokio::net::TcpStream::connect(addr).await?;
        let mut tls = connector(pin).connect(server_name(), tcp).await?;
        let mut got = Vec::new();
        tls.read_to_end(&mut got).await?;
        Ok(got)
    }

    #[tokio::test]
    async fn the_pinned_certificate_is_trusted_and_any_other_refused() {
        let (ours, theirs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let endpoint = Identity::load_or_create(ours.path()).unwrap();
        let impostor = Identity::load_or_create(theirs.path()).unwrap();
        assert_eq!(exchange(&endpoint, endpoint.pin()).await.unwrap(), b"hello");
        let refused = exchange(&impostor, endpoint.pin()).await.unwrap_err();
        assert!(refused.to_string().contains("invalid peer certificate"), "{refused}");
    }
}
