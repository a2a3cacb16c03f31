//! Protocol eras as our servers serve them: which era a request speaks, the 2026-07-28
//! admission of a request, and the answers a server side gives itself per era.
//!
//! The revisions come from the official SDK (`rmcp::model::ProtocolVersion`): a
//! `MCP-Protocol-Version` header naming anything but a handshake revision routes to the
//! stateless 2026-07-28 entry, whose ladder then refuses what it does not serve. Pure: no
//! I/O. Leaves who the server is (its InitializeResult) to the caller. Modules:
//!
//! - this one    the revisions of each era, the `_meta` keys, the methods per era
//! - `admission` a 2026-07-28 request admitted or refused: envelope, routing headers, version
//! - `answers`   our own answers per era: negotiation, InitializeResult, `server/discover`,
//!   the envelope stripped, a result shaped for 2026-07-28

mod admission;
mod answers;

use rmcp::model::ProtocolVersion;

pub use admission::{Admission, RoutingHeaders, classify_modern, decode_header_value, encode_header_value};
pub use answers::{discover_result, initialize_result, modern_result, negotiate_version, strip_envelope};

pub const PROTOCOL_VERSION_META_KEY: &str = "io.modelcontextprotocol/protocolVersion";
pub const CLIENT_INFO_META_KEY: &str = "io.modelcontextprotocol/clientInfo";
pub const CLIENT_CAPABILITIES_META_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
pub const LOG_LEVEL_META_KEY: &str = "io.modelcontextprotocol/logLevel";
pub const SERVER_INFO_META_KEY: &str = "io.modelcontextprotocol/serverInfo";

/// The requests a 2026-07-28 client may send (no `ping`, `initialize`, `logging/setLevel`
/// or subscriptions of the session era).
pub const MODERN_REQUESTS: [&str; 10] = [
    "completion/complete",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "server/discover",
    "subscriptions/listen",
    "tools/call",
    "tools/list",
];

/// The requests whose 2026-07-28 result may be `input_required`.
pub const INPUT_REQUIRED_METHODS: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];

fn handshake_versions() -> impl Iterator<Item = &'static ProtocolVersion> {
    ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .filter(|v| v.has_initialize())
}

fn modern_versions() -> impl Iterator<Item = &'static ProtocolVersion> {
    ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .filter(|v| !v.has_initialize())
}

/// The newest 2026-07-28-era revision we speak.
pub fn latest_modern_version() -> &'static str {
    modern_versions()
        .last()
        .map_or("2026-07-28", ProtocolVersion::as_str)
}

/// The newest revision without a handshake that we and a peer (`supported`) both speak.
pub fn modern_versions_in(supported: &[&str]) -> Option<String> {
    modern_versions()
        .filter(|v| supported.contains(&v.as_str()))
        .last()
        .map(|v| v.as_str().to_owned())
}

pub fn is_handshake_version(version: &str) -> bool {
    handshake_versions().any(|v| v.as_str() == version)
}

/// Whether an `MCP-Protocol-Version` header routes the request to the stateless era.
pub fn is_modern(version_header: Option<&str>) -> bool {
    version_header.is_some_and(|v| !is_handshake_version(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handshake_version_header_is_the_legacy_era() {
        assert!(!is_modern(None) && !is_modern(Some("2025-06-18")));
        assert!(is_modern(Some("2026-07-28")) && is_modern(Some("1999-01-01")));
    }
}
