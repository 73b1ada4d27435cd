//! `cargo xtask release`: the versioned bundle under
//! `dist/release/<version>/` (issue 46): the daemon for the host it runs
//! on, the extension for Firefox (`.xpi`, its stable add-on id), for a
//! Chromium store (`.zip`) and for an install off the store (`.crx`), the
//! SBOM (CycloneDX, see [`sbom`]), the release notes, and `SHA256SUMS`
//! over them. Every `cargo xtask dist`
//! packs the extension the same way into `dist/packed/` (its CRX signed
//! with a throwaway key), so the browser tests install what a person would,
//! never a stale copy. The extension archives are reproducible (one commit
//! packs the same bytes); the daemon's binary is not claimed to be.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use serde_json::Value;

use crate::{root, run, target_dir};

/// The workspace's one version, in every artifact's name and manifest.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Where the bundle of this version goes.
pub fn bundle_dir() -> PathBuf {
    root().join("dist/release").join(VERSION)
}

/// Where every `dist` packs the extension as a bundle would.
pub fn packed_dir() -> PathBuf {
    root().join("dist/packed")
}

/// The Firefox add-on's file name in the bundle.
pub fn xpi_name() -> String {
    format!("orchestrator-executor-{VERSION}.xpi")
}

/// The Chromium extension's file name in the bundle (a store upload).
pub fn chromium_zip_name() -> String {
    format!("orchestrator-executor-{VERSION}-chromium.zip")
}

/// The Chromium extension's signed package's file name in the bundle.
pub fn crx_name() -> String {
    format!("orchestrator-executor-{VERSION}-chromium.crx")
}

/// Packs `dist/firefox` and `dist/chromium` (under `dist`) into `out`.
/// The store's archive leaves out the manifest's `key`: a store assigns
/// the id and refuses an upload that sets one. With `crx_key` (an RSA
/// private key, PEM), the Chromium extension is also packed as a CRX3
/// signed with it, for an install off the store; its id is that key's, and
/// its manifest's `key` says so.
pub fn extensions(dist: &Path, out: &Path, crx_key: Option<&Path>) -> anyhow::Result<()> {
    use sha2::{Digest, Sha256};
    std::fs::create_dir_all(out)?;
    crate::archive::zip(entries(&dist.join("firefox"), |_| Ok(()))?, &out.join(xpi_name()))?;
    let unkeyed = |manifest: &mut Value| {
        manifest.as_object_mut().context("a manifest is an object")?.remove("key").context("no key to leave out")?;
        Ok(())
    };
    crate::archive::zip(entries(&dist.join("chromium"), unkeyed)?, &out.join(chromium_zip_name()))?;
    if let Some(key) = crx_key {
        let public = openssl(&["pkey", "-pubout", "-outform", "DER", "-in"], key, None)?;
        // A CRX3's proof here is `sha256_with_rsa`: another kind of key
        // would make a package Chromium refuses at install.
        const RSA_ENCRYPTION: &[u8] = &[0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
        anyhow::ensure!(
            public.windows(RSA_ENCRYPTION.len()).any(|w| w == RSA_ENCRYPTION),
            "{} is not an RSA key: a CRX3 is signed sha256_with_rsa",
            key.display()
        );
        let keyed = |manifest: &mut Value| {
            manifest["key"] = Value::String(base64(&public));
            Ok(())
        };
        let archive = out.join(format!(".{}.zip", crx_name()));
        crate::archive::zip(entries(&dist.join("chromium"), keyed)?, &archive)?;
        let zip = std::fs::read(&archive)?;
        std::fs::remove_file(&archive)?;
        std::fs::write(out.join(crx_name()), crx3(&zip, &public, key)?)?;
        // Chromium's off-store route names the file after the id, the key's.
        let id: String =
            Sha256::digest(&public)[..16].iter().flat_map(|b| [b >> 4, b & 15]).map(|n| (b'a' + n) as char).collect();
        println!("xtask: {} (extension id {id})", out.join(crx_name()).display());
    }
    Ok(())
}

/// A CRX3 package of `zip`, signed with `key` (whose public half, DER, is
/// `public`): `Cr24`, version 3, the header's length and the header
/// (protobuf `CrxFileHeader`: one `sha256_with_rsa` proof and the signed
/// data naming the id), then the archive. The signature covers `CRX3
/// SignedData\0`, the signed data's length and the signed data, then the
/// archive (Chromium's `components/crx_file`). PKCS#1 v1.5 signatures
/// are deterministic: the same inputs give the same package.
fn crx3(zip: &[u8], public: &[u8], key: &Path) -> anyhow::Result<Vec<u8>> {
    use sha2::{Digest, Sha256};
    let crx_id = &Sha256::digest(public)[..16];
    let signed_data = field(1, crx_id);
    let mut message = b"CRX3 SignedData\x00".to_vec();
    message.extend((signed_data.len() as u32).to_le_bytes());
    message.extend(&signed_data);
    message.extend(zip);
    let signature = openssl(&["dgst", "-sha256", "-sign"], key, Some(&message))?;
    let proof = [field(1, public), field(2, &signature)].concat();
    let header = [field(2, &proof), field(10_000, &signed_data)].concat();
    let mut crx = b"Cr24".to_vec();
    crx.extend(3u32.to_le_bytes());
    crx.extend((header.len() as u32).to_le_bytes());
    crx.extend(header);
    crx.extend(zip);
    Ok(crx)
}

/// A protobuf length-delimited field.
fn field(number: u32, bytes: &[u8]) -> Vec<u8> {
    let mut out = varint(u64::from(number) << 3 | 2);
    out.extend(varint(bytes.len() as u64));
    out.extend(bytes);
    out
}

fn varint(mut n: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            out.push(if i <= chunk.len() { ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char } else { '=' });
        }
    }
    out
}

