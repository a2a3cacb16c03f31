//! Where the bridge may connect upstream (`bridge/egress.py`'s `BRIDGE_EGRESS`, the rules of
//! `net/egress.py`): pure judgement of one address or one URL host, in the Python's words.
//!
//! Refused always: cloud metadata addresses and names, the unspecified address, link-local
//! (`169.254.0.0/16`, `fe80::/10`), multicast and reserved ranges (broadcast among them), and
//! any other address that is not public; allowed: loopback (the agent's own Pod), private
//! ranges (RFC 1918, `100.64.0.0/10`, `fc00::/7`: in-cluster Services) and public addresses.
//! IPv4-mapped, 6to4 and NAT64 IPv6 addresses are judged by the IPv4 address inside. The
//! ranges are Python 3.11's `ipaddress` ones, so both bridges judge alike. `upstream/guard`
//! applies the judgement at every connect, to every address a name resolves to.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Cloud instance-metadata endpoints: refused whatever else is allowed.
const METADATA_ADDRESSES: [IpAddr; 4] = [
    IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254)), // AWS, GCP, Azure, OpenStack, ...
    IpAddr::V4(Ipv4Addr::new(169, 254, 170, 2)),   // AWS ECS task credentials
    IpAddr::V4(Ipv4Addr::new(100, 100, 100, 200)), // Alibaba Cloud
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)), // AWS over IPv6
];

/// Host names of metadata endpoints, refused before any name resolution.
const METADATA_NAMES: [&str; 4] = [
    "metadata.google.internal",
    "metadata.goog",
    "metadata",
    "instance-data.ec2.internal",
];

/// `(network, prefix length)` pairs of IPv4 and IPv6 ranges.
type V4Nets = &'static [(u32, u32)];
type V6Nets = &'static [(u128, u32)];

/// Where in-cluster Services, Pods and nodes usually live.
const PRIVATE_V4: V4Nets = &[
    (0x0a00_0000, 8),
    (0xac10_0000, 12),
    (0xc0a8_0000, 16),
    (0x6440_0000, 10),
];
const PRIVATE_V6: V6Nets = &[(0xfc00 << 112, 7)];

/// Python's `IPv4Address.is_private` networks (`is_global` is neither these nor `100.64/10`).
const NOT_GLOBAL_V4: V4Nets = &[
    (0x0000_0000, 8),
    (0x0a00_0000, 8),
    (0x7f00_0000, 8),
    (0xa9fe_0000, 16),
    (0xac10_0000, 12),
    (0xc000_0000, 29),
    (0xc000_00aa, 31),
    (0xc000_0200, 24),
    (0xc0a8_0000, 16),
    (0xc612_0000, 15),
    (0xc633_6400, 24),
    (0xcb00_7100, 24),
    (0xf000_0000, 4),
    (0xffff_ffff, 32),
    (0x6440_0000, 10),
];
/// Python's `IPv6Address.is_private` networks (`is_global` is not these).
const NOT_GLOBAL_V6: V6Nets = &[
    (1, 128),
    (0, 128),
    (0xffff << 32, 96),
    (0x0100 << 112, 64),
    (0x2001 << 112, 23),
    (0x2001_0002 << 96, 48),
    (0x2001_0db8 << 96, 32),
    (0x2001_0010 << 96, 28),
    (0xfc00 << 112, 7),
    (0xfe80 << 112, 10),
];
/// Python's `IPv6Address.is_reserved` networks.
const RESERVED_V6: V6Nets = &[
    (0, 8),
    (0x0100 << 112, 8),
    (0x0200 << 112, 7),
    (0x0400 << 112, 6),
    (0x0800 << 112, 5),
    (0x1000 << 112, 4),
    (0x4000 << 112, 3),
    (0x6000 << 112, 3),
    (0x8000 << 112, 3),
    (0xa000 << 112, 3),
    (0xc000 << 112, 3),
    (0xe000 << 112, 4),
    (0xf000 << 112, 5),
    (0xf800 << 112, 6),
    (0xfe00 << 112, 9),
];
const NAT64: (u128, u32) = (0x0064_ff9b << 96, 96);

