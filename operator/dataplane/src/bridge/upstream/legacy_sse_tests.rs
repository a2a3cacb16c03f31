//! The stream's reader handing each message to whom it belongs (`legacy_sse`), as
//! `tests/unit/test_legacy_sse.py` holds the Python session to it.

use super::*;

fn reader() -> (Reader, watch::Receiver<u64>) {
    let (changed, changes) = watch::channel(0);
    let reader = Reader {
        key: "default/sse".into(),
        base: "http://127.0.0.1:1/sse".parse().unwrap(),
        client: super::super::http_client(),
        headers: Vec::new(),
        waiting: Arc::new(Mutex::new(Waiting::default())),
        changed,
        errands: Arc::new(AtomicUsize::new(0)),
    };
    (reader, changes)
}

fn endpoint() -> hyper::Uri {
    "http://127.0.0.1:1/message".parse().unwrap()
}

/// A request waiting for its answer (and hearing its progress).
fn waits(reader: &Reader, id: u64) -> (oneshot::Receiver<Value>, mpsc::Receiver<Value>) {
    let (answer, answered) = oneshot::channel();
    let (heard, hearing) = mpsc::channel(8);
    let heard = Some(heard);
    lock(&reader.waiting).by_id.insert(id, Waiter { answer, heard });
    (answered, hearing)
}

#[test]
fn an_answer_is_matched_strictly_by_its_id() {
    let (reader, _) = reader();
    let (mut answered, _) = waits(&reader, 1);
    for other in [r#""1""#, "true", "1.0", "2", "null"] {
        reader.dispatch(
            &endpoint(),
            &format!(r#"{{"jsonrpc":"2.0","id":{other},"result":{{}}}}"#),
        );
        assert!(answered.try_recv().is_err(), "{other} answered request 1");
    }
    reader.dispatch(&endpoint(), r#"{"jsonrpc":"2.0","id":1,"result":{"ok":true}}"#);
    assert_eq!(answered.try_recv().unwrap()["result"]["ok"], true);
    assert!(lock(&reader.waiting).by_id.is_empty());
    reader.dispatch(&endpoint(), r#"{"jsonrpc":"2.0","id":1,"result":{}}"#); // nobody waits: dropped
}

#[test]
fn progress_goes_to_the_request_that_sent_its_token_only() {
    let (reader, _) = reader();
    let (_, mut first) = waits(&reader, 1);
    let (_, mut second) = waits(&reader, 2);
    lock(&reader.waiting).progress.insert(json!("t-1").to_string(), 1);
    lock(&reader.waiting).progress.insert(json!(7).to_string(), 2);
    let progress = |token: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{token},"progress":1}}}}"#
        )
    };
    reader.dispatch(&endpoint(), &progress(r#""t-1""#));
    reader.dispatch(&endpoint(), &progress(r#""7""#)); // a string is not the number 7
    reader.dispatch(&endpoint(), &progress("7"));
    assert_eq!(first.try_recv().unwrap()["params"]["progressToken"], "t-1");
    assert!(first.try_recv().is_err());
    assert_eq!(second.try_recv().unwrap()["params"]["progressToken"], 7);
    assert!(second.try_recv().is_err());
}

#[test]
fn a_list_change_is_announced_and_other_notices_are_not() {
    let (reader, changes) = reader();
    reader.dispatch(
        &endpoint(),
        r#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#,
    );
    assert_eq!(*changes.borrow(), 0);
    reader.dispatch(
        &endpoint(),
        r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
    );
    reader.dispatch(
        &endpoint(),
        r#"{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}"#,
    );
    assert_eq!(*changes.borrow(), 2);
}

#[tokio::test]
async fn a_flood_of_server_requests_is_answered_at_most_sixteen_at_once() {
    let (reader, _) = reader();
    for id in 0..40 {
        reader.dispatch(
            &endpoint(),
            &format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#),
        );
    }
    assert_eq!(reader.errands.load(Ordering::Relaxed), MAX_ERRANDS);
}
