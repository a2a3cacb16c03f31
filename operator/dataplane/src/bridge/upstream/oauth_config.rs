//! `servers[].auth` typed as the operator writes it (`api/bridge.py`'s `UpstreamAuth`,
//! `ClientCredentialsAuth`, `TokenExchangeAuth`): exactly one grant, files named by absolute
//! path (never values), and the bounds of its fields; a problem is a sentence naming the
//! field, never a value.

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;

/// `servers[].auth`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuthConfig {
    #[serde(default)]
    pub oauth2_client_credentials: Option<Grant>,
    #[serde(default)]
    pub token_exchange: Option<Grant>,
}

/// One grant's settings (a client-credentials grant has no `subjectTokenFile`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Grant {
    #[serde(rename = "tokenURL")]
    pub token_url: String,
    #[serde(rename = "clientID", default)]
    pub client_id: Option<String>,
    #[serde(default)]
    pub client_secret_file: Option<PathBuf>,
    #[serde(default)]
    pub subject_token_file: Option<PathBuf>,
    #[serde(default)]
    pub scopes: Vec<String>,
    pub resource: String,
    #[serde(default)]
    pub audience: Option<String>,
}

/// The grant `auth` configures, whether it is a token exchange, and its token endpoint; or
/// why it is not a valid `auth`.
pub fn parse(auth: &Value) -> Result<(Grant, bool, hyper::Uri), String> {
    let auth: AuthConfig = serde_json::from_value(auth.clone()).map_err(|e| {
        let why = e.to_string();
        format!("auth: {}", why.split(" at line").next().unwrap_or_default())
    })?;
    let (grant, exchange) = match (auth.oauth2_client_credentials, auth.token_exchange) {
        (Some(grant), None) => (grant, false),
        (None, Some(grant)) => (grant, true),
        _ => {
            return Err(
                "auth: exactly one of oauth2ClientCredentials and tokenExchange must be set".to_owned(),
            );
        }
    };
    let at = if exchange {
        "auth.tokenExchange"
    } else {
        "auth.oauth2ClientCredentials"
    };
    let uri: hyper::Uri = grant
        .token_url
        .parse()
        .map_err(|_| format!("{at}.tokenURL: not a URL"))?;
    let long = |text: &str, limit: usize| text.chars().count() > limit;
    let problem = if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
        Some("tokenURL: only an http:// or https:// URL".to_owned())
    } else if long(&grant.token_url, 2048) || long(&grant.resource, 2048) {
        Some("tokenURL and resource: at most 2048 characters".to_owned())
    } else if !grant
        .resource
        .parse::<hyper::Uri>()
        .is_ok_and(|u| u.host().is_some())
    {
        Some("resource: not an absolute URL".to_owned())
    } else if grant.audience.as_deref().is_some_and(|a| long(a, 2048)) {
        Some("audience: at most 2048 characters".to_owned())
    } else if grant.scopes.len() > 32 || grant.scopes.iter().any(|s| long(s, 256)) {
        Some("scopes: at most 32, each at most 256 characters".to_owned())
    } else if grant
        .client_id
        .as_deref()
        .is_some_and(|c| c.is_empty() || long(c, 256))
    {
        Some("clientID: 1 to 256 characters".to_owned())
    } else if !exchange && (grant.client_id.is_none() || grant.client_secret_file.is_none()) {
        Some("clientID and clientSecretFile are required".to_owned())
    } else if exchange != grant.subject_token_file.is_some() {
        Some("subjectTokenFile: only and always for a token exchange".to_owned())
    } else if [&grant.client_secret_file, &grant.subject_token_file]
        .iter()
        .any(|f| f.as_ref().is_some_and(|f| !f.is_absolute()))
    {
        Some("clientSecretFile and subjectTokenFile: absolute paths".to_owned())
    } else {
        None
    };
    if let Some(problem) = problem {
        return Err(format!("{at}.{problem}"));
    }
    Ok((grant, exchange, uri))
}
