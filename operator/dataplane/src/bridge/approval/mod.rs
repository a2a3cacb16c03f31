//! Human approval of a held call (`bridge/approval.py`), the pipeline's step after the rate
//! limits and before the call (`pipeline.py`: after the before-hooks, so the person sees the
//! arguments that would be sent; the call's deadline starts once the person answered).
//!
//! **Held.** A call waits for approval when its tool matches the server's
//! `policy.requireApproval` (globs on the original or the exposed name), or when
//! `policy.approveDestructive` is set and the tool may be destructive by its *pinned*
//! annotations (not `readOnlyHint`, `destructiveHint` not false; a tool without pinned
//! annotations counts as destructive), or when an authorization rule says `approve`.
//! [`Core::approve`] is the one step all three reach, with a [`Hold`] that names what held
//! the call. *Merging the rules port* (branch dp-rules, whose `Decision` has `action`,
//! `rule: Option<(Layer, usize, Option<String>)>`, `describe()` and `audited()`): in
//! `pipeline.rs`, `self.held(entry, name)` in the approval step becomes
//! `(decision.action == Action::Approve).then(|| approval::Hold::rule(decision.describe(),
//! decision.rule.as_ref().and_then(|r| r.2.clone()))).or_else(|| self.held(entry, name))`
//! (a rule's `approve` before `requireApproval`, as `RuleBook.decide`; its `deny` was
//! refused before), and the `policy` the rules set (`decision.audited()`) is the object
//! the approval's record joins.
//!
//! **Who decides.** The run's approval webhook when the run names one, and then it alone: an
//! agent that declared elicitation is not asked (the Python bridge asked such an agent
//! first, so the agent approved its own calls in a run whose owner named a webhook).
//! Without a webhook, the calling agent when it declared form elicitation; else nobody, and
//! the call is refused (`approval_denied`). No answer in time is `approval_timeout`. An
//! agent that cancels its call while it is held ends it `cancelled`. The question to the
//! agent shows the arguments whole, or is not asked (`elicit`: never cut); the webhook is
//! sent them whole, on the bridge's one client (an `https://` webhook over TLS verified as
//! the servers' is).
//!
//! The audit line's `policy.approval` says the decision, who answered and how long it took.
//! Modules: `settings` the run's `approval` settings; `webhook` the webhook's request and
//! answer; `elicit` the question to the agent and its answer.

pub mod elicit;
pub mod settings;
pub mod webhook;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::catalog::Entry;
use super::config::Server;
use super::core::Core;
use super::errors::ToolError;
use super::naming::matches;
use super::relay::Relay;
use elicit::Asked;
use webhook::Answer;

/// What held a call for approval: `requireApproval`, `approveDestructive`, or a rule
/// (`server rule 2`), with the rule's reason.
#[derive(Debug, Clone, PartialEq)]
pub struct Hold {
    pub rule: String,
    pub reason: Option<String>,
}

impl Hold {
    /// A call an authorization rule holds (its `approve` verdict): the rule as
    /// `Decision::describe` names it, and its reason.
    #[allow(dead_code)] // called by the rules port's `approve` verdict (see the module)
    pub fn rule(described: String, reason: Option<String>) -> Self {
        Self {
            rule: described,
            reason: reason.filter(|r| !r.is_empty()),
        }
    }

    fn source(source: &str) -> Self {
        Self {
            rule: source.to_owned(),
            reason: None,
        }
    }

    /// ` (reason)`, or nothing.
    fn why(&self) -> String {
        self.reason
            .as_ref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default()
    }
}

/// Whether a tool may be destructive by its pinned annotations (see the module).
pub fn destructive(server: &Server, entry: &Entry) -> bool {
    let annotations = super::pins::pinned_annotations(server, entry);
    let hint = |name: &str| annotations.get(name).and_then(Value::as_bool);
    hint("readOnlyHint") != Some(true) && hint("destructiveHint") != Some(false)
}

