//! TLS for the fake `chatgpt.com`: a throwaway CA generated at start, and a
//! leaf for `chatgpt.com`, `localhost` and `127.0.0.1` signed by it. The CA
//! is written to the cert dir so tests can make a browser profile trust it
//! (or pass `--ignore-certificate-errors` for Chromium).

use std::path::Path;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose, SanType};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A generated CA and server certificate.
pub struct Certs {
    /// The CA certificate, PEM.
    pub ca_pem: String,
    /// The rustls server configuration.
    pub server: Arc<rustls::ServerConfig>,
}

/// Generates the CA and leaf; writes `ca.pem` (and the leaf's `cert.pem`) into
/// `cert_dir` when given.
pub fn generate(cert_dir: Option<&Path>) -> anyhow::Result<Certs> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, "fakechat test CA (not trusted anywhere else)");
    ca_params.key_usages =
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;

    let mut leaf_params = CertificateParams::new(vec!["chatgpt.com".to_owned(), "localhost".to_owned()])?;
    leaf_params.subject_alt_names.push(SanType::IpAddress("127.0.0.1".parse()?));
    leaf_params.distinguished_name.push(DnType::CommonName, "chatgpt.com");
    let leaf_key = KeyPair::generate()?;
    let leaf = leaf_params.signed_by(&leaf_key, &ca)?;

    let ca_pem = ca.as_ref().pem();
    if let Some(dir) = cert_dir {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("ca.pem"), &ca_pem)?;
        std::fs::write(dir.join("cert.pem"), leaf.pem())?;
    }
    let chain = vec![CertificateDer::from(leaf.der().to_vec()), CertificateDer::from(ca.as_ref().der().to_vec())];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let mut server = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    // HTTP/2 first: a browser then multiplexes every tab's requests over
    // one connection. Over HTTP/1.1 a browser keeps six connections per
    // host, and past six chat tabs (each holding fakechat's long-poll) a
    // page's own send waited behind the others' polls. (That the live site
    // speaks HTTP/2 is not in this repository's captured evidence; no
    // adapter decision rests on the protocol.)
    server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Certs { ca_pem, server: Arc::new(server) })
}
