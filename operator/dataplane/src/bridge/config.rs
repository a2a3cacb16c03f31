//! The bridge's command line and the `BridgeConfig` file it reads (`--config FILE`, YAML or
//! JSON), as `operator/mcp_operator/api/bridge.py` defines it, typed and checked (the call
//! policy in `policy`); `auth` is accepted as the operator writes it. Pure but for reading
//! the file.

use std::path::{Path, PathBuf};

use clap::Args;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::policy::{self, CallPolicy};

/// `mcp-dataplane bridge`: one governed MCP endpoint for an agent, in front of its servers.
#[derive(Debug, Clone, Args)]
pub struct BridgeArgs {
    /// The `BridgeConfig` file (YAML or JSON).
    #[arg(long)]
    pub config: PathBuf,
    /// Port of `/healthz`, `/readyz` and `/metrics`, on every address of both families.
    #[arg(long, default_value_t = 7801)]
    pub health_port: u16,
    /// Who may read `/metrics`: an access configuration (issuer keys, audience
    /// `metrics.mcp-operator.dev`, the scrapers in `allow.operators`); unset: every client.
    #[arg(long)]
    pub metrics_access: Option<PathBuf>,
    /// List every server's tools again this often (seconds) while it is up.
    #[arg(long, default_value_t = 300.0, value_parser = positive_seconds)]
    pub relist_seconds: f64,
    /// How often the configuration file is checked for a new content (seconds; at least 0.1).
    #[arg(long, default_value_t = 2.0, value_parser = super::reload::reload_seconds)]
    pub reload_seconds: f64,
    /// DEBUG, INFO, WARNING or ERROR: the bridge's own log lines (audit lines are always written).
    #[arg(long, default_value = "INFO", value_parser = ["DEBUG", "INFO", "WARNING", "ERROR"], ignore_case = true)]
    pub log_level: String,
}

fn positive_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && seconds > 0.0 && seconds <= 86_400.0 => Ok(seconds),
        _ => Err("must be a number of seconds above 0 and at most 86400".to_owned()),
    }
}

pub const API_VERSION: &str = "mcp-operator.dev/v1alpha1";

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BridgeConfig {
    #[serde(default = "api_version")]
    pub api_version: String,
    #[serde(default = "kind")]
    pub kind: String,
    pub run: RunRef,
    #[serde(default)]
    pub listen: Listen,
    #[serde(default)]
    pub servers: Vec<Server>,
    #[serde(default)]
    pub audit: AuditSink,
    #[serde(default)]
    pub identity: Option<Value>,
    /// How held calls are approved (`approval`); unset: the agent when it declared
    /// elicitation, waiting 300 s.
    #[serde(default)]
    pub approval: Option<super::approval::settings::ApprovalConfig>,
    #[serde(default = "full")]
    pub discovery: String,
}

