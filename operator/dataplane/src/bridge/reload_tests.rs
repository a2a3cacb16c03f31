//! The configuration watcher on real files, a ConfigMap-style symlink swap included
//! (`tests/unit/test_bridge_reload.py`), and the flag's bounds.

use super::*;
use serde_json::json;

fn config(servers: &[&str]) -> String {
    let listed: Vec<String> = servers
        .iter()
        .map(|s| format!("{{name: {s}, namespace: default, url: 'http://{s}:8080/mcp', prefix: {s}}}"))
        .collect();
    format!(
        "kind: BridgeConfig\nrun: {{name: r, namespace: default}}\nservers: [{}]\n",
        listed.join(", ")
    )
}

/// What the kubelet does: a new data directory, then `..data` swapped to it.
fn configmap(root: &std::path::Path, generation: &str, content: &str) {
    let data = root.join(generation);
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("config.yaml"), content).unwrap();
    let link = root.join("..data_tmp");
    std::os::unix::fs::symlink(generation, &link).unwrap();
    std::fs::rename(&link, root.join("..data")).unwrap();
    let path = root.join("config.yaml");
    if !path.is_symlink() {
        std::os::unix::fs::symlink("..data/config.yaml", path).unwrap();
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcp-reload-{name}-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir(&dir).unwrap();
    dir
}

fn names(checked: Checked) -> Vec<String> {
    match checked {
        Checked::Valid(config) => config.servers.iter().map(|s| s.name.clone()).collect(),
        other => panic!("not a valid configuration: {other:?}"),
    }
}

#[test]
fn a_symlink_swap_is_seen_an_invalid_file_refused_and_the_same_content_ignored() {
    let root = scratch("swap");
    configmap(&root, "gen1", &config(&["a"]));
    let path = root.join("config.yaml");
    let mut watcher = Watcher::new(path.clone(), std::fs::read(&path).ok());
    assert!(matches!(watcher.check(), Checked::Unchanged)); // the content it started with
    configmap(&root, "gen2", &config(&["a", "b"]));
    assert_eq!(names(watcher.check()), ["a", "b"]);
    assert!(matches!(watcher.check(), Checked::Unchanged));
    let broken = "kind: BridgeConfig\nrun: {name: r, namespace: default}\nservers: [{name: a}]\n";
    configmap(&root, "gen3", broken);
    assert!(matches!(watcher.check(), Checked::Refused));
    assert!(matches!(watcher.check(), Checked::Unchanged)); // refused once, not again
    configmap(&root, "gen4", &config(&["c"]));
    assert_eq!(names(watcher.check()), ["c"]);
    std::fs::remove_dir_all(root).unwrap();
}

#[test]
fn a_vanished_file_keeps_the_running_configuration() {
    let root = scratch("gone");
    let path = root.join("config.yaml");
    std::fs::write(&path, config(&["a"])).unwrap();
    let mut watcher = Watcher::new(path.clone(), std::fs::read(&path).ok());
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(watcher.check(), Checked::Unchanged));
    assert!(matches!(watcher.check(), Checked::Unchanged));
    // Back with the same content: read again, as Python's watcher does after a failed read.
    std::fs::write(&path, config(&["a"])).unwrap();
    assert_eq!(names(watcher.check()), ["a"]);
    std::fs::remove_dir_all(root).unwrap();
}

#[test]
fn reload_seconds_are_at_least_a_tenth_of_a_second() {
    assert_eq!(reload_seconds("2"), Ok(2.0));
    assert_eq!(reload_seconds("0.3"), Ok(0.3));
    assert_eq!(reload_seconds("0"), Ok(0.1));
    assert_eq!(reload_seconds("-5"), Ok(0.1));
    assert_eq!(reload_seconds("NaN"), Ok(0.1));
    assert_eq!(reload_seconds("inf"), Ok(86_400.0));
    assert!(reload_seconds("soon").is_err());
}