/// `openssl <args> <key>`, `input` on its stdin; its stdout. The signing
/// and key handling are OpenSSL's, on every OS the release is made on.
fn openssl(args: &[&str], key: &Path, input: Option<&[u8]>) -> anyhow::Result<Vec<u8>> {
    use std::process::Stdio;
    let mut child = Command::new("openssl")
        .args(args)
        .arg(key)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("openssl (it signs the Chromium package)")?;
    let mut stdin = child.stdin.take().expect("piped");
    stdin.write_all(input.unwrap_or_default())?;
    drop(stdin);
    let out = child.wait_with_output()?;
    anyhow::ensure!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    Ok(out.stdout)
}

/// The key a development build's CRX is signed with when no project key
/// is given: made once under the target directory, never a release's.
pub fn throwaway_key() -> anyhow::Result<PathBuf> {
    let key = target_dir().join("chromium-throwaway-key.pem");
    if !key.exists() {
        std::fs::create_dir_all(target_dir())?;
        let made = Command::new("openssl")
            .args(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out"])
            .arg(&key)
            .output()
            .context("openssl (it signs the Chromium package)")?;
        anyhow::ensure!(made.status.success(), "openssl genpkey: {}", String::from_utf8_lossy(&made.stderr));
    }
    Ok(key)
}

/// Every file of the extension in `dir`, its `manifest.json` passed through `edit`.
fn entries(dir: &Path, edit: impl Fn(&mut Value) -> anyhow::Result<()>) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    for name in crate::archive::files(dir)? {
        let mut bytes = std::fs::read(dir.join(&name))?;
        if name == "manifest.json" {
            let mut manifest: Value = serde_json::from_slice(&bytes)?;
            edit(&mut manifest)?;
            bytes = serde_json::to_vec_pretty(&manifest)?;
        }
        out.push((name, bytes));
    }
    Ok(out)
}

