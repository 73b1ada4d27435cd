//! Capabilities and attach identities.
//!
//! Both are derived from one daemon secret by HMAC-SHA256 over the worker id,
//! so nothing secret is stored in the event log or the idempotency table, and a
//! replayed `run_create` or `worker_attach` returns the same credential.
//!
//! - A *capability* (`cap_<worker>_<mac>`) lets its holder act as exactly that
//!   worker; root's capability is the root worker's.
//! - An *attach identity* (`att_<worker>_<mac>`) is the only thing a bootstrap
//!   prompt carries; exchanging it at `worker_attach` yields the capability.

use hmac::{Hmac, Mac};
use protocol::WorkerId;
use sha2::Sha256;

/// Length of the daemon secret, in bytes (256 bits).
pub const SECRET_LEN: usize = 32;

/// Derives and verifies credentials with the daemon secret.
#[derive(Clone)]
pub struct Keyring {
    secret: [u8; SECRET_LEN],
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Keyring(..)")
    }
}

/// The two credential families, kept apart by HMAC domain and text prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Capability,
    Attach,
}

impl Family {
    fn prefix(self) -> &'static str {
        match self {
            Family::Capability => "cap",
            Family::Attach => "att",
        }
    }

    /// Capabilities carry the full 256-bit MAC; attach identities 128 bits,
    /// enough to be unguessable while keeping the bootstrap prompt short.
    fn mac_len(self) -> usize {
        match self {
            Family::Capability => 32,
            Family::Attach => 16,
        }
    }
}

impl Keyring {
    /// A keyring over `secret`.
    pub fn new(secret: [u8; SECRET_LEN]) -> Self {
        Self { secret }
    }

    /// A keyring with a fresh random secret.
    pub fn generate() -> Self {
        let mut secret = [0u8; SECRET_LEN];
        getrandom::fill(&mut secret).expect("the OS random source is available");
        Self { secret }
    }

    /// The secret, for persisting it with owner-only permissions.
    pub fn secret(&self) -> &[u8; SECRET_LEN] {
        &self.secret
    }

