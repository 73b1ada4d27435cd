//! Reproducible archives: entries sorted, one fixed time and mode, so two
//! runs of one commit give the same bytes.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use zip::write::SimpleFileOptions;

/// Every file under `dir`, relative to it, `/`-separated, sorted.
pub fn files(dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    collect(dir, dir, &mut out)?;
    out.sort();
    Ok(out)
}

fn collect(base: &Path, dir: &Path, out: &mut Vec<String>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| dir.display().to_string())? {
        let path = entry?.path();
        if path.is_dir() {
            collect(base, &path, out)?;
        } else {
            let relative = path.strip_prefix(base)?.components();
            let parts: Option<Vec<&str>> = relative.map(|c| c.as_os_str().to_str()).collect();
            out.push(parts.with_context(|| format!("{}: a non-UTF-8 file name", path.display()))?.join("/"));
        }
    }
    Ok(())
}

/// Writes `entries` (name, bytes), in the order given, as a deflated zip at `path`.
pub fn zip(entries: impl IntoIterator<Item = (String, Vec<u8>)>, path: &Path) -> anyhow::Result<()> {
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).with_context(|| path.display().to_string())?);
    let options = SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .last_modified_time(zip::DateTime::default())
        .unix_permissions(0o644);
    for (name, bytes) in entries {
        zip.start_file(name, options)?;
        zip.write_all(&bytes)?;
    }
    zip.finish()?;
    Ok(())
}
