//! `cargo xtask skill`: packages `skills/<name>/` as an uploadable Agent
//! Skills archive, `<target>/skills/<name>.zip`, whose single top folder is
//! the skill (seed §27.5). Reproducible (fixed times and modes, sorted
//! entries); only the skill's own text files go in, and a `SKILL.md` whose
//! frontmatter `name` differs from its folder is refused.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

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
    let mut entries = Vec::new();
    for relative in crate::archive::files(&dir)? {
        if relative.split('/').any(|part| part.starts_with('.')) {
            bail!("{name}/{relative}: hidden files do not belong in a skill");
        }
        let text = std::fs::read(dir.join(&relative))?;
        if std::str::from_utf8(&text).is_err() {
            bail!("{name}/{relative}: a skill holds text only");
        }
        entries.push((format!("{name}/{relative}"), text));
    }
    std::fs::create_dir_all(out_dir)?;
    let path = out_dir.join(format!("{name}.zip"));
    crate::archive::zip(entries, &path)?;
    Ok(path)
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
