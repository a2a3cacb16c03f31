//! The call pipeline of this slice (`bridge/pipeline.py`'s steps that it has): find the
//! exposed tool in the catalog, validate its arguments, decide by the authorization rules
//! (`rules`), call its server under the original name, turn every failure into the
//! structured tool error in the Python bridge's words (masked), count it and write its
//! audit line. The rate limits (`ratelimit`) come after the rules; PII is scanned on the
//! arguments before the call (`pii::hook`), then a held call's approval (`approval`: the
//! person sees the arguments that would be sent); the server's circuit breaker and the
//! retries (`retry`) go around the call, whose deadline starts once it is sent; PII is
//! scanned on the result after it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::audit::Record;
use super::breaker;
use super::catalog::{Catalog, Entry};
use super::core::Core;
use super::errors::{ToolError, quoted};
use super::overrides;
use super::pii::hook::{Direction, Findings, Subject, judge};
use super::pins;
use super::policy::Action;
use super::relay::Relay;
use super::retry::{self, Sent};
use super::upstream::Failure;
use super::validate;

/// A refusal hint names at most this many tools the agent may call instead.
const MAX_LISTED_TOOLS: usize = 10;
/// An upstream's error message is cut to this many characters in a hint.
const MAX_UPSTREAM_MESSAGE: usize = 300;

impl Core {
    /// One `tools/call` (params an object, its name a string): always a `CallToolResult`.
    /// `relay`: the agent's call, when what its server says about it may reach the agent.
    pub async fn call(&self, params: &Map<String, Value>, relay: Option<&Arc<Relay>>) -> Value {
        // In `search` discovery: the bridge's own search answered, a call by name routed.
        let by_name;
        let params = match self.route(params) {
            super::discovery::Route::Answer(result) => return result,
            super::discovery::Route::Call(call) => {
                by_name = call;
                &by_name
            }
            super::discovery::Route::Direct => params,
        };
        let started = Instant::now();
        let arrived = time::OffsetDateTime::now_utc();
        let name = params.get("name").and_then(Value::as_str).unwrap_or_default();
        let arguments = params.get("arguments").filter(|a| !a.is_null());
        let empty = json!({});
        let hashed = arguments.unwrap_or(&empty);
        let catalog = self.catalog();
        let entry = catalog.get(name);
        let server = entry.as_ref().map(|e| &self.config.servers[e.server]);
        let mut attempts = 0;
        let mut pii = Findings::default();
        let mut policy = None;
        let (outcome, result) = match &entry {
            None => {
                let error = self.not_allowlisted(&catalog, name);
                (error.code, error.to_result())
            }
            Some(entry) => {
                let (errors, problem) = validate::check(&entry.schema, arguments);
                let fixed = overrides::with_fixed(name, arguments, &entry.fixed);
                // The rules read the arguments that would be sent (the fixed ones merged).
                let decision = match (&entry.drift, errors.is_empty(), &fixed) {
                    (None, true, Ok(sent)) => catalog.rules.decide(name, sent.as_ref()),
                    _ => super::rules::ALLOWED,
                };
                policy = decision.audited();
                let refused = if let Some(why) = entry.drift {
                    let server = &self.config.servers[entry.server];
                    Some(pins::refusal(name, server, &entry.original, why, &entry.sha256))
                } else if !errors.is_empty() {
                    Some(validate::invalid_arguments(name, &errors, problem.as_deref()))
                } else if let Err(error) = &fixed {
                    Some(error.clone())
                } else if decision.action == Action::Deny {
                    Some(super::rules::denied(name, &decision))
                } else {
                    self.rate_limited(entry, name)
                };
                // PII on the arguments that would be sent (the fixed ones merged in): scanned
                // even when the call was refused (the audit counts what was found), its own
                // refusal only when nothing refused first.
                let key = self.config.servers[entry.server].key();
                let modes = &self.config.servers[entry.server].policy.pii;
                let subject = Subject {
                    tool: name,
                    server: &key,
                };
                let scanned = fixed.as_deref().ok().or(arguments).unwrap_or(&empty);
                let before = judge(modes.arguments, Direction::Arguments, scanned, &subject, &mut pii).await;
                if let Some(error) = refused.or(before.refusal) {
                    (error.code, error.to_result())
                } else if let Some(hold) = held_by_rule(&decision).or_else(|| self.held(entry, name))
                    && let Some(error) = self
                        .approve(
                            &hold,
                            entry,
                            name,
                            before.value.as_ref().or(fixed.as_deref().ok()).unwrap_or(&empty),
                            relay,
                            &mut policy,
                        )
                        .await
                {
                    (error.code, error.to_result())
                } else {
                    let sent = before.value.as_ref().or(fixed.as_deref().ok());
                    let (answered, tried) = self.send(entry, name, sent, relay).await;
                    attempts = tried;
                    match answered {
                        Ok(result) => {
                            let after =
                                judge(modes.results, Direction::Results, &result, &subject, &mut pii).await;
                            match (after.refusal, after.value.unwrap_or(result)) {
                                (Some(refusal), _) => (refusal.code, refusal.to_result()),
                                (None, result) if result.get("isError") == Some(&Value::Bool(true)) => {
                                    ("upstream_error", self.scrubber.json(result))
                                }
                                (None, result) => ("ok", result),
                            }
                        }
                        Err(error) => (error.code, error.to_result()),
                    }
                }
            }
        };
        let seconds = started.elapsed().as_secs_f64();
        let server_key = server.map(super::config::Server::key);
        self.metrics
            .observe_call(server_key.as_deref(), name, outcome, seconds);
        self.audit.write(&Record {
            time: arrived,
            run: &self.run,
            identity: self.config.identity.as_ref(),
            server: server_key.clone(),
            tool: entry.as_ref().map(|_| name.to_owned()),
            sent_name: params.get("name").cloned(),
            original_tool: entry.as_ref().map(|e| e.original.clone()),
            outcome,
            duration_ms: seconds * 1000.0,
            attempts,
            arguments: Some(hashed),
            pii: Some(&pii),
            policy,
            upstream: entry
                .as_ref()
                .and_then(|e| self.upstreams[e.server].as_ref())
                .map(|u| u.upstream_subject_and_actor())
                .unwrap_or_default(),
        });
        result
    }

