//! The run's approval webhook (`WebhookApprover` of `bridge/approval.py`): a `POST` of the
//! held call as JSON (`id` and `time` so the receiver can refuse a replay; run, identity,
//! server, exposed and original tool, the arguments whole as they would be sent, the rule
//! and its reason), signed with HMAC-SHA256 over the exact body with the key of a mounted
//! Secret, read at each question (`X-Mcp-Operator-Signature: sha256=<hex>`), on the bridge's
//! keep-alive client. The answer is read up to [`MAX_ANSWER_BYTES`] and must be `200` with
//! `{"approved": true|false, "by": "..."}`; anything else, or no answer within the webhook's
//! `timeoutSeconds`, refuses the call. `by` is made printable ASCII and cut, so that who
//! answered cannot forge a line of the audit trail.

use std::time::Duration;

use bytes::Bytes;
use hmac::{Hmac, Mac};
use http_body_util::{BodyExt, Full, Limited};
use hyper::Request;
use serde_json::{Value, json};
use sha2::Sha256;

use super::settings::ApprovalWebhook;
use crate::bridge::naming::hex;
use crate::bridge::upstream::HttpClient;

pub const SIGNATURE_HEADER: &str = "X-Mcp-Operator-Signature";
/// The most of the webhook's answer that is read; a longer one is not an answer.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// Who answered, as the audit line and the hint name them, at most this long.
const MAX_BY_CHARS: usize = 128;

/// What the webhook said, or why it said nothing.
#[derive(Debug, PartialEq)]
pub enum Answer {
    /// Approved or not, and by whom.
    Verdict(bool, Option<String>),
    /// Its signing key could not be read: nothing was sent.
    KeyUnreadable,
    /// Not reached, or its answer was lost or too long.
    Unreached,
    /// An answer that is not one (the HTTP status).
    NotUnderstood(u16),
    /// No answer within its `timeoutSeconds`.
    Timeout,
}

/// The value of [`SIGNATURE_HEADER`] for `body`: `sha256=<hex HMAC-SHA256>`.
pub fn signature(key: &[u8], body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(body);
    format!("sha256={}", hex(&mac.finalize().into_bytes()))
}

/// The held call as the webhook is sent it (`id` and `time` given).
pub struct Question<'a> {
    pub run: &'a str,
    pub identity: Option<&'a Value>,
    pub server: &'a str,
    pub tool: &'a str,
    pub original: &'a str,
    pub arguments: &'a Value,
    pub rule: &'a str,
    pub reason: Option<&'a str>,
}

/// The body of the request: compact JSON.
pub fn body(question: &Question<'_>, id: &str, time: &str) -> Vec<u8> {
    let message = json!({
        "id": id,
        "time": time,
        "run": question.run,
        "identity": question.identity,
        "server": question.server,
        "tool": question.tool,
        "originalTool": question.original,
        "arguments": question.arguments,
        "rule": question.rule,
        "reason": question.reason,
    });
    serde_json::to_vec(&message).expect("a Value always encodes")
}

/// `(approved, by)` of the webhook's answer; None when it is not one.
pub fn verdict(status: u16, answer: &[u8]) -> Option<(bool, Option<String>)> {
    if status != 200 {
        return None;
    }
    let parsed: Value = serde_json::from_slice(answer).ok()?;
    let approved = parsed.as_object()?.get("approved")?.as_bool()?;
    let by = parsed
        .get("by")
        .and_then(Value::as_str)
        .filter(|by| !by.is_empty())
        .map(|by| {
            by.chars()
                .map(|c| if (' '..='~').contains(&c) { c } else { '?' })
                .take(MAX_BY_CHARS)
                .collect()
        });
    Some((approved, by))
}

