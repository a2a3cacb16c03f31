//! `oauth`'s tests: the typed `auth`, the token request's form, the cache and its expiry,
//! one request at a time, a 401's drop, the endpoint's bounds and refusals, masking.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;
use crate::bridge::upstream::http_client;

fn secret_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn temp() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "oauth-test-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn cc(url: &str, secret: &Path) -> Value {
    json!({"oauth2ClientCredentials": {
        "tokenURL": url, "clientID": "bridge", "clientSecretFile": secret,
        "scopes": ["mcp:tools", "b"], "resource": "http://mcp.example/mcp", "audience": "aud"
    }})
}

/// A token endpoint stand-in: every request's head and body recorded, each answered with
/// the next of `answers` (the last one repeated).
async fn endpoint(answers: Vec<(u16, String)>) -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/token", listener.local_addr().unwrap());
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        let mut index = 0;
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let mut buffer = vec![0u8; 65536];
            let mut read = 0;
            loop {
                let n = socket.read(&mut buffer[read..]).await.unwrap_or(0);
                read += n;
                let text = String::from_utf8_lossy(&buffer[..read]).to_string();
                if n == 0
                    || text.split_once("\r\n\r\n").is_some_and(|(head, body)| {
                        let length = head
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length: ")
                                    .map(str::to_owned)
                            })
                            .and_then(|l| l.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        body.len() >= length
                    })
                {
                    break;
                }
            }
            record
                .lock()
                .unwrap()
                .push(String::from_utf8_lossy(&buffer[..read]).to_string());
            let (status, body) = answers[index.min(answers.len() - 1)].clone();
            index += 1;
            let answer = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(answer.as_bytes()).await;
        }
    });
    (url, seen)
}

fn ok(token: &str, expires_in: f64) -> (u16, String) {
    (
        200,
        json!({"access_token": token, "token_type": "Bearer", "expires_in": expires_in}).to_string(),
    )
}

#[test]
fn auth_is_typed_and_its_bounds_are_refused_by_name() {
    let dir = temp();
    let secret = secret_file(&dir, "s", "x");
    assert!(OAuth::new(&cc("https://as.example/token", &secret)).is_ok());
    let both = json!({"oauth2ClientCredentials": cc("http://a/t", &secret)["oauth2ClientCredentials"],
        "tokenExchange": {"tokenURL": "http://a/t", "subjectTokenFile": "/t", "resource": "http://r/"}});
    assert!(OAuth::new(&both).err().unwrap().contains("exactly one"));
    let mut bad = cc("ftp://a/t", &secret);
    assert!(OAuth::new(&bad).err().unwrap().contains("tokenURL"));
    bad = cc("http://a/t", &secret);
    bad["oauth2ClientCredentials"]["scopes"] = json!(vec!["s"; 33]);
    assert!(OAuth::new(&bad).err().unwrap().contains("scopes"));
    bad = cc("http://a/t", &secret);
    bad["oauth2ClientCredentials"]["clientSecretFile"] = json!("relative");
    assert!(OAuth::new(&bad).err().unwrap().contains("absolute"));
    bad = cc("http://a/t", &secret);
    bad["oauth2ClientCredentials"]["extra"] = json!(1);
    assert!(OAuth::new(&bad).err().unwrap().contains("unknown field"));
    let exchange = json!({"tokenExchange": {"tokenURL": "http://a/t", "resource": "http://r/"}});
    assert!(OAuth::new(&exchange).err().unwrap().contains("subjectTokenFile"));
}

