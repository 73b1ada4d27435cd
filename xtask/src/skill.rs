//! `cargo xtask skill`: packages `skills/<name>/` as an uploadable Agent
//! Skills archive, `<target>/skills/<name>.zip`, whose single top folder is
//! the skill (seed §27.5). Reproducible (fixed times and modes, sorted
//! entries); only the skill's own text files go in, and a `SKILL.md` whose
//! frontmatter `name` differs from its folder is refused.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use zip::write::SimpleFileOptions;

/// The skills this repository ships.
pub const SKILLS: &[&str] = &["durable-continuation-output"];

/// Writes the archive of `skills/<name>` under `out_dir`; its path.
pub fn package(skills_dir: &Path, name: &str, out_dir: &Path) -> anyhow::Result<PathBuf> {
    let dir = skills_dir.join(name);
    let manifest = std::fs::read_to_string(dir.join("SKILL.md")).with_context(|| format!("{name}/SKILL.md"))?;
    let declared = manifest
        .strip_prefix("---\n")
        .and_then(|rest| rest.split("\n---").next())
        .and_then(|front| front.lines().find_map(|l| l.strip_prefix("name: ")))
        .map(str::trim);
    if declared != Some(name) {
        bail!("{name}/SKILL.md: its frontmatter names {declared:?}, not {name:?}");
    }
    let mut files = Vec::new();
    collect(&dir, &dir, &mut files)?;
    files.sort();
    std::fs::create_dir_all(out_dir)?;
    let path = out_dir.join(format!("{name}.zip"));
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&path)?);
    let options = SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .last_modified_time(zip::DateTime::default())
        .unix_permissions(0o644);
    for relative in files {
        let text = std::fs::read(dir.join(&relative))?;
        if std::str::from_utf8(&text).is_err() {
            bail!("{name}/{relative}: a skill holds text only");
        }
        zip.start_file(format!("{name}/{relative}"), options)?;
        zip.write_all(&text)?;
    }
    zip.finish()?;
    Ok(path)
}

/// Every file under `dir`, relative to `base`, `/`-separated; no hidden files.
fn collect(base: &Path, dir: &Path, out: &mut Vec<String>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).context("a non-UTF-8 file name")?;
        if name.starts_with('.') {
            bail!("{}: hidden files do not belong in a skill", path.display());
        }
        if path.is_dir() {
            collect(base, &path, out)?;
        } else {
            let relative =
                path.strip_prefix(base)?.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>();
            out.push(relative.join("/"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_skill_packages_reproducibly_with_its_folder_at_the_root() {
        let skills = Path::new(env!("CARGO_MANIFEST_DIR")).join("../skills");
        let out = tempfile::tempdir().unwrap();
        let first = std::fs::read(package(&skills, SKILLS[0], &out.path().join("a")).unwrap()).unwrap();
        let second = std::fs::read(package(&skills, SKILLS[0], &out.path().join("b")).unwrap()).unwrap();
        assert_eq!(first, second, "reproducible");
        let mut archive = zip::ZipArchive::new(std::io::Cursor::new(first)).unwrap();
        let names: Vec<String> = archive.file_names().map(|n| n.unwrap().into_owned()).collect();
        assert_eq!(names, ["durable-continuation-output/SKILL.md"]);
        let mut text = String::new();
        std::io::Read::read_to_string(&mut archive.by_index(0).unwrap(), &mut text).unwrap();
        assert!(text.contains("status: working | complete | blocked"));
        // An output contract only (seed §27.1): nothing about browsers, Retry or resuming.
        for word in ["Retry", "browser", "continue`", "resume", "MCP"] {
            assert!(!text.contains(word), "the skill mentions {word}");
        }
    }

    #[test]
    fn a_skill_whose_frontmatter_names_another_is_refused() {
        let out = tempfile::tempdir().unwrap();
        let skills = out.path().join("skills");
        std::fs::create_dir_all(skills.join("x")).unwrap();
        std::fs::write(skills.join("x/SKILL.md"), "---\nname: y\n---\nbody\n").unwrap();
        assert!(package(&skills, "x", out.path()).unwrap_err().to_string().contains("names"));
    }
}
