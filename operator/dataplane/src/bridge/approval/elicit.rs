//! Approval asked of the calling agent (`AgentApprover` of `bridge/approval.py`): an
//! `elicitation/create` in form mode through the call's relay (a legacy agent gets it on the
//! call's stream, a 2026-07-28 agent as an `input_required` round), whose form has one
//! boolean, `approve` (default false). `accept` with `approve: true` approves; anything else
//! refuses. Only an answer to the question as sent counts (`Relay::send_fresh`): one a
//! 2026-07-28 agent sent along before it was asked, or one sent on another session, answers
//! nothing.
//!
//! **The question is never cut.** The message shows the arguments that would be sent, whole
//! (the Python bridge cut them after 2,000 characters, which could hide the one that
//! decides). Arguments longer than [`MAX_SHOWN_ARGUMENTS`] characters are not shown in part:
//! the agent is not asked and the call is refused with a hint that says why (an approval
//! webhook, which is sent the arguments whole, can approve such calls).

use std::time::Duration;

use serde_json::{Value, json};

use crate::bridge::relay::{Refusal, Relay};

/// The form's one field: `true` in an `accept` approves the call.
pub const APPROVE_FIELD: &str = "approve";
/// The key of the question in a 2026-07-28 round.
pub const KEY: &str = "approval";
pub const METHOD: &str = "elicitation/create";
/// The longest arguments (compact JSON, in characters) a question shows; longer ones are not
/// asked about.
pub const MAX_SHOWN_ARGUMENTS: usize = 16_384;

/// The `requestedSchema` of the question (a flat object of primitives, as form mode wants).
pub fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            APPROVE_FIELD: {
                "type": "boolean",
                "title": "Approve this call",
                "description": "True lets the call go; false or declining refuses it.",
                "default": false,
            }
        },
        "required": [APPROVE_FIELD],
    })
}

/// The `elicitation/create` params: the tool, why (`why`: ` (reason)` or empty), and the
/// arguments to be sent, whole; `Err(length)` when they are too long to show.
pub fn question(exposed: &str, server: &str, why: &str, arguments: &Value) -> Result<Value, usize> {
    let shown = serde_json::to_string(arguments).expect("a Value always encodes");
    let length = shown.chars().count();
    if length > MAX_SHOWN_ARGUMENTS {
        return Err(length);
    }
    Ok(json!({
        "mode": "form",
        "message": format!(
            "Allow the call of {exposed} (server {server}){why} with the arguments {shown}? Accept with approve true to let it go; decline to refuse it."
        ),
        "requestedSchema": schema(),
    }))
}

/// Whether an `elicitation/create` result approves: `accept` with `approve: true` (the
/// boolean itself, not a truthy string).
pub fn approves(answer: &Value) -> bool {
    answer.get("action").and_then(Value::as_str) == Some("accept")
        && answer
            .get("content")
            .and_then(|c| c.get(APPROVE_FIELD))
            .and_then(Value::as_bool)
            == Some(true)
}

/// How asking the agent ended.
#[derive(Debug)]
pub enum Asked {
    Answered(Value),
    /// It could not be asked, or answered with an error.
    CouldNot(String),
    TimedOut,
}

/// Ask the agent of `relay` (which declared form elicitation), waiting at most `wait`.
pub async fn ask(relay: &Relay, params: Value, wait: Duration) -> Asked {
    let asking = async {
        let receiver = relay.send_fresh(KEY.to_owned(), METHOD, params).await?;
        receiver
            .await
            .unwrap_or_else(|_| Err(Refusal::internal("The agent's side of the call ended")))
    };
    match tokio::time::timeout(wait, asking).await {
        Err(_) => Asked::TimedOut,
        Ok(Ok(answer)) => Asked::Answered(answer),
        Ok(Err(refusal)) => Asked::CouldNot(refusal.message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::relay::ToAgent;
    use crate::bridge::relay::tests::relay;

    #[test]
    fn only_an_accept_with_approve_true_approves() {
        assert!(approves(
            &json!({"action": "accept", "content": {"approve": true}})
        ));
        for answer in [
            json!({"action": "accept"}),
            json!({"action": "accept", "content": {}}),
            json!({"action": "accept", "content": {"approve": false}}),
            json!({"action": "accept", "content": {"approve": "true"}}),
            json!({"action": "accept", "content": {"approve": 1}}),
            json!({"action": "decline", "content": {"approve": true}}),
            json!("accept"),
        ] {
            assert!(!approves(&answer), "{answer}");
        }
    }

    #[test]
    fn the_question_asks_for_the_one_boolean_in_form_mode() {
        let params = question("docs_wipe", "team/docs", "", &json!({"path": "/x"})).unwrap();
        assert_eq!(params["mode"], "form");
        let schema = &params["requestedSchema"];
        assert_eq!(schema["required"], json!(["approve"]));
        assert_eq!(schema["properties"]["approve"]["type"], "boolean");
        assert_eq!(schema["properties"]["approve"]["default"], false);
        let message = params["message"].as_str().unwrap();
        assert!(message.contains("docs_wipe (server team/docs)"), "{message}");
        assert!(message.contains(r#"{"path":"/x"}"#), "{message}");
    }

    #[test]
    fn the_question_shows_every_argument_whole_or_is_not_asked() {
        // The decisive argument after 2,000 characters of another (the Python bridge's cut).
        let padding = "a".repeat(5000);
        let arguments = json!({"comment": padding, "target": "/etc/passwd"});
        let params = question("docs_wipe", "team/docs", "", &arguments).unwrap();
        let message = params["message"].as_str().unwrap();
        assert!(message.contains(r#""target":"/etc/passwd""#) && !message.contains('…'));
        assert!(message.contains(&padding));
        let huge = json!({"comment": "b".repeat(MAX_SHOWN_ARGUMENTS), "target": "/"});
        let length = question("docs_wipe", "team/docs", "", &huge).unwrap_err();
        assert!(length > MAX_SHOWN_ARGUMENTS);
    }

    #[tokio::test]
    async fn the_agent_is_asked_fresh_and_its_answer_or_its_silence_returned() {
        let (relay, mut from_call, _cancel) = relay(&["elicitation"], None);
        let params = question("docs_wipe", "team/docs", "", &json!({})).unwrap();
        let agent = tokio::spawn(async move {
            let Some(ToAgent::Ask(asked)) = from_call.recv().await else {
                panic!("asked");
            };
            assert!(asked.fresh && asked.key == KEY && asked.request["method"] == METHOD);
            let _ = asked.answer.send(Ok(json!({"action": "decline"})));
            from_call
        });
        let asked = ask(&relay, params.clone(), Duration::from_secs(5)).await;
        assert!(matches!(asked, Asked::Answered(answer) if !approves(&answer)));
        let _from_call = agent.await.unwrap(); // kept open: nobody answers now
        let silent = ask(&relay, params, Duration::from_millis(100)).await;
        assert!(matches!(silent, Asked::TimedOut));
    }
}