    /// The audit line of a request that was not a readable call.
    pub fn audit_invalid(&self, sent_name: Option<Value>) {
        self.metrics.observe_call(None, "", "invalid_request", 0.0);
        self.audit.write(&Record {
            time: time::OffsetDateTime::now_utc(),
            run: &self.run,
            identity: self.config.identity.as_ref(),
            server: None,
            tool: None,
            sent_name: Some(sent_name.unwrap_or(Value::Null)),
            original_tool: None,
            outcome: "invalid_request",
            duration_ms: 0.0,
            attempts: 0,
            arguments: None,
            pii: None,
            policy: None,
            upstream: Default::default(),
        });
    }

    fn not_allowlisted(&self, catalog: &Catalog, name: &str) -> ToolError {
        let similar = catalog.similar(name);
        let allowed = if similar.is_empty() {
            catalog.allowed_near(name)
        } else {
            similar.clone()
        };
        let shown: Vec<String> = allowed.iter().take(MAX_LISTED_TOOLS).cloned().collect();
        let listing = if !similar.is_empty() {
            format!(" Similar tools you may call: {}.", shown.join(", "))
        } else if !shown.is_empty() {
            let more = allowed.len() - shown.len();
            let tail = if more > 0 {
                format!(" and {more} more (tools/list shows them all).")
            } else {
                ".".to_owned()
            };
            format!(" Tools you may call: {}{tail}", shown.join(", "))
        } else {
            String::new()
        };
        let head = name.split('_').next().unwrap_or_default();
        let broken: Vec<(String, String)> = self
            .config
            .servers
            .iter()
            .zip(self.states())
            .filter(|(server, state)| server.prefix == head && state.problem.is_some())
            .map(|(server, state)| (server.key(), state.problem.unwrap_or_default()))
            .collect();
        let mut listing = listing;
        for (key, problem) in &broken {
            listing.push_str(&format!(
                " Server {key} cannot be called: {}.",
                self.scrubber.text(problem)
            ));
        }
        let mut error = ToolError::new(
            "not_allowlisted",
            format!(
                "The tool {} is not available to this agent; the call was not sent.{listing}",
                quoted(name, 64)
            ),
        )
        .with("similar", json!(similar))
        .with("allowed", json!(shown));
        if !broken.is_empty() {
            error = error.with(
                "misconfigured",
                json!(broken.into_iter().map(|(k, _)| k).collect::<Vec<_>>()),
            );
        }
        error
    }

