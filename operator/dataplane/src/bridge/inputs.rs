//! A 2026-07-28 server's `input_required` round judged for the agent (`relay`'s rules for a
//! server's questions, in that era's shape): the `inputRequests` are 1 to
//! [`MAX_INPUT_REQUESTS`] under keys of at most [`MAX_KEY_CHARS`] characters, each a method
//! the bridge relays and a capability the agent declared (else the call fails: `-32601`, or
//! `-32021` naming what is missing), within the call's [`MAX_ASKS_PER_CALL`]; then all are
//! asked of the agent at once and its answers returned by key, for the call sent again
//! (`upcall`).

use serde_json::{Map, Value, json};

use super::relay::{MAX_ASKS_PER_CALL, Refusal, Relay};
use super::upstream::Failure;
use crate::capabilities::{capability_for, required_object};
use crate::jsonrpc::{METHOD_NOT_FOUND, MISSING_REQUIRED_CLIENT_CAPABILITY};

/// Requests in one round.
pub const MAX_INPUT_REQUESTS: usize = 16;
/// The longest `inputRequests` key passed to the agent.
pub const MAX_KEY_CHARS: usize = 128;

/// The agent's answers to a 2026-07-28 server's round (`inputRequests` of `result`), by key.
pub async fn answers(relay: &Relay, server: &str, result: &Value) -> Result<Map<String, Value>, Failure> {
    let requests = result.get("inputRequests").and_then(Value::as_object);
    let valid = requests.filter(|r| {
        (1..=MAX_INPUT_REQUESTS).contains(&r.len())
            && r.iter().all(|(key, request)| {
                (1..=MAX_KEY_CHARS).contains(&key.chars().count())
                    && request.get("method").is_some_and(Value::is_string)
            })
    });
    let Some(requests) = valid else {
        return Err(Failure::Protocol(format!(
            "{server} asked for input with inputRequests that are not 1 to {MAX_INPUT_REQUESTS} requests under keys of at most {MAX_KEY_CHARS} characters"
        )));
    };
    let mut asked = Vec::new();
    for (key, request) in requests {
        let method = request["method"].as_str().unwrap_or_default();
        if capability_for(method).is_none() {
            relay.observe(method, "unsupported");
            return Err(Failure::Rpc {
                code: METHOD_NOT_FOUND,
                message: format!("{server} asked the agent for {method}, which the bridge does not relay"),
                data: None,
            });
        }
        let params = request.get("params").cloned().unwrap_or_else(|| json!({}));
        if let Some(missing) = relay.missing_for(method, &params) {
            relay.observe(method, "undeclared");
            let required = required_object(&missing);
            relay.missing(required.clone());
            return Err(Failure::Rpc {
                code: MISSING_REQUIRED_CLIENT_CAPABILITY,
                message: format!(
                    "{server} asked the agent for {method}, but the agent did not declare {missing}"
                ),
                data: Some(json!({"requiredCapabilities": required})),
            });
        }
        let params = relay.scrub(params);
        asked.push((key.clone(), method.to_owned(), params));
    }
    {
        if !relay.count_asks(asked.len()) {
            for (_, method, _) in &asked {
                relay.observe(method, "bounded");
            }
            return Err(Failure::Protocol(format!(
                "{server} asked the agent more than {MAX_ASKS_PER_CALL} times in one call"
            )));
        }
    }
    let mut waiting = Vec::new();
    for (key, method, params) in asked {
        waiting.push((
            key.clone(),
            method.clone(),
            relay.send_ask(key, &method, params).await,
        ));
    }
    let mut answers = Map::new();
    for (key, method, answer) in waiting {
        let answered = match answer {
            Ok(receiver) => receiver
                .await
                .unwrap_or_else(|_| Err(Refusal::internal("The agent's side of the call ended"))),
            Err(refusal) => Err(refusal),
        };
        match answered {
            Ok(result) => {
                relay.observe(&method, "relayed");
                answers.insert(key, result);
            }
            Err(refusal) => {
                relay.observe(&method, "agent_error");
                return Err(Failure::Rpc {
                    code: refusal.code,
                    message: format!(
                        "the agent could not answer {server}'s request: {}",
                        refusal.message
                    ),
                    data: None,
                });
            }
        }
    }
    Ok(answers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::relay::tests::relay;

    #[tokio::test]
    async fn a_round_asking_for_an_undeclared_capability_fails_with_it_named() {
        let (relay, _from_call, _cancel) = relay(&["roots"], None);
        let round = json!({"resultType": "input_required", "inputRequests": {
            "q": {"method": "sampling/createMessage", "params": {}}}, "requestState": "s"});
        let Err(Failure::Rpc { code, data, .. }) = answers(&relay, "s", &round).await else {
            panic!("refused");
        };
        assert_eq!(code, MISSING_REQUIRED_CLIENT_CAPABILITY);
        assert_eq!(data, Some(json!({"requiredCapabilities": {"sampling": {}}})));
        assert_eq!(relay.required(), Some(json!({"sampling": {}})));
        let empty = json!({"resultType": "input_required", "inputRequests": {}});
        assert!(matches!(
            answers(&relay, "s", &empty).await,
            Err(Failure::Protocol(_))
        ));
    }
}
