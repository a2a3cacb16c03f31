//! The access configuration the operator writes into a managed server's `<server>-access`
//! ConfigMap (key `access.json`), checked field by field (an error names the field), and the
//! file it lives in, re-read when its inode, size or mtime change — the kubelet swaps a
//! mounted ConfigMap through a symlink, so the path's `stat` changes at once. A bad update
//! keeps the last good configuration and says why, once per bad version.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

const MAX_FILE_BYTES: u64 = 1024 * 1024;
const MAX_ENTRIES: usize = 100_000;

/// What is wrong with an access configuration.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct AccessConfigError(pub String);

fn error<T>(text: impl Into<String>) -> Result<T, AccessConfigError> {
    Err(AccessConfigError(text.into()))
}

/// Who may call, and with whose keys their tokens are checked.
#[derive(Debug, Default)]
pub struct AccessConfig {
    pub audience: String,
    pub issuer: Option<String>,
    pub jwks: Option<Value>,
    pub namespaces: HashSet<String>,
    /// `None`: any ServiceAccount of an allowed namespace.
    pub service_accounts: Option<HashSet<String>>,
    pub operators: HashSet<String>,
    pub revoked_pods: HashSet<String>,
}

fn string(raw: Option<&Value>, field: &str) -> Result<String, AccessConfigError> {
    match raw.and_then(Value::as_str) {
        Some(text) if !text.is_empty() && text.len() <= 4096 => Ok(text.to_owned()),
        _ => error(format!("{field} must be a non-empty string")),
    }
}

fn strings(raw: Option<&Value>, field: &str) -> Result<HashSet<String>, AccessConfigError> {
    let Some(raw) = raw.filter(|v| !v.is_null()) else {
        return Ok(HashSet::new());
    };
    let Some(items) = raw.as_array().filter(|a| a.len() <= MAX_ENTRIES) else {
        return error(format!("{field} must be a list of at most {MAX_ENTRIES} strings"));
    };
    items
        .iter()
        .map(|item| match item.as_str() {
            Some(text) if !text.is_empty() && text.len() <= 512 => Ok(text.to_owned()),
            _ => error(format!("{field} must hold non-empty strings")),
        })
        .collect()
}

fn jwks(raw: Option<&Value>, field: &str) -> Result<Option<Value>, AccessConfigError> {
    let Some(raw) = raw.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    match raw.get("keys").and_then(Value::as_array) {
        Some(keys) if keys.len() <= 100 => Ok(Some(serde_json::json!({"keys": keys}))),
        _ => error(format!(
            "{field} must be a JWK Set: {{'keys': [...]}}, at most 100"
        )),
    }
}

/// Check a decoded access configuration.
pub fn parse(raw: &Value) -> Result<AccessConfig, AccessConfigError> {
    if !raw.is_object() {
        return error("the access configuration must be a JSON object");
    }
    let allow = match raw.get("allow") {
        None | Some(Value::Null) => &Value::Null,
        Some(allow) if allow.is_object() => allow,
        Some(_) => return error("allow must be an object"),
    };
    let service_accounts = match allow.get("serviceAccounts") {
        None | Some(Value::Null) => None,
        accounts => Some(strings(accounts, "allow.serviceAccounts")?),
    };
    for entry in service_accounts.iter().flatten() {
        if entry.matches('/').count() != 1 {
            return error(format!("allow.serviceAccounts entry {entry:?} must be ns/name"));
        }
    }
    if raw.get("oidc").is_some_and(|o| !o.is_null()) {
        return error("oidc is not served by this adapter build; use --auth kubernetes tokens only");
    }
    let issuer = match raw.get("issuer") {
        None | Some(Value::Null) => None,
        issuer => Some(string(issuer, "issuer")?),
    };
    let config = AccessConfig {
        audience: string(raw.get("audience"), "audience")?,
        issuer,
        jwks: jwks(raw.get("jwks"), "jwks")?,
        namespaces: strings(allow.get("namespaces"), "allow.namespaces")?,
        service_accounts,
        operators: strings(allow.get("operators"), "allow.operators")?,
        revoked_pods: strings(raw.get("revokedPods"), "revokedPods")?,
    };
    if config.issuer.is_none() != config.jwks.is_none() {
        return error("issuer and jwks go together: set both or neither");
    }
    Ok(config)
}