/// `approval_denied` for a held call when nobody can be asked.
pub fn no_approver(exposed: &str, hold: &Hold) -> ToolError {
    ToolError::new(
        "approval_denied",
        format!(
            "{exposed} needs a person's approval{}, and this run has no approver configured, so the call was not sent. Do without it, or ask the run's owner to configure approval.",
            hold.why()
        ),
    )
    .with("rule", json!(hold.rule))
    .with("approval", json!("unavailable"))
}

/// `approval_denied`: the person said no.
pub fn refused(exposed: &str, hold: &Hold, by: Option<&str>) -> ToolError {
    let who = by.map(|by| format!(" by {by}")).unwrap_or_default();
    ToolError::new(
        "approval_denied",
        format!(
            "The approval of {exposed}{} was refused{who}; the call was not sent. Do not call it again with the same arguments unless the situation changed.",
            hold.why()
        ),
    )
    .with("rule", json!(hold.rule))
    .with("approval", json!("denied"))
}

/// `approval_timeout`: nobody answered in time (a denial).
pub fn timed_out(exposed: &str, hold: &Hold, seconds: u64) -> ToolError {
    ToolError::new(
        "approval_timeout",
        format!(
            "{exposed} needs a person's approval{}, and nobody answered within {seconds} s, so the call was not sent (no answer is a refusal). It may be asked again later.",
            hold.why()
        ),
    )
    .with("rule", json!(hold.rule))
    .with("approval", json!("timeout"))
    .with("timeoutSeconds", json!(seconds as f64))
}

/// `approval_denied`: the webhook gave no answer (`why`).
fn webhook_unavailable(exposed: &str, hold: &Hold, why: &str) -> ToolError {
    ToolError::new(
        "approval_denied",
        format!(
            "{exposed} needs a person's approval{}, and the approval webhook gave none: {why}. The call was not sent (no approval is a refusal).",
            hold.why()
        ),
    )
    .with("rule", json!(hold.rule))
    .with("approval", json!("unavailable"))
}

/// `approval_denied`: the arguments are too long to show the agent whole (`elicit`).
fn too_long(exposed: &str, hold: &Hold, length: usize) -> ToolError {
    ToolError::new(
        "approval_denied",
        format!(
            "{exposed} needs a person's approval{}, and its arguments are too long to show in full in the question ({length} characters, at most {}), so nobody was asked and the call was not sent. Call it with shorter arguments, or ask the run's owner to configure an approval webhook (it is sent the arguments whole).",
            hold.why(),
            elicit::MAX_SHOWN_ARGUMENTS
        ),
    )
    .with("rule", json!(hold.rule))
    .with("approval", json!("unavailable"))
}

/// The audit's `policy.approval`: the decision, who answered, the wait in ms (0.1 ms).
fn record(decision: &str, by: Option<&str>, started: Instant) -> Value {
    let waited = started.elapsed().as_secs_f64() * 1000.0;
    json!({"decision": decision, "by": by, "waitedMs": (waited * 10.0).round() / 10.0})
}

impl Core {
    /// What holds a call of `entry` (exposed as `exposed`) by its server's policy:
    /// `requireApproval`, else `approveDestructive` (None: nothing does).
    pub(in crate::bridge) fn held(&self, entry: &Entry, exposed: &str) -> Option<Hold> {
        let server = &self.config.servers[entry.server];
        let policy = &server.policy;
        if matches(&policy.require_approval, &entry.original) || matches(&policy.require_approval, exposed) {
            Some(Hold::source("requireApproval"))
        } else if policy.approve_destructive && destructive(server, entry) {
            Some(Hold::source("approveDestructive"))
        } else {
            None
        }
    }

