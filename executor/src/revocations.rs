//! The revocation list of automation grants: a text file the operator (or
//! `drydock-executor grant revoke`) appends grant ids to, one or more a
//! line, `#` starting a comment. It lives beside the audit store, not in
//! it, so an operator can revoke with a text editor while the executor
//! runs; a restore adds a backup's list to it and never removes an id.

use std::collections::HashSet;
use std::path::Path;

use drydock_proto::grant;

/// The ids the list at `path` revokes. A line holding anything but grant
/// ids cannot be trusted to have revoked nothing, so it fails the whole
/// read (the caller then refuses every grant: fail closed).
pub fn read(path: &Path) -> Result<HashSet<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let mut revoked = HashSet::new();
    for (n, line) in text.trim_start_matches('\u{feff}').lines().enumerate() {
        for token in tokens(line) {
            if !grant::is_grant_id(token) {
                return Err(format!(
                    "line {} holds `{}`, which is not a grant id (grt-…)",
                    n + 1,
                    token.chars().take(40).collect::<String>()
                ));
            }
            revoked.insert(token.to_string());
        }
    }
    Ok(revoked)
}

/// The tokens of one line, its comment left out.
fn tokens(line: &str) -> impl Iterator<Item = &str> {
    line.split('#')
        .next()
        .unwrap_or("")
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|t| !t.is_empty())
}

/// Add every grant id the list at `from` names to the list at `to`
/// (created when missing); what is not a grant id is passed over, since a
/// restore must not fail on a backup's damaged line.
pub fn merge(from: &Path, to: &Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(from)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", from.display()))?;
    for id in text
        .lines()
        .flat_map(tokens)
        .filter(|t| grant::is_grant_id(t))
    {
        revoke(to, id)
            .map_err(|e| anyhow::anyhow!("cannot add {id} to {}: {e:#}", to.display()))?;
    }
    Ok(())
}

/// Append `id` to the revocation list at `path` (created if missing).
/// Returns false when it was already there.
pub fn revoke(path: &Path, id: &str) -> anyhow::Result<bool> {
    use std::io::Write as _;
    if !grant::is_grant_id(id) {
        anyhow::bail!(
            "`{id}` is not a grant id (grt-<letters or digits>); `drydock grant list` shows them"
        );
    }
    let current = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => anyhow::bail!("cannot read {}: {e}", path.display()),
    };
    let listed = current
        .lines()
        .any(|l| l.split('#').next().unwrap_or("").trim() == id);
    if listed {
        return Ok(false);
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
    writeln!(file, "{id}  # revoked {stamp}")?;
    file.sync_all()?;
    Ok(true)
}