/// `cargo xtask release --chromium-key PATH`, from a clean checkout: the
/// extension (`dist`, its CRX signed with the project's key at PATH, kept
/// out of the repository), the daemon built in the release profile and
/// packed with the README as `orchestrator-<version>-<target>.tar.gz`, the
/// SBOM, the notes, and `SHA256SUMS`.
pub fn release(crx_key: &Path) -> anyhow::Result<()> {
    // A release names its source: never a tree with uncommitted changes.
    let dirty =
        Command::new("git").args(["status", "--porcelain", "--untracked-files=no"]).current_dir(root()).output()?;
    anyhow::ensure!(dirty.status.success(), "git status failed: a release is made from a git checkout");
    anyhow::ensure!(dirty.stdout.is_empty(), "the tree has uncommitted changes: commit them, then release");
    crate::dist::dist()?;
    // Written whole in a fresh folder, then put in place: no file of an
    // earlier bundle is ever listed in this one's sums.
    let out = root().join("dist/release").join(format!(".{VERSION}.partial"));
    let _ = std::fs::remove_dir_all(&out);
    extensions(&root().join("dist"), &out, Some(crx_key))?;
    run(Command::new("cargo").args(["build", "--release", "-p", "server", "--bin", "orchestrator"]))?;
    let binary = target_dir().join("release/orchestrator");
    let name = format!("orchestrator-{VERSION}-{}", host_target()?);
    let files = [("orchestrator", binary, 0o755), ("README.md", root().join("README.md"), 0o644)];
    daemon_tarball(&name, &files, &out.join(format!("{name}.tar.gz")))?;
    sbom(&out)?;
    let changelog = std::fs::read_to_string(root().join("CHANGELOG.md"))?;
    std::fs::write(out.join("RELEASE-NOTES.md"), notes(&changelog, VERSION)?)?;
    sums(&out)?;
    let _ = std::fs::remove_dir_all(bundle_dir());
    std::fs::rename(&out, bundle_dir())?;
    println!("xtask: {}", bundle_dir().display());
    Ok(())
}

/// The crates' SBOM tool, pinned: CycloneDX's own cargo plugin.
pub const CARGO_CYCLONEDX: &str = "0.5.9";

/// The bundle's software bill of materials, CycloneDX JSON from CycloneDX's
/// own generators (never written here): the daemon's crates for this host
/// (`orchestrator.cdx.json`), the extension's crates for wasm32
/// (`extension.cdx.json`), and the npm packages of the extension's build
/// from its lock file (`extension-build-npm.cdx.json`: binaryen makes the
/// WebAssembly-free build, web-ext lints; no npm code ships inside the
/// extension). A bill that misses what the bundle is built on is refused.
fn sbom(out: &Path) -> anyhow::Result<()> {
    const NAME: &str = "cyclonedx-sbom";
    let host = host_target()?;
    let crates = [
        ("server", host.as_str(), "orchestrator.cdx.json"),
        ("extension", "wasm32-unknown-unknown", "extension.cdx.json"),
    ];
    for (package, target, file) in crates {
        let manifest = format!("{package}/Cargo.toml");
        let args = ["cyclonedx", "--manifest-path", &manifest, "--format", "json", "--target", target];
        let made = run(Command::new("cargo").args(args).args(["--override-filename", NAME]));
        // The plugin writes one file beside every workspace member's
        // manifest: the one asked for is kept, none is left in the tree.
        let kept = std::fs::rename(root().join(package).join(format!("{NAME}.json")), out.join(file));
        remove_everywhere(&root(), &format!("{NAME}.json"))?;
        made?;
        kept.with_context(|| format!("cargo cyclonedx wrote no SBOM for {package}"))?;
    }
    let npm = root().join("extension/node_modules/.bin/cyclonedx-npm");
    run(Command::new(npm)
        .args(["--package-lock-only", "--flatten-components", "--output-reproducible", "--output-format", "JSON"])
        .arg("--output-file")
        .arg(out.join("extension-build-npm.cdx.json"))
        .arg("extension/package.json"))?;
    let named = |file: &str| -> anyhow::Result<Vec<String>> {
        let bom: Value = serde_json::from_slice(&std::fs::read(out.join(file))?)?;
        let components = bom["components"].as_array().with_context(|| format!("{file} lists no components"))?;
        Ok(components.iter().filter_map(|c| c["name"].as_str().map(str::to_owned)).collect())
    };
    for (file, musts) in [
        ("orchestrator.cdx.json", &["rmcp", "chromiumoxide", "rusqlite"][..]),
        ("extension.cdx.json", &["wasm-bindgen", "web-sys"][..]),
        ("extension-build-npm.cdx.json", &["binaryen", "web-ext"][..]),
    ] {
        let names = named(file)?;
        for must in musts {
            anyhow::ensure!(names.iter().any(|n| n == must), "{file} does not list {must}: not a release's bill");
        }
        println!("xtask: {file}: {} components", names.len());
    }
    Ok(())
}