    /// The call at its server, under its original name, within the server's deadline, its
    /// circuit breaker and retry rules (`retry`); a failure as the structured tool error, in
    /// the Python bridge's words. Also the number of attempts sent.
    async fn send(
        &self,
        entry: &Entry,
        exposed: &str,
        arguments: Option<&Value>,
        relay: Option<&Arc<Relay>>,
    ) -> (Result<Value, ToolError>, u32) {
        let index = entry.server;
        let server = &self.config.servers[index];
        let key = server.key();
        let scrub = |text: &str| self.scrubber.text(text);
        let Some(upstream) = &self.upstreams[index] else {
            let problem = self.states()[index].problem.clone().unwrap_or_default();
            return (Err(misconfigured(&key, &problem)), 0);
        };
        // Each attempt owns its request: the arguments are copied once per attempt.
        let params = || {
            let mut params = Map::new();
            params.insert("name".into(), json!(entry.original));
            params.insert(
                "arguments".into(),
                arguments.cloned().unwrap_or_else(|| json!({})),
            );
            params
        };
        let seconds = server.timeout_seconds();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(seconds);
        let safe = retry::retry_safe(entry.tool.get("annotations"));
        let attempt = |left: Duration| {
            let params = params();
            async move {
                let answered = match relay {
                    Some(relay) => {
                        relay.resend(); // a retry: the attempt before ended the relay
                        upstream.call_relayed("tools/call", params, left, relay).await
                    }
                    None => upstream.request("tools/call", params, left).await,
                };
                if let Err(failure) = &answered
                    && reached_no_one(failure)
                {
                    upstream.reset().await; // the next attempt negotiates a session again
                }
                answered
            }
        };
        let breaker = &self.breakers[index];
        let policy = &server.policy.retry;
        let governed = retry::governed(breaker, policy, safe, deadline, &self.jitter, attempt).await;
        let attempts = governed.attempts;
        let (answered, open, retry_after) = match governed.sent {
            Sent::Answered(result) => (Ok(result), false, 0),
            Sent::CircuitOpen(wait) => return (Err(breaker::circuit_open(&key, wait)), attempts),
            Sent::Failed {
                failure,
                open,
                retry_after,
            } => (Err(failure), open, retry_after),
        };
        let sent = match answered {
            Ok(result) => {
                self.update(index, |state| state.up = true);
                self.metrics.set_up(&key, true);
                Ok(super::aggregate::plain_result(result))
            }
            Err(Failure::Rpc { code, message, .. }) => {
                let message = if message.is_empty() { "no message".to_owned() } else { message };
                let hint = format!(
                    "Server {key} refused {exposed} (JSON-RPC error {code}): {}",
                    cut(&scrub(&message), MAX_UPSTREAM_MESSAGE)
                );
                Err(ToolError::new("upstream_error", hint)
                    .with("server", json!(key))
                    .with("rpcCode", json!(code)))
            }
            Err(Failure::Misconfigured(why)) => Err(misconfigured(&key, &scrub(&why))),
            Err(Failure::Unauthorized { insufficient_scope, why }) => {
                Err(unauthorized(&key, insufficient_scope, &scrub(&why)))
            }
            Err(failure @ Failure::Denied { .. }) => Err(denied(&key, exposed, &failure, &scrub)),
            Err(failure @ Failure::Status(..)) if !retry::transient(&failure) => {
                // It answered, refusing this request: no outage (the Python bridge's `_rejected`).
                let hint = format!(
                    "Server {key} refused {exposed} ({}).",
                    cut(&scrub(&failure.describe()), MAX_UPSTREAM_MESSAGE)
                );
                Err(ToolError::new("upstream_error", hint)
                    .with("server", json!(key))
                    .with("rpcCode", Value::Null))
            }
            Err(Failure::Cancelled) => Err(cancelled(&key, exposed)),
            Err(Failure::Timeout) => Err(ToolError::new(
                "timeout",
                format!(
                    "Server {key} did not answer {exposed} within {seconds} s. The call may still have run: check its effect before repeating it."
                ),
            )
            .with("server", json!(key))
            .with("timeoutSeconds", json!(seconds))),
            Err(failure) => {
                self.update(index, |state| state.up = false);
                self.metrics.set_up(&key, false);
                self.relist[index].notify_one();
                let reason = cut(&scrub(&failure.describe()), MAX_UPSTREAM_MESSAGE);
                let tries = if attempts == 1 { "once".to_owned() } else { format!("{attempts} times") };
                let mut hint = format!("Server {key} could not be reached (tried {tries}): {reason}.");
                if attempts == 1 && !safe {
                    hint.push_str(&format!(
                        " {exposed} is not marked read-only or idempotent, so the bridge did not retry it; it may or may not have run."
                    ));
                }
                if open {
                    hint.push_str(&format!(" The bridge will not call this server for {retry_after} s."));
                }
                hint.push_str(" Tools of other servers keep working.");
                Err(ToolError::new("upstream_unavailable", hint)
                    .with("server", json!(key))
                    .with("attempts", json!(attempts))
                    .with("retryAfterSeconds", json!(retry_after)))
            }
        };
        (sent, attempts)
    }
}