#[test]
fn the_forms_carry_resource_audience_scope_and_the_grant() {
    let dir = temp();
    let secret = secret_file(&dir, "s", "p@ss word\n");
    let oauth = OAuth::new(&cc("http://a/t", &secret)).unwrap();
    let (form, basic) = oauth.request_parts().unwrap();
    assert_eq!(
        form_encode(&form),
        "grant_type=client_credentials&resource=http%3A%2F%2Fmcp.example%2Fmcp&audience=aud&scope=mcp%3Atools+b"
    );
    let pair = base64::engine::general_purpose::STANDARD.encode("bridge:p%40ss%20word");
    assert_eq!(basic.unwrap(), format!("Basic {pair}"));
    let subject = secret_file(&dir, "t", "eyJsubject\n");
    let exchange = OAuth::new(&json!({"tokenExchange": {"tokenURL": "http://a/t",
        "subjectTokenFile": subject, "resource": "http://r/", "clientID": "pub"}}))
    .unwrap();
    let (form, basic) = exchange.request_parts().unwrap();
    assert_eq!(
        form_encode(&form),
        "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Atoken-exchange&subject_token=eyJsubject\
         &subject_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Ajwt\
         &requested_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aaccess_token\
         &resource=http%3A%2F%2Fr%2F&client_id=pub"
    );
    assert!(basic.is_none());
    std::fs::remove_file(&subject).unwrap();
    let Err(Failure::Unauthorized { why, .. }) = exchange.request_parts() else {
        panic!()
    };
    assert!(why.contains("could not be read") && !why.contains("eyJ"), "{why}");
}

#[tokio::test]
async fn a_token_is_cached_obtained_once_for_concurrent_callers_and_dropped_on_401() {
    let dir = temp();
    let secret = secret_file(&dir, "s", "topsecret");
    let (url, seen) = endpoint(vec![ok("tok-one-1234567", 3600.0), ok("tok-two-1234567", 3600.0)]).await;
    let oauth = Arc::new(OAuth::new(&cc(&url, &secret)).unwrap());
    let client = http_client();
    let calls: Vec<_> = (0..10)
        .map(|_| {
            let (oauth, client) = (oauth.clone(), client.clone());
            tokio::spawn(async move { oauth.bearer(&client).await })
        })
        .collect();
    for call in calls {
        assert_eq!(call.await.unwrap().unwrap(), "tok-one-1234567");
    }
    assert_eq!(oauth.requests.load(Ordering::Relaxed), 1);
    let head = seen.lock().unwrap()[0].to_ascii_lowercase();
    assert!(
        head.starts_with("post /token") && head.contains("authorization: basic "),
        "{head}"
    );
    oauth.rejected("some-older-token"); // another token's 401 keeps this one
    assert_eq!(oauth.current().unwrap(), "tok-one-1234567");
    oauth.rejected("tok-one-1234567");
    assert_eq!(oauth.bearer(&client).await.unwrap(), "tok-two-1234567");
    assert_eq!(oauth.requests.load(Ordering::Relaxed), 2);
    let masked = oauth.mask(json!({"echo": "Bearer tok-two-1234567"}));
    assert_eq!(masked, json!({"echo": "***"}));
    assert_eq!(oauth.mask_text("got tok-two-1234567"), "got ***");
}

#[tokio::test]
async fn a_token_is_replaced_shortly_before_it_expires() {
    let dir = temp();
    let secret = secret_file(&dir, "s", "topsecret");
    // 1 s: replaced 0.1 s early; no expires_in: five minutes.
    let (url, _) = endpoint(vec![ok("short-lived-1", 1.0), ok("next-token-22", 0.0)]).await;
    let oauth = OAuth::new(&cc(&url, &secret)).unwrap();
    let client = http_client();
    assert_eq!(oauth.bearer(&client).await.unwrap(), "short-lived-1");
    assert_eq!(oauth.bearer(&client).await.unwrap(), "short-lived-1");
    tokio::time::sleep(Duration::from_millis(950)).await;
    assert_eq!(oauth.bearer(&client).await.unwrap(), "next-token-22");
    assert_eq!(oauth.bearer(&client).await.unwrap(), "next-token-22");
    assert_eq!(oauth.requests.load(Ordering::Relaxed), 2);
}