/// Removes every file called `name` in `dir` and its folders (two levels:
/// the workspace's members), never following a link.
fn remove_everywhere(dir: &Path, name: &str) -> anyhow::Result<()> {
    let _ = std::fs::remove_file(dir.join(name));
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() && entry.file_name() != "target" && entry.file_name() != "node_modules" {
            let _ = std::fs::remove_file(entry.path().join(name));
            for inner in std::fs::read_dir(entry.path())?.flatten() {
                if inner.file_type().is_ok_and(|t| t.is_dir()) {
                    let _ = std::fs::remove_file(inner.path().join(name));
                }
            }
        }
    }
    Ok(())
}

/// The release notes of `version`: its section of a Keep a Changelog
/// file, from its heading to the next version's; refused when it has none
/// or says nothing (a release is never shipped without its notes).
pub fn notes(changelog: &str, version: &str) -> anyhow::Result<String> {
    let heading = format!("## [{version}]");
    let start = changelog.find(&heading).with_context(|| format!("CHANGELOG.md has no {heading} section"))?;
    let rest = &changelog[start..];
    let end = rest[heading.len()..].find("\n## [").map_or(rest.len(), |i| i + heading.len() + 1);
    let section = rest[..end].trim_end();
    anyhow::ensure!(section.lines().skip(1).any(|l| l.starts_with("- ")), "CHANGELOG.md's {heading} lists nothing");
    Ok(format!("# Orchestrator {version}\n\n{}\n", section.lines().skip(1).collect::<Vec<_>>().join("\n").trim()))
}

/// The target triple this machine builds for (`rustc -vV`'s `host:`).
fn host_target() -> anyhow::Result<String> {
    let out = Command::new("rustc").arg("-vV").output().context("rustc -vV")?;
    let text = String::from_utf8(out.stdout)?;
    let host = text.lines().find_map(|l| l.strip_prefix("host: ")).context("rustc -vV names no host")?;
    Ok(host.to_owned())
}

/// A gzipped tar of `files` (name in the archive, source, mode) under the
/// folder `top`: owner 0, time 0, so a rebuild of the same bytes packs the same.
fn daemon_tarball(top: &str, files: &[(&str, PathBuf, u32)], path: &Path) -> anyhow::Result<()> {
    let gz = flate2::write::GzEncoder::new(std::fs::File::create(path)?, flate2::Compression::best());
    let mut tar = tar::Builder::new(gz);
    for (name, source, mode) in files {
        let bytes = std::fs::read(source).with_context(|| source.display().to_string())?;
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(*mode);
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        header.set_cksum();
        tar.append_data(&mut header, format!("{top}/{name}"), bytes.as_slice())?;
    }
    tar.into_inner()?.finish()?.flush()?;
    Ok(())
}