    /// The MAC of `worker` at continuation `epoch`. Epoch 0 signs the worker
    /// id alone, as every credential did before rollover existed.
    fn mac(&self, family: Family, worker: &WorkerId, epoch: u32) -> Vec<u8> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.secret).expect("any key length works");
        mac.update(family.prefix().as_bytes());
        mac.update(b"|");
        mac.update(worker.as_str().as_bytes());
        if epoch > 0 {
            mac.update(format!("|{epoch}").as_bytes());
        }
        let mut out = mac.finalize().into_bytes().to_vec();
        out.truncate(family.mac_len());
        out
    }

    /// `<prefix>_<worker hex>_<mac>`, or `<prefix>_<worker hex>-<epoch>_<mac>`
    /// past epoch 0.
    fn issue(&self, family: Family, worker: &WorkerId, epoch: u32) -> String {
        let hex_id = &worker.as_str()[WorkerId::PREFIX.len() + 1..];
        let epoch_part = if epoch > 0 { format!("-{epoch}") } else { String::new() };
        format!("{}_{hex_id}{epoch_part}_{}", family.prefix(), to_hex(&self.mac(family, worker, epoch)))
    }

    /// Parses and verifies a credential; returns the worker it is for and
    /// its epoch. Only the canonical text counts (lowercase hex, no sign, no
    /// padding, no epoch 0 spelled out): it is compared whole against the
    /// credential this keyring issues.
    fn verify(&self, family: Family, text: &str) -> Option<(WorkerId, u32)> {
        let rest = text.strip_prefix(family.prefix())?.strip_prefix('_')?;
        let (id_part, _) = rest.split_once('_')?;
        let (hex_id, epoch) = match id_part.split_once('-') {
            Some((hex_id, epoch)) => (hex_id, epoch.parse::<u32>().ok()?),
            None => (id_part, 0),
        };
        let worker: WorkerId = format!("{}_{hex_id}", WorkerId::PREFIX).parse().ok()?;
        let expected = self.issue(family, &worker, epoch);
        // Constant-time comparison: the length is public, the bytes are not.
        let same = text.len() == expected.len()
            && text.bytes().zip(expected.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0;
        same.then_some((worker, epoch))
    }

    /// The capability that lets its holder act as `worker` in its first
    /// conversation (epoch 0).
    pub fn capability(&self, worker: &WorkerId) -> String {
        self.capability_at(worker, 0)
    }

    /// The capability of `worker`'s conversation at continuation `epoch`:
    /// each rollover issues a new one, and the retired ones are refused.
    pub fn capability_at(&self, worker: &WorkerId, epoch: u32) -> String {
        self.issue(Family::Capability, worker, epoch)
    }

    /// The worker a capability belongs to, and its epoch, if it is genuine.
    pub fn verify_capability(&self, text: &str) -> Option<(WorkerId, u32)> {
        self.verify(Family::Capability, text)
    }

    /// The attach identity put in `worker`'s first bootstrap prompt.
    pub fn attach_identity(&self, worker: &WorkerId) -> String {
        self.attach_identity_at(worker, 0)
    }

    /// The attach identity of `worker`'s conversation at `epoch`.
    pub fn attach_identity_at(&self, worker: &WorkerId, epoch: u32) -> String {
        self.issue(Family::Attach, worker, epoch)
    }

    /// The worker an attach identity belongs to, and its epoch, if it is genuine.
    pub fn verify_attach_identity(&self, text: &str) -> Option<(WorkerId, u32)> {
        self.verify(Family::Attach, text)
    }
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_verify_only_for_their_worker_family_and_secret() {
        let keys = Keyring::new([7; SECRET_LEN]);
        let a = WorkerId::from_uuid_bytes([1; 16]);
        let b = WorkerId::from_uuid_bytes([2; 16]);
        let cap = keys.capability(&a);
        let att = keys.attach_identity(&a);
        assert_eq!(keys.verify_capability(&cap), Some((a.clone(), 0)));
        assert_eq!(keys.verify_attach_identity(&att), Some((a.clone(), 0)));
        // The families do not mix.
        assert_eq!(keys.verify_capability(&att), None);
        assert_eq!(keys.verify_attach_identity(&cap), None);
        // Swapping the worker id breaks the MAC.
        let forged = cap.replace(&a.as_str()[4..], &b.as_str()[4..]);
        assert_eq!(keys.verify_capability(&forged), None);
        // Another daemon's secret does not verify.
        assert_eq!(Keyring::new([8; SECRET_LEN]).verify_capability(&cap), None);
        // Derivation is stable.
        assert_eq!(keys.capability(&a), cap);
        for junk in ["", "cap_", "cap_zz_zz", "cap_0101_0", &cap[..cap.len() - 1]] {
            assert_eq!(keys.verify_capability(junk), None, "{junk}");
        }
    }

    #[test]
    fn only_the_canonical_text_of_a_credential_verifies() {
        let keys = Keyring::new([7; SECRET_LEN]);
        let a = WorkerId::from_uuid_bytes([0xab; 16]);
        let cap = keys.capability(&a);
        let (prefix, mac) = cap.rsplit_once('_').unwrap();
        let upper_mac = format!("{prefix}_{}", mac.to_uppercase());
        let plus = format!("{prefix}_+{}", &mac[1..]);
        let upper_id = cap.replacen(&a.as_str()[4..], &a.as_str()[4..].to_uppercase(), 1);
        for variant in [upper_mac, plus, upper_id, format!("{cap} "), format!(" {cap}")] {
            assert_eq!(keys.verify_capability(&variant), None, "{variant}");
        }
        assert_eq!(keys.verify_capability(&cap), Some((a, 0)));
    }

    #[test]
    fn each_epoch_has_credentials_of_its_own() {
        let keys = Keyring::new([7; SECRET_LEN]);
        let a = WorkerId::from_uuid_bytes([0xab; 16]);
        let (cap0, cap3) = (keys.capability(&a), keys.capability_at(&a, 3));
        assert_ne!(cap0, cap3);
        assert!(cap3.contains("-3_"), "{cap3}");
        assert_eq!(keys.verify_capability(&cap3), Some((a.clone(), 3)));
        assert_eq!(keys.verify_attach_identity(&keys.attach_identity_at(&a, 3)), Some((a.clone(), 3)));
        // Another epoch's number on this MAC, or epoch 0 spelled out, is forged.
        assert_eq!(keys.verify_capability(&cap3.replace("-3_", "-4_")), None);
        let (id_part, mac0) = cap0.rsplit_once('_').unwrap();
        assert_eq!(keys.verify_capability(&format!("{id_part}-0_{mac0}")), None);
        assert_eq!(keys.verify_capability(&format!("{id_part}-01_{mac0}")), None);
    }
}
