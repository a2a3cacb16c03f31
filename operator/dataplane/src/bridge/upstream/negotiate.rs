//! The era negotiated with a server: `server/discover` first at the newest 2026-07-28
//! revision (straight to the handshake when the server's status named a handshake
//! revision), a mutual revision retried once, any other rejection falling back to
//! `initialize` + `notifications/initialized`; and whether the server announces list changes.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::{Failure, Negotiated, Upstream, client_info};
use crate::era;

/// `server/discover` unanswered this long: a legacy server.
const DISCOVER_SECONDS: u64 = 10;

impl Upstream {
    /// Negotiate the era (`server/discover`, else the handshake).
    pub(super) async fn negotiate(&self) -> Result<Negotiated, Failure> {
        if self.is_legacy_sse() {
            self.sse_open().await?; // the stream first; the handshake's era only
            return self.initialize().await;
        }
        let hint = self.server.protocol_version.as_deref();
        if hint.is_some_and(era::is_handshake_version) {
            return self.initialize().await;
        }
        let mut version = era::latest_modern_version().to_owned();
        for attempt in 0..2 {
            let probe = Negotiated {
                protocol_version: version.clone(),
                session_id: None,
                modern: true,
                list_changed: false,
                capabilities: Value::Null,
            };
            let asked = self.exchange(&probe, "server/discover", Map::new(), None);
            let answered = match tokio::time::timeout(Duration::from_secs(DISCOVER_SECONDS), asked).await {
                Err(_) => return self.initialize().await,
                Ok(answered) => answered,
            };
            match answered {
                Ok((result, _)) => {
                    let supported: Vec<&str> = result
                        .get("supportedVersions")
                        .and_then(Value::as_array)
                        .map(|v| v.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    let Some(mutual) = era::modern_versions_in(&supported) else {
                        return self.initialize().await;
                    };
                    return Ok(Negotiated {
                        protocol_version: mutual,
                        session_id: None,
                        modern: true,
                        list_changed: announces_changes(&result),
                        capabilities: result.get("capabilities").cloned().unwrap_or_else(|| json!({})),
                    });
                }
                Err(Failure::Rpc { code, data, .. })
                    if code == crate::jsonrpc::UNSUPPORTED_PROTOCOL_VERSION =>
                {
                    let supported: Vec<&str> = data
                        .as_ref()
                        .and_then(|d| d.get("supported"))
                        .and_then(Value::as_array)
                        .map(|v| v.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    if let Some(mutual) = era::modern_versions_in(&supported)
                        && attempt == 0
                    {
                        version = mutual;
                        continue;
                    }
                    return self.initialize().await;
                }
                Err(failure @ (Failure::Unavailable(_) | Failure::Misconfigured(_) | Failure::Timeout)) => {
                    return Err(failure);
                }
                Err(denied @ Failure::Denied { .. }) => return Err(denied),
                Err(_) => return self.initialize().await,
            }
        }
        self.initialize().await
    }

    async fn initialize(&self) -> Result<Negotiated, Failure> {
        let latest = rmcp::model::ProtocolVersion::LATEST_WITH_INITIALIZE
            .as_str()
            .to_owned();
        let fresh = Negotiated::default();
        // A legacy server's one session serves every agent: it is told all the bridge can
        // relay (a server offers some tools only to clients that declared sampling); each of
        // its requests is then checked against what its own agent declared (`relay`).
        let params = json!({
            "protocolVersion": latest,
            "capabilities": {"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {}},
            "clientInfo": client_info(),
        });
        let Value::Object(params) = params else {
            unreachable!()
        };
        let (result, session_id) = self.exchange(&fresh, "initialize", params, None).await?;
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if !era::is_handshake_version(&version) {
            return Err(Failure::Unavailable(format!(
                "the server chose protocol version {version}, which this client does not speak"
            )));
        }
        let negotiated = Negotiated {
            protocol_version: version,
            session_id,
            modern: false,
            list_changed: announces_changes(&result),
            capabilities: result.get("capabilities").cloned().unwrap_or_else(|| json!({})),
        };
        self.post(&negotiated, "notifications/initialized", None, None, None)
            .await?;
        Ok(negotiated)
    }
}

/// Whether an InitializeResult or DiscoverResult declares `tools.listChanged` or
/// `prompts.listChanged`.
fn announces_changes(result: &Value) -> bool {
    [
        "/capabilities/tools/listChanged",
        "/capabilities/prompts/listChanged",
    ]
    .iter()
    .any(|pointer| result.pointer(pointer) == Some(&Value::Bool(true)))
}
