//! The approval step (`tests/unit/test_bridge_agent_approval.py` and the approval cases of
//! `test_bridge_pipeline.py` / `test_bridge_policies.py`), and the three defects of the
//! Python bridge this one does not have: an agent approving its own calls in a run with a
//! webhook, a question that cuts the arguments, an answer that was not asked for.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::webhook::tests::{key_file, webhook};
use super::*;
use crate::bridge::audit::AuditSink;
use crate::bridge::relay::ToAgent;
use crate::bridge::relay::tests::relay;

fn tool(original: &str, annotations: Value) -> Value {
    json!({"name": original, "inputSchema": {"type": "object"}, "annotations": annotations})
}

fn entry(original: &str, annotations: Value) -> Entry {
    let tool = tool(original, annotations);
    Entry {
        server: 0,
        original: original.to_owned(),
        sha256: crate::bridge::pins::definition_digest(&tool),
        tool: tool.clone(),
        schema: crate::bridge::validate::compile(None),
        fixed: serde_json::Map::new(),
        drift: None,
        annotations: tool["annotations"].as_object().cloned().unwrap_or_default(),
    }
}

/// A bridge with one server `team/docs` (prefix `docs`), its `policy` and more of its entry
/// (`extra`), and the run's `approval` settings (YAML, or empty).
fn core(policy: &str, extra: &str, approval: &str) -> Arc<Core> {
    let text = format!(
        "apiVersion: mcp-operator.dev/v1alpha1\nkind: BridgeConfig\nrun: {{name: r1, namespace: team}}\nidentity: {{namespace: team, serviceAccount: researcher}}\nservers:\n- {{name: docs, namespace: team, url: 'http://127.0.0.1:9/mcp', prefix: docs, policy: {policy}{extra}}}\n{approval}"
    );
    let config = crate::bridge::config::parse(&text, "test").expect("a valid configuration");
    let audit = AuditSink::open(false, None).expect("no file to open");
    Core::new(config, audit, Duration::from_secs(60))
}

fn held() -> Arc<Core> {
    core("{requireApproval: [wipe]}", "", "")
}

/// Answer the bridge's one question with `answer`, checking it is fresh; what it asked.
async fn agent(mut from_call: mpsc::Receiver<ToAgent>, answer: Value) -> Value {
    let Some(ToAgent::Ask(asked)) = from_call.recv().await else {
        panic!("the agent was asked");
    };
    assert!(
        asked.fresh,
        "the bridge's own question takes no answer given before it"
    );
    let _ = asked.answer.send(Ok(answer));
    asked.request
}

const YES: &str = r#"{"action": "accept", "content": {"approve": true}}"#;

#[test]
fn require_approval_matches_the_original_or_the_exposed_name() {
    let bridge = core("{requireApproval: ['wi*', docs_drop]}", "", "");
    assert_eq!(
        bridge.held(&entry("wipe", json!({})), "docs_wipe"),
        Some(Hold::source("requireApproval"))
    );
    assert!(bridge.held(&entry("drop", json!({})), "docs_drop").is_some());
    assert!(bridge.held(&entry("read", json!({})), "docs_read").is_none());
}

#[test]
fn approve_destructive_reads_only_the_pinned_annotations() {
    let pins = |annotations: Value| {
        let digest = crate::bridge::pins::definition_digest(&tool("t", annotations));
        format!(", toolDigests: {{t: '{digest}'}}")
    };
    for (annotations, destructive) in [
        (json!({"readOnlyHint": true}), false),
        (json!({"destructiveHint": false}), false),
        (json!({"destructiveHint": true}), true),
        (json!({}), true), // the MCP default is destructive
        (json!({"readOnlyHint": false, "destructiveHint": false}), false),
    ] {
        let bridge = core("{approveDestructive: true}", &pins(annotations.clone()), "");
        let hold = bridge.held(&entry("t", annotations.clone()), "docs_t");
        assert_eq!(hold.is_some(), destructive, "{annotations}");
    }
    // Unpinned (no pins, or pinning off): the server's hints are not trusted.
    let read_only = json!({"readOnlyHint": true});
    for extra in [
        String::new(),
        format!("{}, pinning: 'off'", pins(read_only.clone())),
    ] {
        let bridge = core("{approveDestructive: true}", &extra, "");
        let hold = bridge.held(&entry("t", read_only.clone()), "docs_t");
        assert_eq!(hold, Some(Hold::source("approveDestructive")), "{extra}");
    }
    assert!(
        core("{}", "", "")
            .held(&entry("t", json!({})), "docs_t")
            .is_none()
    );
}

