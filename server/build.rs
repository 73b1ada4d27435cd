//! Stamps the source this binary was built from into it, for the canary's
//! deployment identity (G1D): the commit, its tree, and whether tracked
//! files differed from it when this script last ran. Outside a git
//! checkout (a source tarball) both read `unknown`.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok().filter(|o| o.status.success())?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// `dir` as `../…` when it lies in this package's parent (the workspace).
fn relative_to_package(dir: &str) -> String {
    let package = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let workspace = std::path::Path::new(&package).parent().unwrap_or(std::path::Path::new("/"));
    match std::path::Path::new(dir).strip_prefix(workspace) {
        Ok(inner) if !workspace.as_os_str().is_empty() => format!("../{}", inner.display()),
        _ => dir.to_owned(),
    }
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let tree = git(&["rev-parse", "HEAD^{tree}"]).unwrap_or_else(|| "unknown".into());
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    println!("cargo:rustc-env=ORCHESTRATOR_COMMIT={commit}");
    println!("cargo:rustc-env=ORCHESTRATOR_TREE={tree}{}", if dirty { "+dirty" } else { "" });
    // Again when HEAD moves or the index changes; source edits rebuild the
    // crate anyway, but only a new commit or index re-stamps it.
    // Relative to this package where it can be: two clones sharing one
    // target directory share this script's output, and an absolute path
    // would watch the other clone's HEAD and keep its stamp.
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]).map(|dir| relative_to_package(&dir)) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        if std::path::Path::new(&dir).join("index").exists() {
            println!("cargo:rerun-if-changed={dir}/index");
        }
        // A missing path would re-run this script on every build: a packed ref is left out.
        if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"]).filter(|h| std::path::Path::new(&dir).join(h).exists())
        {
            println!("cargo:rerun-if-changed={dir}/{head}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