fn in_v4(ip: Ipv4Addr, nets: V4Nets) -> bool {
    let bits = u32::from(ip);
    nets.iter()
        .any(|&(net, len)| bits.checked_shr(32 - len).unwrap_or(0) == net.checked_shr(32 - len).unwrap_or(0))
}

fn in_v6(ip: Ipv6Addr, nets: V6Nets) -> bool {
    let bits = u128::from(ip);
    nets.iter().any(|&(net, len)| {
        bits.checked_shr(128 - len).unwrap_or(0) == net.checked_shr(128 - len).unwrap_or(0)
    })
}

/// Which destinations a client may connect to (`EgressPolicy`, without refused endpoints:
/// the bridge has none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EgressPolicy {
    /// Private ranges (RFC 1918, `100.64.0.0/10`, `fc00::/7`): in-cluster Services, nodes.
    pub allow_private: bool,
    /// Loopback (`127.0.0.0/8`, `::1`): the Pod's or the machine's own.
    pub allow_loopback: bool,
}

/// Where the bridge's upstream calls may connect: private and loopback allowed.
pub const BRIDGE_EGRESS: EgressPolicy = EgressPolicy {
    allow_private: true,
    allow_loopback: true,
};

impl EgressPolicy {
    /// Why a connection to `ip` is refused, or `None`.
    pub fn refusal(&self, ip: IpAddr) -> Option<&'static str> {
        let ip = embedded_ipv4(ip);
        if METADATA_ADDRESSES.contains(&ip) {
            return Some("it is a cloud metadata address");
        }
        if ip.is_unspecified() {
            return Some("it is the unspecified address");
        }
        if ip.is_loopback() {
            return (!self.allow_loopback).then_some("it is a loopback address");
        }
        let (link_local, multicast_or_reserved, private, global) = match ip {
            IpAddr::V4(v4) => (
                v4.is_link_local(),
                v4.is_multicast() || in_v4(v4, &[(0xf000_0000, 4)]),
                in_v4(v4, PRIVATE_V4),
                !in_v4(v4, NOT_GLOBAL_V4),
            ),
            IpAddr::V6(v6) => (
                in_v6(v6, &[(0xfe80 << 112, 10)]),
                v6.is_multicast() || in_v6(v6, RESERVED_V6),
                in_v6(v6, PRIVATE_V6),
                !in_v6(v6, NOT_GLOBAL_V6),
            ),
        };
        if link_local {
            return Some("it is a link-local address");
        }
        if multicast_or_reserved {
            return Some("it is a multicast or reserved address");
        }
        if private {
            return (!self.allow_private).then_some("it is a private address");
        }
        (!global).then_some("it is not a public address")
    }

    /// Why a URL's host is refused before name resolution (metadata names), or `None`; an IP
    /// address literal (bracketed or not, a `%zone` ignored) is judged as `refusal` judges it.
    pub fn host_refusal(&self, host: &str) -> Option<&'static str> {
        let name = host.trim_start_matches('[').trim_end_matches(']');
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        if METADATA_NAMES.contains(&name.as_str()) {
            return Some("it is a cloud metadata host name");
        }
        let address = name.split('%').next().unwrap_or_default();
        address.parse::<IpAddr>().ok().and_then(|ip| self.refusal(ip))
    }
}

/// The refusal as the Python bridge words it: `refused to connect to <host> is a …`.
pub fn refused_to_connect(host: &str, why: &str) -> String {
    format!(
        "refused to connect to {host} {}",
        why.strip_prefix("it ").unwrap_or(why)
    )
}

/// The IPv4 address inside an IPv4-mapped, 6to4 or NAT64 IPv6 address, else `ip`.
fn embedded_ipv4(ip: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = ip else { return ip };
    if let Some(v4) = v6.to_ipv4_mapped() {
        return IpAddr::V4(v4);
    }
    let bits = u128::from(v6);
    if bits >> 112 == 0x2002 {
        return IpAddr::V4(Ipv4Addr::from(((bits >> 80) & 0xffff_ffff) as u32));
    }
    if in_v6(v6, &[NAT64]) {
        return IpAddr::V4(Ipv4Addr::from((bits & 0xffff_ffff) as u32));
    }
    ip
}

#[cfg(test)]
#[path = "egress_tests.rs"]
mod tests;