#[tokio::test]
async fn refusals_and_bad_answers_are_named_without_a_secret() {
    let dir = temp();
    let secret = secret_file(&dir, "s", "topsecret");
    let client = http_client();
    let cases = [
        (
            (400, json!({"error": "invalid_client"}).to_string()),
            false,
            "refused client bridge with HTTP 400 (invalid_client)",
        ),
        (
            (400, json!({"error": "invalid_scope"}).to_string()),
            true,
            "refused the scopes asked for by client bridge (invalid_scope)",
        ),
        (
            (400, json!({"error": "invalid_target"}).to_string()),
            false,
            "check its resource, audience and grant",
        ),
        ((500, "oops".to_owned()), false, "answered HTTP 500"),
        ((200, "not json".to_owned()), false, "a body that is not JSON"),
        (
            (
                200,
                json!({"access_token": "abc", "token_type": "mac"}).to_string(),
            ),
            false,
            "not Bearer",
        ),
        (
            (200, json!({"token_type": "Bearer"}).to_string()),
            false,
            "no usable access_token",
        ),
        (
            (200, "x".repeat(MAX_TOKEN_RESPONSE_BYTES + 1)),
            false,
            "more than 65536 bytes",
        ),
    ];
    for (answer, scope, words) in cases {
        let (url, _) = endpoint(vec![answer]).await;
        let oauth = OAuth::new(&cc(&url, &secret)).unwrap();
        match oauth.bearer(&client).await {
            Err(Failure::Unauthorized {
                insufficient_scope,
                why,
            }) => {
                assert_eq!(insufficient_scope, scope, "{why}");
                assert!(why.contains(words) && !why.contains("topsecret"), "{why}");
            }
            other => panic!("{words}: {:?}", other.map(|_| ())),
        }
    }
    let (url, _) = endpoint(vec![(503, "{}".to_owned())]).await;
    let oauth = OAuth::new(&cc(&url, &secret)).unwrap();
    assert!(matches!(
        oauth.bearer(&client).await,
        Err(Failure::Unavailable(_))
    ));
}

#[tokio::test]
async fn a_silent_token_endpoint_fails_within_its_bound() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/token", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket); // never answers
        }
    });
    let dir = temp();
    let oauth = OAuth::new(&cc(&url, &secret_file(&dir, "s", "x"))).unwrap();
    tokio::time::pause();
    let failure = oauth.bearer(&http_client()).await.err().unwrap();
    assert!(
        failure.describe().contains("did not answer within 10s"),
        "{failure:?}"
    );
}

#[test]
fn the_client_secret_is_a_value_to_mask_and_urls_are_shown_without_userinfo() {
    let dir = temp();
    let secret = secret_file(&dir, "s", "topsecret\n");
    assert_eq!(secret_values(&cc("http://a/t", &secret)), ["topsecret"]);
    assert_eq!(
        display_url("https://u:p@as.example:8443/token?x=1"),
        "https://as.example:8443/token"
    );
}

#[test]
fn a_jwt_names_its_subject_and_actor_for_the_audit() {
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(json!({"sub": "system:serviceaccount:a:b", "act": {"sub": "exchanger"}}).to_string());
    let (subject, actor) = jwt_subject_and_actor(&format!("eyJhbGciOiJub25lIn0.{payload}.sig"));
    assert_eq!(subject.as_deref(), Some("system:serviceaccount:a:b"));
    assert_eq!(actor.as_deref(), Some("exchanger"));
    assert_eq!(jwt_subject_and_actor("opaque-token"), (None, None));
}

#[tokio::test]
async fn a_token_url_the_egress_guard_refuses_is_never_contacted() {
    let dir = temp();
    let oauth = OAuth::new(&cc("http://169.254.169.254/token", &secret_file(&dir, "s", "x"))).unwrap();
    let failure = oauth.bearer(&http_client()).await.err().unwrap();
    let Failure::Unauthorized { why, .. } = failure else {
        panic!("{failure:?}")
    };
    let words = "the token endpoint http://169.254.169.254/token was not contacted: \
                 refused to connect to 169.254.169.254 is a cloud metadata address";
    assert!(why.starts_with(words), "{why}");
    assert_eq!(oauth.current(), None);
}
