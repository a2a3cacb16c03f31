//! The configuration watcher on real files, a ConfigMap-style symlink swap included
//! (`tests/unit/test_bridge_reload.py`), and the flag's bounds.

use super::*;

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
