//! `cargo xtask release`: the versioned bundle under
//! `dist/release/<version>/` (issue 46): the daemon for the host it runs
//! on, the extension for Firefox (`.xpi`, its stable add-on id) and for a
//! Chromium store (`.zip`), and `SHA256SUMS` over them. The extension
//! archives are written by every `cargo xtask dist` too, so the browser
//! tests install what a person would, never a stale copy. Every archive is
//! reproducible: two runs of one commit give the same bytes.

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

/// The Firefox add-on's file name in the bundle.
pub fn xpi_name() -> String {
    format!("orchestrator-executor-{VERSION}.xpi")
}

/// The Chromium extension's file name in the bundle (a store upload).
pub fn chromium_zip_name() -> String {
    format!("orchestrator-executor-{VERSION}-chromium.zip")
}

/// Packs `dist/firefox` and `dist/chromium` (under `dist`) into `out`.
/// The store's archive leaves out the manifest's `key`: a store assigns
/// the id and refuses an upload that sets one.
pub fn extensions(dist: &Path, out: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    crate::archive::zip(entries(&dist.join("firefox"), |_| Ok(()))?, &out.join(xpi_name()))?;
    let unkeyed = |manifest: &mut Value| {
        manifest.as_object_mut().context("a manifest is an object")?.remove("key").context("no key to leave out")?;
        Ok(())
    };
    crate::archive::zip(entries(&dist.join("chromium"), unkeyed)?, &out.join(chromium_zip_name()))?;
    Ok(())
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

/// `cargo xtask release`: the extension (`dist`), the daemon built in the
/// release profile and packed with its README and licence as
/// `orchestrator-<version>-<target>.tar.gz`, and `SHA256SUMS`.
pub fn release() -> anyhow::Result<()> {
    crate::dist::dist()?;
    let out = bundle_dir();
    run(Command::new("cargo").args(["build", "--release", "-p", "server", "--bin", "orchestrator"]))?;
    let binary = target_dir().join("release/orchestrator");
    let name = format!("orchestrator-{VERSION}-{}", host_target()?);
    let files = [("orchestrator", binary, 0o755), ("README.md", root().join("README.md"), 0o644)];
    daemon_tarball(&name, &files, &out.join(format!("{name}.tar.gz")))?;
    sums(&out)?;
    println!("xtask: {}", out.display());
    Ok(())
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
        extensions(&dir.path().join("dist"), &dir.path().join("a")).unwrap();
        // Later files, the same content: the same bytes.
        std::thread::sleep(std::time::Duration::from_millis(1100));
        made_up(&dir.path().join("dist"));
        extensions(&dir.path().join("dist"), &dir.path().join("b")).unwrap();
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
