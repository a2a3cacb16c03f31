//! The Python's unit cases of the egress judgement (`tests/unit/test_egress_policy.py`).

use super::*;

const DEFAULT: EgressPolicy = EgressPolicy {
    allow_private: false,
    allow_loopback: false,
};

fn ip(text: &str) -> IpAddr {
    text.split('%').next().unwrap().parse().unwrap()
}

#[test]
fn these_are_refused_whatever_is_allowed() {
    for (address, why) in [
        ("169.254.169.254", "it is a cloud metadata address"),
        ("fd00:ec2::254", "it is a cloud metadata address"),
        ("100.100.100.200", "it is a cloud metadata address"),
        ("169.254.170.2", "it is a cloud metadata address"),
        ("169.254.1.1", "it is a link-local address"),
        ("fe80::1", "it is a link-local address"),
        ("fe80::1%eth0", "it is a link-local address"),
        ("0.0.0.0", "it is the unspecified address"),
        ("::", "it is the unspecified address"),
        ("224.0.0.1", "it is a multicast or reserved address"),
        ("ff02::1", "it is a multicast or reserved address"),
        ("240.0.0.1", "it is a multicast or reserved address"),
        ("255.255.255.255", "it is a multicast or reserved address"),
        ("::a9fe:a9fe", "it is a multicast or reserved address"),
        ("192.0.2.1", "it is not a public address"),
        ("0.1.2.3", "it is not a public address"),
        ("2001:db8::1", "it is not a public address"),
        ("::ffff:169.254.169.254", "it is a cloud metadata address"),
        ("::ffff:169.254.1.1", "it is a link-local address"),
        ("::ffff:0.0.0.0", "it is the unspecified address"),
        ("64:ff9b::a9fe:a9fe", "it is a cloud metadata address"),
        ("2002:a9fe:a9fe::1", "it is a cloud metadata address"),
        ("2002:e000:0001::1", "it is a multicast or reserved address"),
    ] {
        assert_eq!(DEFAULT.refusal(ip(address)), Some(why), "{address}");
        assert_eq!(BRIDGE_EGRESS.refusal(ip(address)), Some(why), "{address}");
        assert_eq!(BRIDGE_EGRESS.host_refusal(address), Some(why), "{address}");
    }
}

#[test]
fn loopback_and_private_are_refused_until_allowed() {
    for (address, kind) in [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("10.96.0.10", "private"),
        ("172.20.1.1", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "private"),
        ("fd12:3456::1", "private"),
    ] {
        let why = format!("it is a {kind} address");
        assert_eq!(DEFAULT.refusal(ip(address)), Some(why.as_str()), "{address}");
        assert_eq!(BRIDGE_EGRESS.refusal(ip(address)), None, "{address}");
        let other = EgressPolicy {
            allow_private: kind == "loopback",
            allow_loopback: kind == "private",
        };
        assert_eq!(other.refusal(ip(address)), Some(why.as_str()), "{address}");
    }
}

#[test]
fn public_addresses_are_allowed() {
    for address in ["1.1.1.1", "8.8.8.8", "2606:4700:4700::1111"] {
        assert_eq!(DEFAULT.refusal(ip(address)), None, "{address}");
    }
}

#[test]
fn metadata_host_names_are_refused_before_resolution() {
    let name = "it is a cloud metadata host name";
    assert_eq!(DEFAULT.host_refusal("metadata.google.internal."), Some(name));
    assert_eq!(DEFAULT.host_refusal("METADATA"), Some(name));
    assert_eq!(
        BRIDGE_EGRESS.host_refusal("instance-data.ec2.internal"),
        Some(name)
    );
    assert_eq!(DEFAULT.host_refusal("[::1]"), Some("it is a loopback address"));
    assert_eq!(BRIDGE_EGRESS.host_refusal("[::1]"), None);
    assert_eq!(DEFAULT.host_refusal("tools.example.com"), None); // judged once resolved
}

#[test]
fn the_refusal_is_worded_as_the_python_bridge_words_it() {
    assert_eq!(
        refused_to_connect("169.254.169.254", "it is a cloud metadata address"),
        "refused to connect to 169.254.169.254 is a cloud metadata address"
    );
}