#[tokio::test]
async fn without_anyone_to_ask_a_held_call_is_refused() {
    let bridge = held();
    let wipe = entry("wipe", json!({}));
    let mut policy = None;
    let hold = Hold::source("requireApproval");
    let refusal = bridge
        .approve(&hold, &wipe, "docs_wipe", &json!({}), None, &mut policy)
        .await;
    let refusal = refusal.expect("refused");
    assert_eq!(refusal.code, "approval_denied");
    assert!(
        refusal.hint.contains("no approver configured"),
        "{}",
        refusal.hint
    );
    assert_eq!(refusal.details["approval"], "unavailable");
    assert_eq!(policy, Some(json!({"approval": {"decision": "unavailable"}})));
    // An agent that did not declare elicitation is never asked.
    let (sampling, mut from_call, _cancel) = relay(&["sampling"], None);
    let mut policy = None;
    let refusal = bridge
        .approve(
            &hold,
            &wipe,
            "docs_wipe",
            &json!({}),
            Some(&Arc::new(sampling)),
            &mut policy,
        )
        .await;
    assert_eq!(refusal.unwrap().code, "approval_denied");
    assert!(from_call.try_recv().is_err());
}

#[tokio::test]
async fn an_accept_approves_and_a_decline_refuses_recording_the_agent() {
    let bridge = held();
    let wipe = entry("wipe", json!({}));
    let hold = Hold::rule("server rule 0".to_owned(), Some("wipes are reviewed".to_owned()));
    for (answer, approved) in [(YES, true), (r#"{"action": "decline"}"#, false)] {
        let (asked, from_call, _cancel) = relay(&["elicitation"], None);
        let answering = tokio::spawn(agent(from_call, serde_json::from_str(answer).unwrap()));
        let mut policy = None;
        let arguments = json!({"path": "/x"});
        let refusal = bridge
            .approve(
                &hold,
                &wipe,
                "docs_wipe",
                &arguments,
                Some(&Arc::new(asked)),
                &mut policy,
            )
            .await;
        let request = answering.await.unwrap();
        let message = request["params"]["message"].as_str().unwrap();
        assert!(message.contains(r#""path":"/x""#) && message.contains("(wipes are reviewed)"));
        let approval = &policy.unwrap()["approval"];
        assert_eq!(approval["by"], "agent");
        assert!(approval["waitedMs"].as_f64().unwrap() >= 0.0);
        if approved {
            assert!(refusal.is_none());
            assert_eq!(approval["decision"], "approved");
        } else {
            let refusal = refusal.unwrap();
            assert_eq!(
                (refusal.code, &approval["decision"]),
                ("approval_denied", &json!("denied"))
            );
            assert!(
                refusal.hint.contains("refused by agent") && refusal.hint.contains("(wipes are reviewed)")
            );
            assert_eq!(refusal.details["rule"], "server rule 0");
        }
    }
}

#[tokio::test]
async fn no_answer_in_time_is_approval_timeout() {
    let bridge = core(
        "{requireApproval: [wipe]}",
        "",
        "approval: {elicitation: {timeoutSeconds: 1}}\n",
    );
    let (asked, _from_call, _cancel) = relay(&["elicitation"], None);
    let mut policy = None;
    let hold = Hold::source("requireApproval");
    let wipe = entry("wipe", json!({}));
    let refusal = bridge
        .approve(
            &hold,
            &wipe,
            "docs_wipe",
            &json!({}),
            Some(&Arc::new(asked)),
            &mut policy,
        )
        .await
        .unwrap();
    assert_eq!(refusal.code, "approval_timeout");
    assert!(
        refusal.hint.contains("nobody answered within 1 s")
            && refusal.hint.contains("no answer is a refusal")
    );
    assert_eq!(refusal.details["timeoutSeconds"], json!(1.0));
    let approval = &policy.unwrap()["approval"];
    assert_eq!(
        (&approval["decision"], &approval["by"]),
        (&json!("timeout"), &json!("agent"))
    );
    assert!(approval["waitedMs"].as_f64().unwrap() >= 990.0);
}

#[tokio::test]
async fn an_agent_that_cancels_its_held_call_ends_it_cancelled() {
    let bridge = held();
    let (asked, _from_call, cancel) = relay(&["elicitation"], None);
    let asked = Arc::new(asked);
    let cancelling = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        cancel.send_replace(Some("gone".to_owned()));
        cancel
    });
    let mut policy = None;
    let hold = Hold::source("requireApproval");
    let wipe = entry("wipe", json!({}));
    let refusal = bridge
        .approve(&hold, &wipe, "docs_wipe", &json!({}), Some(&asked), &mut policy)
        .await;
    assert_eq!(refusal.unwrap().code, "cancelled");
    assert!(policy.is_none());
    drop(cancelling.await);
}

/// Defect (a) of the Python bridge: with a webhook configured, an agent that declared
/// elicitation is not asked; the webhook (set to refuse) is, and wins.
#[tokio::test]
async fn with_a_webhook_configured_only_the_webhook_decides() {
    let (address, mut heard) = webhook(200, r#"{"approved": false, "by": "bob"}"#, Duration::ZERO).await;
    let key = key_file("only-webhook");
    let approval = format!(
        "approval: {{webhook: {{url: 'http://{address}/approve', timeoutSeconds: 5, secretFile: '{}'}}}}\n",
        key.display()
    );
    let bridge = core("{requireApproval: [wipe]}", "", &approval);
    let (asked, mut from_call, _cancel) = relay(&["elicitation"], None);
    let mut policy = None;
    let hold = Hold::source("requireApproval");
    let wipe = entry("wipe", json!({}));
    let padding = "p".repeat(3000);
    let arguments = json!({"note": padding, "path": "/etc"});
    let refusal = bridge
        .approve(
            &hold,
            &wipe,
            "docs_wipe",
            &arguments,
            Some(&Arc::new(asked)),
            &mut policy,
        )
        .await
        .unwrap();
    assert_eq!(refusal.code, "approval_denied");
    assert!(refusal.hint.contains("refused by bob"), "{}", refusal.hint);
    assert!(from_call.try_recv().is_err(), "the agent was not asked");
    let approval = &policy.unwrap()["approval"];
    assert_eq!(
        (&approval["decision"], &approval["by"]),
        (&json!("denied"), &json!("bob"))
    );
    let (signed, body) = heard.recv().await.unwrap();
    assert_eq!(signed, webhook::signature(b"the-key", &body));
    let sent: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (&sent["tool"], &sent["originalTool"]),
        (&json!("docs_wipe"), &json!("wipe"))
    );
    assert_eq!(
        sent["arguments"], arguments,
        "the webhook is sent the arguments whole"
    );
    assert_eq!(
        (&sent["rule"], &sent["reason"], &sent["run"]),
        (&json!("requireApproval"), &Value::Null, &json!("team/r1"))
    );
    assert_eq!(sent["identity"]["serviceAccount"], "researcher");
    assert_eq!(sent["server"], "team/docs");
    assert!(sent["id"].as_str().is_some_and(|id| id.len() == 36) && sent["time"].as_str().is_some());
    let _ = std::fs::remove_file(key);
}

#[tokio::test]
async fn a_webhook_that_cannot_be_read_or_reached_refuses_the_call() {
    let approval = "approval: {webhook: {url: 'http://127.0.0.1:9/a', secretFile: /nonexistent/key}}\n";
    let bridge = core("{requireApproval: [wipe]}", "", approval);
    let mut policy = None;
    let hold = Hold::source("requireApproval");
    let wipe = entry("wipe", json!({}));
    let refusal = bridge
        .approve(&hold, &wipe, "docs_wipe", &json!({}), None, &mut policy)
        .await
        .unwrap();
    assert_eq!(refusal.code, "approval_denied");
    assert!(
        refusal.hint.contains("its signing key cannot be read"),
        "{}",
        refusal.hint
    );
    assert_eq!(policy.unwrap()["approval"]["decision"], "unavailable");
}

/// Defect (b) of the Python bridge: the question never cuts the arguments; arguments too
/// long to show whole are not asked about, and the refusal says why.
#[tokio::test]
async fn arguments_too_long_to_show_whole_are_not_asked_about() {
    let bridge = held();
    let (asked, mut from_call, _cancel) = relay(&["elicitation"], None);
    let mut policy = None;
    let hold = Hold::source("requireApproval");
    let wipe = entry("wipe", json!({}));
    let arguments = json!({"note": "n".repeat(elicit::MAX_SHOWN_ARGUMENTS), "path": "/"});
    let refusal = bridge
        .approve(
            &hold,
            &wipe,
            "docs_wipe",
            &arguments,
            Some(&Arc::new(asked)),
            &mut policy,
        )
        .await
        .unwrap();
    assert_eq!(refusal.code, "approval_denied");
    assert!(
        refusal.hint.contains("too long to show in full"),
        "{}",
        refusal.hint
    );
    assert!(refusal.hint.contains("approval webhook"));
    assert!(from_call.try_recv().is_err(), "nobody was asked");
}

/// Defect (c), the 2026-07-28 side (`waiting`): an answer a 2026-07-28 agent sent along with
/// its call answers a server's question of that key, never the bridge's own (`fresh`),
/// which waits for the answer to its round.
#[tokio::test]
async fn an_answer_sent_along_before_the_question_does_not_answer_the_bridges_own() {
    use crate::bridge::relay::Question;
    use crate::bridge::waiting::{Call, Side};
    use tokio::sync::oneshot;

    let yes: Value = serde_json::from_str(YES).unwrap();
    let early = json!({"approval": yes, "approval-": yes, "q": {"action": "accept"}});
    let early = early.as_object().unwrap().clone();
    let side = Side::modern(
        json!(1),
        "2026-07-28".into(),
        "tools/call".into(),
        None,
        false,
        early,
    );
    let (asked, from_call, cancel) = relay(&["elicitation"], None);
    let done = tokio::spawn(std::future::pending::<Value>());
    let mut call = Call::new(held(), from_call, done, Arc::new(cancel), Arc::new(asked), side);
    let question = |key: &str, fresh: bool| {
        let (answer, answered) = oneshot::channel();
        let request = json!({"method": elicit::METHOD});
        (
            Question {
                key: key.to_owned(),
                request,
                answer,
                fresh,
            },
            answered,
        )
    };
    let (servers, mut server_answered) = question("q", false);
    call.gather(servers);
    assert_eq!(
        server_answered.try_recv().unwrap().unwrap(),
        json!({"action": "accept"})
    );
    let (own, mut own_answered) = question(elicit::KEY, true);
    call.gather(own);
    assert!(
        own_answered.try_recv().is_err(),
        "asked in the next round, not answered early"
    );
    let decline = json!({"action": "decline"});
    let answers = json!({"approval": decline}).as_object().unwrap().clone();
    call.resume(json!(2), false, answers);
    assert_eq!(own_answered.try_recv().unwrap().unwrap(), decline);
}

#[tokio::test]
async fn an_agent_that_cannot_be_asked_is_refused_and_the_longest_wait_is_a_parked_calls() {
    let bridge = held();
    let (asked, from_call, _cancel) = relay(&["elicitation"], None);
    drop(from_call); // the agent's side of the call is gone
    let mut policy = None;
    let hold = Hold::source("requireApproval");
    let wipe = entry("wipe", json!({}));
    let refusal = bridge
        .approve(
            &hold,
            &wipe,
            "docs_wipe",
            &json!({}),
            Some(&Arc::new(asked)),
            &mut policy,
        )
        .await
        .unwrap();
    assert_eq!(refusal.code, "approval_denied");
    let approval = &policy.unwrap()["approval"];
    assert_eq!(
        (&approval["decision"], &approval["by"]),
        (&json!("unavailable"), &json!("agent"))
    );
    // A 2026-07-28 agent answers by retrying its parked call: a longer wait would end it
    // `cancelled`, not `approval_timeout`.
    let longest = crate::bridge::agent::PARKED.as_secs();
    assert_eq!(settings::ElicitationApproval::default().timeout_seconds, longest);
    let over = format!(r#"{{"elicitation": {{"timeoutSeconds": {}}}}}"#, longest + 1);
    assert!(!settings::problems(&serde_json::from_str(&over).unwrap()).is_empty());
}