fn api_version() -> String {
    API_VERSION.to_owned()
}
fn kind() -> String {
    "BridgeConfig".to_owned()
}
fn full() -> String {
    "full".to_owned()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRef {
    pub name: String,
    pub namespace: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Listen {
    #[serde(default = "default_host")]
    pub host: String,
    #[serde(default = "default_port")]
    pub port: u16,
    #[serde(default = "default_path")]
    pub path: String,
}

fn default_host() -> String {
    "127.0.0.1".to_owned()
}
fn default_port() -> u16 {
    7800
}
fn default_path() -> String {
    "/mcp".to_owned()
}

impl Default for Listen {
    fn default() -> Self {
        Self {
            host: default_host(),
            port: default_port(),
            path: default_path(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuditSink {
    #[serde(default = "yes")]
    pub stdout: bool,
    #[serde(default)]
    pub file: Option<PathBuf>,
}

fn yes() -> bool {
    true
}

impl Default for AuditSink {
    fn default() -> Self {
        Self {
            stdout: true,
            file: None,
        }
    }
}

/// One layer of filters: globs on the server's original names.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FilterLayer {
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
    #[serde(default)]
    pub prompts_allow: Vec<String>,
    #[serde(default)]
    pub prompts_deny: Vec<String>,
    #[serde(default)]
    pub resources_allow: Vec<String>,
    #[serde(default)]
    pub resources_deny: Vec<String>,
}

/// A header sent on every request to the server: a literal value or a mounted file's.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Header {
    pub name: String,
    #[serde(default)]
    pub value: Option<String>,
    #[serde(default)]
    pub value_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Server {
    pub name: String,
    pub namespace: String,
    pub url: String,
    #[serde(default = "streamable")]
    pub transport: String,
    #[serde(default)]
    pub protocol_version: Option<String>,
    pub prefix: String,
    #[serde(default)]
    pub filters: Vec<FilterLayer>,
    #[serde(default)]
    pub headers: Vec<Header>,
    #[serde(default)]
    pub policy: CallPolicy,
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    #[serde(default)]
    pub auth: Option<Value>,
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// The server's `spec.toolsPinning`.
    #[serde(default)]
    pub pinning: Pinning,
    /// The server's tool overrides (`spec.toolsOverride`).
    #[serde(default)]
    pub overrides: Vec<ToolOverride>,
    /// The pinned definition digests: original name → `definitionSha256`. Unset: no pins.
    #[serde(default)]
    pub tool_digests: Option<std::collections::BTreeMap<String, String>>,
}

/// Whether the bridge refuses a tool whose live definition differs from its pin (`off`: it
/// does not check), and whether a tool without a pin is refused (`strict`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pinning {
    Strict,
    #[default]
    Pin,
    Off,
}

/// The server's `spec.toolsOverride` entry for one tool.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolOverride {
    /// The tool's original name.
    pub name: String,
    /// The title the agent sees instead of the server's.
    #[serde(default)]
    pub title: Option<String>,
    /// The description the agent sees instead of the server's.
    #[serde(default)]
    pub description: Option<String>,
    /// Arguments sent with every call whatever the agent says; out of the agent's schema.
    #[serde(default)]
    pub fixed_arguments: Option<Map<String, Value>>,
}

fn streamable() -> String {
    "streamable-http".to_owned()
}

impl Server {
    /// `namespace/name`: how audit lines, logs and `/readyz` name the server.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The call deadline (`policy.timeoutSeconds`, 30 s by default).
    pub fn timeout_seconds(&self) -> u64 {
        self.policy.timeout_seconds
    }
}

/// Parse the file's text (YAML, of which JSON is a subset); the error names the field.
pub fn parse(text: &str, source: &str) -> Result<BridgeConfig, String> {
    let config: BridgeConfig = serde_norway::from_str(text).map_err(|e| format!("{source}: {e}"))?;
    let problems = problems(&config);
    if problems.is_empty() {
        Ok(config)
    } else {
        Err(format!("{source}: {}", problems.join("; ")))
    }
}

/// Read and check the configuration file.
pub fn load(path: &Path) -> Result<BridgeConfig, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("{}: cannot be read: {e}", path.display()))?;
    parse(&text, &path.display().to_string())
}

fn problems(config: &BridgeConfig) -> Vec<String> {
    let mut problems = Vec::new();
    if config.api_version != API_VERSION {
        problems.push(format!("apiVersion: must be {API_VERSION}"));
    }
    if config.kind != "BridgeConfig" {
        problems.push("kind: must be BridgeConfig".to_owned());
    }
    if config.listen.port < 1024 {
        problems.push("listen.port: must be 1024 or more".to_owned());
    }
    if !config.listen.path.starts_with('/') {
        problems.push("listen.path: must start with /".to_owned());
    }
    if config.discovery != "full" && config.discovery != "search" {
        problems.push("discovery: must be full or search".to_owned());
    }
    if let Some(approval) = &config.approval {
        problems.extend(super::approval::settings::problems(approval));
    }
    let mut seen = std::collections::HashSet::new();
    for (index, server) in config.servers.iter().enumerate() {
        let at = format!("servers[{index}]");
        if !seen.insert(server.key()) {
            problems.push(format!(
                "servers: must be unique: '{}' appears twice",
                server.key()
            ));
        }
        if !(server.url.starts_with("http://") || server.url.starts_with("https://")) {
            problems.push(format!("{at}.url: must be an http:// or https:// URL"));
        }
        if server.prefix.len() > 32
            || !server
                .prefix
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
            || server
                .prefix
                .chars()
                .next()
                .is_some_and(|c| !c.is_ascii_lowercase())
        {
            problems.push(format!(
                "{at}.prefix: must match [a-z][a-z0-9_-]{{0,31}} or be empty"
            ));
        }
        for (h, header) in server.headers.iter().enumerate() {
            if header.value.is_some() == header.value_file.is_some() {
                problems.push(format!(
                    "{at}.headers[{h}]: exactly one of value and valueFile must be set"
                ));
            }
        }
        if server.auth.is_some() && server.token_file.is_some() {
            problems.push(format!("{at}: auth and tokenFile must not both be set"));
        }
        problems.extend(policy::problems(&server.policy, &format!("{at}.policy")));
        problems.extend(super::overrides::problems(&server.overrides, &at));
        problems.extend(super::pins::problems(server, &at));
        if let Some(digests) = &server.tool_digests {
            for (name, digest) in digests {
                if digest.len() != 64
                    || !digest
                        .bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                {
                    problems.push(format!(
                        "{at}.toolDigests['{name}']: must be 64 lowercase hexadecimal digits"
                    ));
                }
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = "apiVersion: mcp-operator.dev/v1alpha1\nkind: BridgeConfig\nrun: {name: agent-1, namespace: default}\n";

    #[test]
    fn defaults_fill_what_the_file_leaves_out() {
        let config = parse(MINIMAL, "test").unwrap();
        assert_eq!(
            (config.listen.host.as_str(), config.listen.port),
            ("127.0.0.1", 7800)
        );
        assert_eq!(config.listen.path, "/mcp");
        assert!(config.servers.is_empty() && config.audit.stdout);
    }

    #[test]
    fn json_is_read_as_yaml_and_policies_are_accepted() {
        let text = r#"{"apiVersion": "mcp-operator.dev/v1alpha1", "kind": "BridgeConfig",
            "run": {"name": "r", "namespace": "d"},
            "servers": [{"name": "ev", "namespace": "d", "url": "http://h:1/mcp", "prefix": "ev",
                         "filters": [{"deny": ["get-env"]}], "policy": {"timeoutSeconds": 5},
                         "tokenFile": "/var/run/token"}]}"#;
        let config = parse(text, "test").unwrap();
        let server = &config.servers[0];
        assert_eq!(server.key(), "d/ev");
        assert_eq!(server.filters[0].deny, vec!["get-env"]);
        assert_eq!(server.timeout_seconds(), 5);
    }

    #[test]
    fn every_part_of_a_policy_is_read_and_enforced() {
        let server = "servers:\n- {name: a, namespace: d, url: 'http://x/', prefix: a, ";
        let ruled = format!(
            "{MINIMAL}{server}policy: {{rules: [{{match: 'true', action: approve}}, {{match: 'false', action: deny}}]}}}}\n"
        );
        assert_eq!(parse(&ruled, "f").unwrap().servers[0].policy.rules.len(), 2);
        // Pins (any pinning) and overrides are enforced: accepted.
        for pinning in ["strict", "pin", "off"] {
            let pinned = format!(
                "{MINIMAL}{server}pinning: '{pinning}', toolDigests: {{x: '0000000000000000000000000000000000000000000000000000000000000000'}}, overrides: [{{name: x, title: y, fixedArguments: {{a: 1}}}}]}}\n"
            );
            let config = parse(&pinned, "f").unwrap();
            assert_eq!(config.servers[0].overrides[0].name, "x");
        }
        let limited = format!("{MINIMAL}{server}policy: {{rateLimits: [{{tools: [x], perMinute: 1}}]}}}}\n");
        assert!(parse(&limited, "f").is_ok(), "rate limits are enforced");
        let pii = format!("{MINIMAL}{server}policy: {{pii: {{arguments: block, results: redact}}}}}}\n");
        assert!(parse(&pii, "f").is_ok(), "PII policies are enforced");
        let held = format!(
            "{MINIMAL}{server}policy: {{requireApproval: [x], approveDestructive: true}}}}\napproval: {{webhook: {{url: 'http://a/', secretFile: /k}}}}\n"
        );
        assert!(parse(&held, "f").is_ok(), "approvals are enforced");
        let unbounded = format!("{MINIMAL}approval: {{elicitation: {{timeoutSeconds: 301}}}}\n");
        assert!(
            parse(&unbounded, "f")
                .unwrap_err()
                .contains("approval.elicitation.timeoutSeconds")
        );
    }

    #[test]
    fn unknown_fields_and_bad_values_are_refused_naming_the_field() {
        let unknown = format!("{MINIMAL}surprise: 1\n");
        assert!(parse(&unknown, "f").unwrap_err().contains("surprise"));
        let twice = format!(
            "{MINIMAL}servers:\n- {{name: a, namespace: d, url: 'http://x/', prefix: a}}\n- {{name: a, namespace: d, url: 'http://x/', prefix: b}}\n"
        );
        assert!(parse(&twice, "f").unwrap_err().contains("appears twice"));
        let prefix = format!("{MINIMAL}servers:\n- {{name: a, namespace: d, url: 'http://x/', prefix: A}}\n");
        assert!(parse(&prefix, "f").unwrap_err().contains("servers[0].prefix"));
        let search = format!("{MINIMAL}discovery: search\n");
        assert_eq!(parse(&search, "f").unwrap().discovery, "search");
        let other = format!("{MINIMAL}discovery: some\n");
        assert!(
            parse(&other, "f")
                .unwrap_err()
                .contains("discovery: must be full or search")
        );
    }
}