fn server(text: &str) -> Server {
    serde_norway::from_str(text).unwrap()
}

#[test]
fn a_new_session_is_made_when_the_connection_settings_change_not_the_policy() {
    let base = "{name: s, namespace: d, url: 'http://s/mcp', prefix: s";
    let plain = signature(&server(&format!("{base}}}")));
    let policy = signature(&server(&format!(
        "{base}, policy: {{timeoutSeconds: 5}}, toolDigests: {{a: b}}}}"
    )));
    let moved = signature(&server("{name: s, namespace: d, url: 'http://t/mcp', prefix: s}"));
    let headed = signature(&server(&format!(
        "{base}, headers: [{{name: X-Team, value: blue}}]}}"
    )));
    assert_eq!(plain, policy);
    assert_ne!(plain, moved);
    assert_ne!(plain, headed);
    assert!(!plain.contains("blue") && plain.len() == 64);
}

fn running(servers: &[String], extra: &str) -> BridgeConfig {
    let text = format!(
        "kind: BridgeConfig\nrun: {{name: r, namespace: default}}\n{extra}servers: [{}]\n",
        servers.join(", ")
    );
    config::parse(&text, "test").unwrap()
}

fn entry(name: &str, port: u16, extra: &str) -> String {
    format!("{{name: {name}, namespace: default, url: 'http://127.0.0.1:{port}/mcp', prefix: {name}{extra}}}")
}

#[tokio::test]
async fn a_reload_keeps_an_unchanged_server_and_retires_a_removed_or_changed_one() {
    let before = [entry("a", 9, ""), entry("b", 9, ""), entry("c", 9, "")];
    let audit = AuditSink::open(false, None).unwrap();
    let core = Core::new(running(&before, ""), audit, Duration::from_secs(60));
    for index in 0..3 {
        core.update(index, |state| {
            state.listed_once = true;
            state.tools = Some(vec![json!({"name": "echo"})]);
        });
    }
    core.rebuild();
    assert_eq!(core.catalog().names(), ["a_echo", "b_echo", "c_echo"]);
    core.metrics.set_up("default/c", true);
    let live = Live::new(core.clone());
    // a: new pins and a new deadline (same session); b: another URL (a new one); c: gone.
    let after = [
        entry(
            "a",
            9,
            &format!(
                ", toolDigests: {{echo: '{}'}}, policy: {{timeoutSeconds: 7}}",
                "0".repeat(64)
            ),
        ),
        entry("b", 10, ""),
    ];
    apply(&live, running(&after, "listen: {port: 9999}\n"));
    let next = live.core();
    assert!(Arc::ptr_eq(&next.slots[0], &core.slots[0]));
    assert!(!Arc::ptr_eq(&next.slots[1], &core.slots[1]));
    let retired: Vec<bool> = core.slots.iter().map(|s| s.is_retired()).collect();
    assert_eq!(retired, [false, true, true]);
    assert_eq!(next.config.servers[0].timeout_seconds(), 7);
    // A server that stays, by key, keeps its circuit breaker, whatever its session.
    assert!(Arc::ptr_eq(&next.breakers[0], &core.breakers[0]));
    assert!(Arc::ptr_eq(&next.breakers[1], &core.breakers[1]));
    assert_eq!(next.config.listen.port, 7800); // a new listen address needs a restart
    // The catalog was rebuilt before the swap: b is not listed yet, c is gone, a's echo is
    // kept under its name (drifted from its new pin, so out of tools/list).
    assert_eq!(next.catalog().names(), ["a_echo"]);
    assert!(next.catalog().tools().is_empty());
    assert!(core.catalog().names().len() == 3); // a request on the old one still sees its own
    let page = next.metrics.encode();
    assert!(
        !page.contains("default/c") && page.contains("default/b"),
        "{page}"
    );
    // The same configuration again changes nothing.
    apply(&live, running(&after, ""));
    assert!(Arc::ptr_eq(&live.core().slots[1], &next.slots[1]));
}
