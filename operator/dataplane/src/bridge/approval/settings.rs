//! The run's `approval` settings in the bridge file (`api/bridge.py`'s `ApprovalConfig`,
//! `ElicitationApproval`, `ApprovalWebhook`), typed and checked with the operator's bounds.
//! Pure.

use std::path::PathBuf;

use serde::Deserialize;

/// How held calls are approved: by the webhook when the run names one (it alone decides),
/// else by the calling agent when it declared elicitation.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalConfig {
    #[serde(default)]
    pub elicitation: ElicitationApproval,
    #[serde(default)]
    pub webhook: Option<ApprovalWebhook>,
}

/// Approval asked of the calling agent (its human answers).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ElicitationApproval {
    /// How long the agent's answer is waited for; none in time is a denial (at most the
    /// time a 2026-07-28 agent's call stays parked for its answer, `agent::PARKED`).
    #[serde(default = "five_minutes")]
    pub timeout_seconds: u64,
}

impl Default for ElicitationApproval {
    fn default() -> Self {
        Self {
            timeout_seconds: five_minutes(),
        }
    }
}

/// Where the bridge asks a person about a held call.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalWebhook {
    pub url: String,
    /// How long the answer is waited for; none in time is a denial.
    #[serde(default = "five_minutes")]
    pub timeout_seconds: u64,
    /// A mounted Secret key: the HMAC-SHA256 key that signs each request's body.
    pub secret_file: PathBuf,
}

fn five_minutes() -> u64 {
    300
}

/// The longest URL of a webhook (`api/bridge.py`).
const MAX_URL_CHARS: usize = 2048;

/// What is wrong with the settings, each problem naming its field.
pub fn problems(approval: &ApprovalConfig) -> Vec<String> {
    let mut problems = Vec::new();
    let seconds = approval.elicitation.timeout_seconds;
    if !(1..=300).contains(&seconds) {
        problems.push("approval.elicitation.timeoutSeconds: must be from 1 to 300".to_owned());
    }
    let Some(webhook) = &approval.webhook else {
        return problems;
    };
    if !(1..=3600).contains(&webhook.timeout_seconds) {
        problems.push("approval.webhook.timeoutSeconds: must be from 1 to 3600".to_owned());
    }
    let url = &webhook.url;
    let host = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .and_then(|rest| rest.split(['/', '?', '#']).next());
    if url.chars().count() > MAX_URL_CHARS
        || host.is_none_or(str::is_empty)
        || url.chars().any(char::is_whitespace)
        || url.parse::<hyper::Uri>().is_err()
    {
        problems.push(format!(
            "approval.webhook.url: must be an http:// or https:// URL of at most {MAX_URL_CHARS} characters"
        ));
    }
    if !webhook.secret_file.is_absolute() {
        problems.push("approval.webhook.secretFile: must be an absolute path".to_owned());
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> ApprovalConfig {
        serde_json::from_str(text).expect("valid settings")
    }

    #[test]
    fn defaults_are_the_operators_and_a_plain_http_webhook_is_accepted() {
        let empty = read("{}");
        assert_eq!(empty.elicitation.timeout_seconds, 300);
        assert!(empty.webhook.is_none() && problems(&empty).is_empty());
        let webhook = read(r#"{"webhook": {"url": "http://approvals.team.svc/a", "secretFile": "/k"}}"#);
        assert_eq!(webhook.webhook.as_ref().unwrap().timeout_seconds, 300);
        assert!(problems(&webhook).is_empty(), "{:?}", problems(&webhook));
    }

    #[test]
    fn out_of_bounds_values_and_bad_urls_are_refused_by_field() {
        let longest_wait = read(r#"{"elicitation": {"timeoutSeconds": 300}}"#);
        assert!(problems(&longest_wait).is_empty());
        let bad = read(
            r#"{"elicitation": {"timeoutSeconds": 301},
                "webhook": {"url": "ftp://x/", "timeoutSeconds": 0, "secretFile": "key"}}"#,
        );
        let found = problems(&bad).join("; ");
        for field in [
            "approval.elicitation.timeoutSeconds",
            "approval.webhook.timeoutSeconds",
            "approval.webhook.url",
            "approval.webhook.secretFile",
        ] {
            assert!(found.contains(field), "{field}: {found}");
        }
        let tls = read(r#"{"webhook": {"url": "https://approvals.example/a", "secretFile": "/k"}}"#);
        assert!(
            problems(&tls).is_empty(),
            "an https:// webhook is reached over verified TLS"
        );
        assert!(serde_json::from_str::<ApprovalConfig>(r#"{"surprise": 1}"#).is_err());
    }
}