type Version = (u64, u64, i64, i64);

fn version_of(path: &Path) -> Option<Version> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.ino(), meta.size(), meta.mtime(), meta.mtime_nsec()))
}

/// Read and check the file at `path`.
pub fn load(path: &Path) -> Result<(AccessConfig, Option<Version>), AccessConfigError> {
    let shown = path.display();
    let version = version_of(path);
    let meta = std::fs::metadata(path).map_err(|e| AccessConfigError(format!("cannot read {shown}: {e}")))?;
    if meta.len() > MAX_FILE_BYTES {
        return error(format!("{shown} is larger than {MAX_FILE_BYTES} bytes"));
    }
    let data = std::fs::read(path).map_err(|e| AccessConfigError(format!("cannot read {shown}: {e}")))?;
    let document: Value =
        serde_json::from_slice(&data).map_err(|e| AccessConfigError(format!("{shown} is not JSON: {e}")))?;
    let config = parse(&document).map_err(|e| AccessConfigError(format!("{shown}: {e}")))?;
    Ok((config, version))
}

/// The last good configuration of a file, re-read when the file changes (checked at most
/// once per `check_every`).
pub struct AccessFile {
    path: PathBuf,
    current: Arc<AccessConfig>,
    version: Option<Version>,
    bad_version: Option<Version>,
    next_check: Instant,
    check_every: Duration,
    /// Bumped on every change: verdicts of an older generation are not trusted.
    pub generation: u64,
}

impl AccessFile {
    pub fn open(path: &Path, now: Instant) -> Result<Self, AccessConfigError> {
        let (config, version) = load(path)?;
        let check_every = Duration::from_secs(1);
        Ok(Self {
            path: path.to_owned(),
            current: Arc::new(config),
            version,
            bad_version: None,
            next_check: now + check_every,
            check_every,
            generation: 1,
        })
    }

    /// The configuration in force, re-read first when the file changed.
    pub fn current(&mut self, now: Instant) -> Arc<AccessConfig> {
        if now >= self.next_check {
            self.next_check = now + self.check_every;
            let version = version_of(&self.path);
            if version != self.version && version != self.bad_version {
                match load(&self.path) {
                    Ok((config, version)) => {
                        self.current = Arc::new(config);
                        self.version = version;
                        self.bad_version = None;
                        self.generation += 1;
                        tracing::info!("Reloaded the access configuration {}", self.path.display());
                    }
                    Err(why) => {
                        self.bad_version = version;
                        tracing::warn!("Kept the last good access configuration: {why}");
                    }
                }
            }
        }
        self.current.clone()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_bad_field_is_named() {
        let why = parse(&json!({"audience": 1})).unwrap_err().to_string();
        assert_eq!(why, "audience must be a non-empty string");
        let why = parse(&json!({"audience": "a", "allow": {"serviceAccounts": ["no-slash"]}})).unwrap_err();
        assert!(why.to_string().contains("must be ns/name"));
        assert!(
            parse(&json!({"audience": "a", "issuer": "i"})).is_err(),
            "issuer without jwks"
        );
    }

    #[test]
    fn a_good_document_is_read_whole() {
        let config = parse(&json!({"audience": "a", "issuer": "i", "jwks": {"keys": []},
            "allow": {"namespaces": ["team"], "serviceAccounts": null, "operators": ["op"]},
            "revokedPods": ["uid"]}))
        .unwrap();
        assert!(config.namespaces.contains("team") && config.service_accounts.is_none());
        assert!(config.revoked_pods.contains("uid"));
    }
}