/// Whether a failed attempt may have lost the server's session (it was not reached, or its
/// answer was not one): the session is forgotten, as it was before retries.
fn reached_no_one(failure: &Failure) -> bool {
    !matches!(
        failure,
        Failure::Rpc { .. }
            | Failure::Denied { .. }
            | Failure::Misconfigured(_)
            | Failure::Unauthorized { .. }
            | Failure::Cancelled
            | Failure::Timeout
    )
}

/// The error of a call whose server refused the bridge's credentials (`upstream_unauthorized`,
/// `insufficient_scope`: its challenge says what it asks for) or, with a 403 about no scope,
/// the request itself (`upstream_error`). No outage: the server stays up.
fn denied(key: &str, exposed: &str, failure: &Failure, scrub: &dyn Fn(&str) -> String) -> ToolError {
    if let Some((code, hint, scope)) = failure.unauthorized(key) {
        let mut error = ToolError::new(code, scrub(&hint)).with("server", json!(key));
        if let Some(scope) = scope {
            error = error.with("scope", json!(scrub(&scope)));
        }
        return error;
    }
    let hint = format!(
        "Server {key} refused {exposed} ({}).",
        cut(&scrub(&failure.describe()), MAX_UPSTREAM_MESSAGE)
    );
    ToolError::new("upstream_error", hint)
        .with("server", json!(key))
        .with("rpcCode", Value::Null)
}

/// The error of a call its agent cancelled (while it was sent, or held for approval).
pub(super) fn cancelled(key: &str, exposed: &str) -> ToolError {
    ToolError::new(
        "cancelled",
        format!("The agent cancelled {exposed}; server {key} was told to stop it."),
    )
    .with("server", json!(key))
}

/// The error of a call to a server that cannot be called as configured: nothing was sent.
fn misconfigured(key: &str, reason: &str) -> ToolError {
    ToolError::new(
        "upstream_unavailable",
        format!(
            "Server {key} cannot be called: {}. The call was not sent; calling again will not help until its configuration is fixed. Tools of other servers keep working.",
            cut(reason, MAX_UPSTREAM_MESSAGE)
        ),
    )
    .with("server", json!(key))
    .with("attempts", json!(0))
    .with("misconfigured", json!(true))
}

/// The error of a call no OAuth token could be had for (`bridge/unauthorized.py`'s words).
fn unauthorized(key: &str, insufficient_scope: bool, reason: &str) -> ToolError {
    let reason = cut(reason, MAX_UPSTREAM_MESSAGE);
    let error = if insufficient_scope {
        ToolError::new(
            "insufficient_scope",
            format!(
                "Server {key} was not called: {reason}. The platform must grant the scopes its MCPServer's spec.auth asks for; calling again will not help."
            ),
        )
    } else {
        ToolError::new(
            "upstream_unauthorized",
            format!(
                "Server {key} was not called: no token could be had ({reason}). Calling again will not help until the MCPServer's spec.auth or the authorization server's grant is fixed. Tools of other servers keep working."
            ),
        )
    };
    error.with("server", json!(key))
}

fn cut(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        text.to_owned()
    } else {
        let mut head: String = text.chars().take(limit - 1).collect();
        head.push('…');
        head
    }
}

/// A rule's `approve` holds the call before `requireApproval` does (as `RuleBook.decide`);
/// its `deny` refused the call before.
fn held_by_rule(decision: &super::rules::Decision) -> Option<super::approval::Hold> {
    (decision.action == Action::Approve).then(|| {
        let reason = decision.rule.as_ref().and_then(|rule| rule.2.clone());
        super::approval::Hold::rule(decision.describe(), reason)
    })
}
