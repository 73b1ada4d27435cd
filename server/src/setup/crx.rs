//! Chromium's signed package (CRX3): the extension id it names, read as
//! Chromium reads it, for the file that installs it off the store.

use anyhow::Context;

/// The id of a CRX3 package: the `crx_id` its header's signed data names
/// (protobuf `CrxFileHeader` field 10000, `SignedData` field 1), as
/// Chromium spells ids ([`id_of`]).
pub fn crx_id(crx: &[u8]) -> anyhow::Result<String> {
    anyhow::ensure!(crx.len() > 12 && &crx[..8] == b"Cr24\x03\x00\x00\x00", "not a CRX3 package");
    let header_len = u32::from_le_bytes(crx[8..12].try_into()?) as usize;
    let header = crx.get(12..12 + header_len).context("a CRX3 header longer than its package")?;
    let signed = field(header, 10_000).context("no signed data in the CRX3 header")?;
    let id = field(signed, 1).filter(|id| id.len() == 16).context("no crx_id in the signed data")?;
    Ok(id_of(id))
}

/// The first length-delimited field `number` of a protobuf message.
fn field(mut message: &[u8], number: u64) -> Option<&[u8]> {
    fn varint(bytes: &mut &[u8]) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = bytes.split_first()?;
            *bytes = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }
    while !message.is_empty() {
        let tag = varint(&mut message)?;
        match tag & 7 {
            0 => {
                varint(&mut message)?;
            }
            2 => {
                let len = usize::try_from(varint(&mut message)?).ok()?;
                let (value, rest) = (message.get(..len)?, message.get(len..)?);
                if tag >> 3 == number {
                    return Some(value);
                }
                message = rest;
            }
            _ => return None,
        }
    }
    None
}

/// Chromium's extension id for the first 16 bytes of a key's SHA-256:
/// their nibbles as `a`–`p`.
pub fn id_of(crx_id: &[u8]) -> String {
    crx_id.iter().flat_map(|b| [b >> 4, b & 15]).map(|n| (b'a' + n) as char).collect()
}