/// Ask the webhook about the call whose request body is `body`.
pub async fn ask(client: &HttpClient, webhook: &ApprovalWebhook, body: Vec<u8>) -> Answer {
    let path = webhook.secret_file.clone();
    let key = tokio::task::spawn_blocking(move || std::fs::read(path)).await;
    let Ok(Ok(key)) = key else {
        tracing::error!(
            "Approval webhook key {} unreadable",
            webhook.secret_file.display()
        );
        return Answer::KeyUnreadable;
    };
    let key = key.trim_ascii();
    let signed = signature(key, &body);
    let request = Request::post(webhook.url.as_str())
        .header("content-type", "application/json")
        .header(SIGNATURE_HEADER, signed)
        .body(Full::new(Bytes::from(body)));
    let Ok(request) = request else {
        return Answer::Unreached;
    };
    let exchange = async {
        let response = client.request(request).await.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let answer = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>((status, answer.to_bytes()))
    };
    let seconds = Duration::from_secs(webhook.timeout_seconds);
    match tokio::time::timeout(seconds, exchange).await {
        Err(_) => Answer::Timeout,
        Ok(Err(why)) => {
            tracing::warn!("Approval webhook not reached: {why}");
            Answer::Unreached
        }
        Ok(Ok((status, answer))) => match verdict(status, &answer) {
            Some((approved, by)) => Answer::Verdict(approved, by),
            None => Answer::NotUnderstood(status),
        },
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::net::SocketAddr;
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn only_a_clear_answer_approves_and_who_answered_cannot_forge_an_audit_line() {
        type Expected<'a> = Option<(bool, Option<&'a str>)>;
        let cases: [(u16, &[u8], Expected); 7] = [
            (
                200,
                br#"{"approved": true, "by": "alice"}"#,
                Some((true, Some("alice"))),
            ),
            (200, br#"{"approved": false}"#, Some((false, None))),
            (201, br#"{"approved": true}"#, None),
            (200, b"yes", None),
            (200, br#"{"approved": "true"}"#, None),
            (200, br#"["approved"]"#, None),
            (
                200,
                br#"{"approved": true, "by": "eve\n{\"outcome\":\"ok\"}\u0000"}"#,
                Some((true, Some(r#"eve?{"outcome":"ok"}?"#))),
            ),
        ];
        for (status, answer, expected) in cases {
            let expected = expected.map(|(a, by)| (a, by.map(str::to_owned)));
            assert_eq!(
                verdict(status, answer),
                expected,
                "{}",
                String::from_utf8_lossy(answer)
            );
        }
        let long = format!(r#"{{"approved": true, "by": "{}"}}"#, "a".repeat(500));
        let (_, by) = verdict(200, long.as_bytes()).unwrap();
        assert_eq!(by.unwrap().len(), MAX_BY_CHARS);
    }

    #[test]
    fn the_signature_is_hmac_sha256_of_the_exact_body() {
        // RFC 4231, test case 2.
        assert_eq!(
            signature(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    /// A webhook on loopback that answers every POST with `status` and `answer` after
    /// `delay`, and records the signature and body it got.
    pub(in crate::bridge::approval) async fn webhook(
        status: u16,
        answer: &'static str,
        delay: Duration,
    ) -> (SocketAddr, tokio::sync::mpsc::Receiver<(String, Vec<u8>)>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (seen, heard) = tokio::sync::mpsc::channel(8);
        tokio::spawn(crate::http::serve(
            listener,
            Duration::from_secs(5),
            move |request, _| {
                let seen = seen.clone();
                async move {
                    let signed = crate::http::header(&request, SIGNATURE_HEADER)
                        .unwrap_or_default()
                        .to_owned();
                    let body = request.into_body().collect().await.unwrap().to_bytes();
                    let _ = seen.send((signed, body.to_vec())).await;
                    tokio::time::sleep(delay).await;
                    crate::http::json(status, &serde_json::from_str(answer).unwrap())
                }
            },
        ));
        (address, heard)
    }

    fn settings(address: SocketAddr, key: PathBuf, seconds: u64) -> ApprovalWebhook {
        ApprovalWebhook {
            url: format!("http://{address}/approve"),
            timeout_seconds: seconds,
            secret_file: key,
        }
    }

    pub(in crate::bridge::approval) fn key_file(name: &str) -> PathBuf {
        let path = std::env::temp_dir().join(format!("approval-{name}-{}", std::process::id()));
        std::fs::write(&path, b"the-key\n").unwrap();
        path
    }

    #[tokio::test]
    async fn the_webhook_is_sent_the_signed_body_and_its_answer_decides() {
        let (address, mut heard) = webhook(200, r#"{"approved": false, "by": "bob"}"#, Duration::ZERO).await;
        let key = key_file("signed");
        let client = crate::bridge::upstream::http_client();
        let body = br#"{"tool":"rug_wipe"}"#.to_vec();
        let answer = ask(&client, &settings(address, key.clone(), 5), body.clone()).await;
        assert_eq!(answer, Answer::Verdict(false, Some("bob".to_owned())));
        let (signed, got) = heard.recv().await.unwrap();
        assert_eq!(got, body);
        assert_eq!(
            signed,
            signature(b"the-key", &body),
            "the key's trailing newline is not signed"
        );
        let _ = std::fs::remove_file(key);
    }

    #[tokio::test]
    async fn a_slow_a_wrong_or_a_missing_answer_is_no_approval() {
        let key = key_file("wrong");
        let client = crate::bridge::upstream::http_client();
        let (slow, _heard) = webhook(200, r#"{"approved": true}"#, Duration::from_secs(3)).await;
        let answer = ask(&client, &settings(slow, key.clone(), 1), b"{}".to_vec()).await;
        assert_eq!(answer, Answer::Timeout);
        let (wrong, _heard) = webhook(500, r#"{"approved": true}"#, Duration::ZERO).await;
        let answer = ask(&client, &settings(wrong, key.clone(), 5), b"{}".to_vec()).await;
        assert_eq!(answer, Answer::NotUnderstood(500));
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let nobody = closed.local_addr().unwrap();
        drop(closed);
        let answer = ask(&client, &settings(nobody, key.clone(), 5), b"{}".to_vec()).await;
        assert_eq!(answer, Answer::Unreached);
        let missing = settings(nobody, PathBuf::from("/nonexistent/approval-key"), 5);
        assert_eq!(
            ask(&client, &missing, b"{}".to_vec()).await,
            Answer::KeyUnreadable
        );
        let _ = std::fs::remove_file(key);
    }

    #[tokio::test]
    async fn a_webhook_at_a_metadata_address_is_refused_by_the_egress_policy() {
        let key = key_file("metadata");
        let client = crate::bridge::upstream::http_client();
        let metadata = "169.254.169.254:80".parse().unwrap();
        let answer = ask(&client, &settings(metadata, key.clone(), 5), b"{}".to_vec()).await;
        assert_eq!(answer, Answer::Unreached);
        let _ = std::fs::remove_file(key);
    }
}