    /// The approval step: hold the call of `entry` (exposed as `exposed`, sent with
    /// `arguments`) until a person answers. None: approved, send it; else the refusal.
    /// Records `approval` in the audit's `policy` (an object, made when None).
    pub(in crate::bridge) async fn approve(
        &self,
        hold: &Hold,
        entry: &Entry,
        exposed: &str,
        arguments: &Value,
        relay: Option<&Arc<Relay>>,
        policy: &mut Option<Value>,
    ) -> Option<ToolError> {
        let asking = self.ask_approval(hold, entry, exposed, arguments, relay);
        let (refusal, approval) = match relay {
            Some(relay) => tokio::select! {
                biased;
                () = relay.cancelled() => {
                    let key = self.config.servers[entry.server].key();
                    (Some(super::pipeline::cancelled(&key, exposed)), None)
                }
                decided = asking => decided,
            },
            None => asking.await,
        };
        if let Some(approval) = approval {
            let audited = policy.get_or_insert_with(|| json!({}));
            if let Some(fields) = audited.as_object_mut() {
                fields.insert("approval".into(), approval);
            }
        }
        refusal
    }

    async fn ask_approval(
        &self,
        hold: &Hold,
        entry: &Entry,
        exposed: &str,
        arguments: &Value,
        relay: Option<&Arc<Relay>>,
    ) -> (Option<ToolError>, Option<Value>) {
        let server = self.config.servers[entry.server].key();
        let settings = self.config.approval.clone().unwrap_or_default();
        let started = Instant::now();
        if let Some(hook) = &settings.webhook {
            let question = webhook::Question {
                run: &self.run,
                identity: self.config.identity.as_ref(),
                server: &server,
                tool: exposed,
                original: &entry.original,
                arguments,
                rule: &hold.rule,
                reason: hold.reason.as_deref(),
            };
            let body = webhook::body(&question, &uuid::Uuid::new_v4().to_string(), &now());
            let (refusal, decision, by) = match webhook::ask(&self.client, hook, body).await {
                Answer::Verdict(true, by) => (None, "approved", by),
                Answer::Verdict(false, by) => (Some(refused(exposed, hold, by.as_deref())), "denied", by),
                Answer::Timeout => (
                    Some(timed_out(exposed, hold, hook.timeout_seconds)),
                    "timeout",
                    None,
                ),
                Answer::KeyUnreadable => {
                    let why = "its signing key cannot be read";
                    (Some(webhook_unavailable(exposed, hold, why)), "unavailable", None)
                }
                Answer::Unreached => {
                    let why = "it could not be reached";
                    (Some(webhook_unavailable(exposed, hold, why)), "unavailable", None)
                }
                Answer::NotUnderstood(status) => {
                    let why = format!("its answer was not understood (HTTP {status})");
                    (
                        Some(webhook_unavailable(exposed, hold, &why)),
                        "unavailable",
                        None,
                    )
                }
            };
            return (refusal, Some(record(decision, by.as_deref(), started)));
        }
        let unavailable = Some(json!({"decision": "unavailable"}));
        let form = json!({"mode": "form"});
        let Some(relay) = relay.filter(|r| r.missing_for(elicit::METHOD, &form).is_none()) else {
            return (Some(no_approver(exposed, hold)), unavailable);
        };
        let asked = match elicit::question(exposed, &server, &hold.why(), arguments) {
            Err(length) => return (Some(too_long(exposed, hold, length)), unavailable),
            Ok(params) => params,
        };
        let seconds = settings.elicitation.timeout_seconds;
        let (refusal, decision) = match elicit::ask(relay, asked, Duration::from_secs(seconds)).await {
            Asked::Answered(answer) if elicit::approves(&answer) => (None, "approved"),
            Asked::Answered(_) => (Some(refused(exposed, hold, Some("agent"))), "denied"),
            Asked::TimedOut => (Some(timed_out(exposed, hold, seconds)), "timeout"),
            Asked::CouldNot(why) => {
                tracing::info!("The agent could not be asked to approve {exposed}: {why}");
                (Some(refused(exposed, hold, Some("agent"))), "unavailable")
            }
        };
        (refusal, Some(record(decision, Some("agent"), started)))
    }
}

/// The wall-clock time as Python's `datetime.isoformat()` writes an aware UTC one.
fn now() -> String {
    let format = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]+00:00"
    );
    time::OffsetDateTime::now_utc()
        .format(&format)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
