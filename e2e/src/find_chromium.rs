//! Where Chromium is on this machine: one rule for the browser tests, the
//! demo and `cargo xtask`, which includes this file (std only) so both
//! agree. `CHROMIUM` names it outright; otherwise the usual install places
//! on Debian, other Linux distributions and macOS, then `PATH`.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// Fixed install places, most specific first.
const PLACES: &[&str] = &[
    "/usr/bin/chromium",
    "/usr/bin/chromium-browser",
    "/usr/bin/google-chrome",
    "/usr/bin/google-chrome-stable",
    "/snap/bin/chromium",
    "/Applications/Chromium.app/Contents/MacOS/Chromium",
    "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
];

/// Program names looked up on `PATH` after the fixed places.
const NAMES: &[&str] = &["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"];

/// The Chromium to run, or an error that says where it looked.
pub fn find_chromium() -> Result<PathBuf, String> {
    locate(std::env::var_os("CHROMIUM"), PLACES, &std::env::var_os("PATH").unwrap_or_default())
}

/// [`find_chromium`] over given inputs: the `CHROMIUM` value, the fixed
/// places and the `PATH` value.
fn locate(named: Option<OsString>, places: &[&str], path: &OsStr) -> Result<PathBuf, String> {
    if let Some(named) = named {
        let named = PathBuf::from(named);
        return if named.is_file() { Ok(named) } else { Err(format!("CHROMIUM={} is not a file", named.display())) };
    }
    let on_path = NAMES.iter().flat_map(|name| std::env::split_paths(path).map(move |dir| dir.join(name)));
    places.iter().map(PathBuf::from).chain(on_path).find(|candidate| Path::is_file(candidate)).ok_or_else(|| {
        format!(
            "no Chromium found: set CHROMIUM to its path, or install it (`cargo xtask install` does on Debian); \
             looked at {} and for {} on PATH",
            places.join(", "),
            NAMES.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chromium_is_found_by_name_then_place_then_path_and_otherwise_the_error_says_where_it_looked() {
        let dir = std::env::temp_dir().join(format!("find-chromium-{}", std::process::id()));
        let (bin, app) = (dir.join("bin"), dir.join("Chromium.app"));
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&app).unwrap();
        std::fs::write(bin.join("chromium-browser"), "").unwrap();
        std::fs::write(app.join("Chromium"), "").unwrap();
        let place = app.join("Chromium").display().to_string();
        let missing = dir.join("nowhere").display().to_string();
        let path = std::env::join_paths([dir.join("empty"), bin.clone()]).unwrap();

        assert_eq!(locate(None, &[&missing], &path), Ok(bin.join("chromium-browser")));
        assert_eq!(locate(None, &[&missing, &place], &path), Ok(app.join("Chromium")));
        assert_eq!(
            locate(Some(bin.join("chromium-browser").into()), &[&place], &path),
            Ok(bin.join("chromium-browser"))
        );
        let wrong = locate(Some(missing.clone().into()), &[&place], &path).unwrap_err();
        assert!(wrong.contains(&missing), "{wrong}");
        let none = locate(None, &[&missing], OsStr::new("")).unwrap_err();
        assert!(none.contains(&missing) && none.contains("chromium-browser") && none.contains("CHROMIUM"), "{none}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
