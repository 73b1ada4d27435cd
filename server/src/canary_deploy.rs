//! `orchestrator canary deploy`'s serve flags: the room the gates need,
//! set or checked before the canary daemon starts.

/// Active workers a canary daemon makes room for by default: G5 scales the
/// pool to `--workers` + 2 (five for the seed's three), and a run may ask
/// up to six.
pub const ACTIVE_WORKERS: usize = 8;

/// The fewest active workers G5 can pass with: the seed's three, plus two.
pub const ACTIVE_WORKERS_MIN: usize = 5;

/// `orchestrator canary deploy`'s serve flags: `--max-active-workers`
/// [`ACTIVE_WORKERS`] unless given; refused when given too small for G5.
pub fn serve_args(mut serve_args: Vec<String>) -> anyhow::Result<Vec<String>> {
    const FLAG: &str = "--max-active-workers";
    let given = serve_args.iter().enumerate().find_map(|(i, a)| match a.strip_prefix(FLAG) {
        Some("") => Some(serve_args.get(i + 1).cloned().unwrap_or_default()),
        Some(rest) => rest.strip_prefix('=').map(str::to_owned),
        None => None,
    });
    match given.map(|v| v.parse::<usize>()) {
        None => serve_args.extend([FLAG.to_owned(), ACTIVE_WORKERS.to_string()]),
        Some(Ok(n)) if n >= ACTIVE_WORKERS_MIN => {}
        Some(_) => anyhow::bail!(
            "{FLAG} must be at least {ACTIVE_WORKERS_MIN} for the canary (G5 scales three workers to five); leave it out and deploy sets {ACTIVE_WORKERS}"
        ),
    }
    Ok(serve_args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deploy_makes_room_for_g5_and_refuses_less() {
        let args = |a: &[&str]| serve_args(a.iter().map(|s| (*s).to_owned()).collect());
        assert_eq!(args(&["--pool-pacing-ms", "40"]).unwrap(), ["--pool-pacing-ms", "40", "--max-active-workers", "8"]);
        assert_eq!(args(&["--max-active-workers", "6"]).unwrap(), ["--max-active-workers", "6"]);
        assert_eq!(args(&["--max-active-workers=12"]).unwrap(), ["--max-active-workers=12"]);
        for small in [&["--max-active-workers", "4"][..], &["--max-active-workers=2"], &["--max-active-workers"]] {
            assert!(args(small).unwrap_err().to_string().contains("at least 5"), "{small:?}");
        }
    }
}