/// Writes `SHA256SUMS` over every other file in `dir`, in `sha256sum -c` form.
pub fn sums(dir: &Path) -> anyhow::Result<()> {
    use sha2::{Digest, Sha256};
    let mut lines = String::new();
    for name in crate::archive::files(dir)?.into_iter().filter(|n| n != "SHA256SUMS") {
        let digest = Sha256::digest(std::fs::read(dir.join(&name))?);
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        lines.push_str(&format!("{hex}  {name}\n"));
    }
    std::fs::write(dir.join("SHA256SUMS"), lines)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A made-up extension of both kinds under `dist`.
    fn made_up(dist: &Path) {
        for (kind, manifest) in [
            ("firefox", r#"{"manifest_version": 3, "version": "0.1.0"}"#),
            ("chromium", r#"{"manifest_version": 3, "key": "MIIB", "version": "0.1.0"}"#),
        ] {
            std::fs::create_dir_all(dist.join(kind).join("pkg")).unwrap();
            std::fs::write(dist.join(kind).join("manifest.json"), manifest).unwrap();
            std::fs::write(dist.join(kind).join("pkg/x_bg.wasm"), [0, 97, 115, 109]).unwrap();
            std::fs::write(dist.join(kind).join("bg.js"), "import './pkg/x.js';").unwrap();
        }
    }

    #[test]
    fn the_extension_archives_are_reproducible_and_the_store_one_sets_no_key() {
        let dir = tempfile::tempdir().unwrap();
        made_up(&dir.path().join("dist"));
        extensions(&dir.path().join("dist"), &dir.path().join("a"), None).unwrap();
        // Later files, the same content: the same bytes.
        std::thread::sleep(std::time::Duration::from_millis(1100));
        made_up(&dir.path().join("dist"));
        extensions(&dir.path().join("dist"), &dir.path().join("b"), None).unwrap();
        for name in [xpi_name(), chromium_zip_name()] {
            let a = std::fs::read(dir.path().join("a").join(&name)).unwrap();
            assert_eq!(a, std::fs::read(dir.path().join("b").join(&name)).unwrap(), "{name} is reproducible");
            let mut archive = zip::ZipArchive::new(std::io::Cursor::new(a)).unwrap();
            let names: Vec<String> = archive.file_names().map(|n| n.unwrap().into_owned()).collect();
            assert_eq!(names, ["bg.js", "manifest.json", "pkg/x_bg.wasm"], "{name}: sorted, at the root");
            let manifest: Value = serde_json::from_reader(archive.by_name("manifest.json").unwrap()).unwrap();
            assert!(manifest.get("key").is_none(), "{name}: {manifest}");
        }
        let sum_dir = dir.path().join("a");
        sums(&sum_dir).unwrap();
        let listed = std::fs::read_to_string(sum_dir.join("SHA256SUMS")).unwrap();
        assert_eq!(listed.lines().count(), 2, "{listed}");
        let out = Command::new("sha256sum").arg("-c").arg("SHA256SUMS").current_dir(&sum_dir).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    }

    #[test]
    fn a_crx3_is_reproducible_and_its_signature_verifies_with_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("key.pem");
        let made = Command::new("openssl")
            .args(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out"])
            .arg(&key)
            .output()
            .unwrap();
        assert!(made.status.success());
        let public = openssl(&["pkey", "-pubout", "-outform", "DER", "-in"], &key, None).unwrap();
        let zip = b"PK\x03\x04 an archive".to_vec();
        let crx = crx3(&zip, &public, &key).unwrap();
        assert_eq!(crx, crx3(&zip, &public, &key).unwrap(), "deterministic");
        assert_eq!(&crx[..8], b"Cr24\x03\x00\x00\x00");
        let header_len = u32::from_le_bytes(crx[8..12].try_into().unwrap()) as usize;
        assert_eq!(&crx[12 + header_len..], zip.as_slice(), "the archive follows the header");
        // The header's proof: field 2 { 1: public key, 2: signature }, then field 10000 { 1: id }.
        let header = &crx[12..12 + header_len];
        let proof_len = header.len() - field(10_000, &field(1, &[0; 16])).len();
        let proof = &header[..proof_len];
        let signed_data = field(1, &{
            use sha2::{Digest, Sha256};
            Sha256::digest(&public)[..16].to_vec()
        });
        assert_eq!(&header[proof_len..], field(10_000, &signed_data).as_slice());
        let signature = &proof[proof.len() - 256..];
        assert_eq!(proof, field(2, &[field(1, &public), field(2, signature)].concat()).as_slice());
        let mut message = b"CRX3 SignedData\x00".to_vec();
        message.extend((signed_data.len() as u32).to_le_bytes());
        message.extend(&signed_data);
        message.extend(&zip);
        std::fs::write(dir.path().join("message"), &message).unwrap();
        std::fs::write(dir.path().join("signature"), signature).unwrap();
        std::fs::write(dir.path().join("public.der"), &public).unwrap();
        let verified = Command::new("openssl")
            .args(["dgst", "-sha256", "-keyform", "DER", "-verify", "public.der", "-signature", "signature", "message"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(verified.status.success(), "{}", String::from_utf8_lossy(&verified.stderr));
    }

    #[test]
    fn base64_and_varints_as_their_specs_give_them() {
        assert_eq!(
            [base64(b""), base64(b"f"), base64(b"fo"), base64(b"foo"), base64(b"foob")],
            ["", "Zg==", "Zm8=", "Zm9v", "Zm9vYg=="]
        );
        assert_eq!(varint(1), [1]);
        assert_eq!(varint(300), [0xac, 0x02]);
        assert_eq!(field(10_000, b"x")[..3], [0x82, 0xf1, 0x04]);
    }

    #[test]
    fn the_notes_are_this_versions_section_of_the_changelog() {
        let changelog = std::fs::read_to_string(root().join("CHANGELOG.md")).unwrap();
        let notes = notes(&changelog, VERSION).unwrap();
        assert!(notes.starts_with(&format!("# Orchestrator {VERSION}\n\n")), "{notes}");
        assert!(notes.contains("### Added") && !notes.contains("## ["), "{notes}");
        let made_up =
            "# Changelog\n\n## [Unreleased]\n\n## [0.2.0] - 2027-01-01\n\n### Fixed\n\n- a\n\n## [0.1.0] - x\n\n- b\n";
        assert_eq!(super::notes(made_up, "0.2.0").unwrap(), "# Orchestrator 0.2.0\n\n### Fixed\n\n- a\n");
        assert!(super::notes(made_up, "0.3.0").is_err());
        assert!(super::notes("## [0.4.0] - x\n\nnothing listed\n", "0.4.0").is_err());
    }

    #[test]
    fn the_daemon_tarball_is_reproducible() {
        let dir = tempfile::tempdir().unwrap();
        let binary = dir.path().join("orchestrator");
        std::fs::write(&binary, b"\x7fELF").unwrap();
        let files = [("orchestrator", binary, 0o755)];
        daemon_tarball("orchestrator-0.1.0-x", &files, &dir.path().join("a.tar.gz")).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1100));
        daemon_tarball("orchestrator-0.1.0-x", &files, &dir.path().join("b.tar.gz")).unwrap();
        let a = std::fs::read(dir.path().join("a.tar.gz")).unwrap();
        assert_eq!(a, std::fs::read(dir.path().join("b.tar.gz")).unwrap());
        let listed = Command::new("tar").arg("-tvzf").arg(dir.path().join("a.tar.gz")).output().unwrap();
        let listed = String::from_utf8_lossy(&listed.stdout);
        assert!(
            listed.starts_with("-rwxr-xr-x 0/0") && listed.contains("orchestrator-0.1.0-x/orchestrator"),
            "{listed}"
        );
    }
}
