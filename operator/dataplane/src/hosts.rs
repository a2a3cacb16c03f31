//! The Host/Origin policy of an MCP endpoint (DNS-rebinding protection, as the MCP
//! transports require): localhost always, plus the names the operator allows; a lone `*`
//! turns the Host check off. Pure: no I/O.

const LOCAL_HOSTS: [&str; 4] = ["localhost", "127.0.0.1", "[::1]", "::1"];

/// Which Host and Origin values a server answers.
#[derive(Debug, Clone)]
pub struct HostPolicy {
    any_host: bool,
    hosts: Vec<String>,
    origins: Vec<String>,
}

/// Why a request was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// 421: the Host names another server.
    Host,
    /// 403: the Origin is a page of another site.
    Origin,
}

impl HostPolicy {
    pub fn new(allowed_hosts: &[String], allowed_origins: &[String]) -> Self {
        let any_host = allowed_hosts.iter().any(|h| h == "*");
        let hosts = LOCAL_HOSTS
            .iter()
            .map(|h| (*h).to_owned())
            .chain(
                allowed_hosts
                    .iter()
                    .filter(|h| *h != "*")
                    .map(|h| bracket_ipv6(&h.to_lowercase())),
            )
            .collect();
        let origins = allowed_origins
            .iter()
            .map(|o| o.to_lowercase().trim_end_matches('/').to_owned())
            .collect();
        Self {
            any_host,
            hosts,
            origins,
        }
    }

    /// The refusal for a request's Host and Origin, or None to serve it.
    pub fn check(&self, host: Option<&str>, origin: Option<&str>) -> Option<Refusal> {
        if !self.host_ok(host) {
            return Some(Refusal::Host);
        }
        if let Some(origin) = origin
            && !self.origin_ok(&origin.to_lowercase())
        {
            return Some(Refusal::Origin);
        }
        None
    }

    fn host_ok(&self, host: Option<&str>) -> bool {
        if self.any_host {
            return true;
        }
        host.is_some_and(|h| self.match_host(&h.to_lowercase()))
    }

    fn match_host(&self, host: &str) -> bool {
        let name = if host.starts_with('[') {
            host.find(']').map_or(host, |end| &host[..=end])
        } else if host.matches(':').count() == 1 {
            host.rsplit_once(':').map_or(host, |(name, _)| name)
        } else {
            host
        };
        self.hosts.iter().any(|pattern| {
            // A pattern with a port matches the whole Host; one without, the name alone.
            let with_port = (pattern.contains(':') && !pattern.starts_with('[')) || pattern.contains("]:");
            let target = if with_port { host } else { name };
            target == pattern || (pattern.contains('*') && glob(pattern, target))
        })
    }

    fn origin_ok(&self, origin: &str) -> bool {
        let origin = origin.trim_end_matches('/');
        if self
            .origins
            .iter()
            .any(|o| o == origin || (o.contains('*') && glob(o, origin)))
        {
            return true;
        }
        let Some((scheme, rest)) = origin.split_once("://") else {
            return false;
        };
        if !matches!(scheme, "http" | "https") || rest.is_empty() {
            return false;
        }
        let netloc = rest.split(['/', '?', '#']).next().unwrap_or_default();
        !netloc.is_empty() && self.match_host(netloc)
    }
}

fn bracket_ipv6(host: &str) -> String {
    if host.matches(':').count() > 1 && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

/// A shell-style glob of `*` and `?` over the whole text (fnmatch without classes).
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(hosts: &[&str]) -> HostPolicy {
        HostPolicy::new(&hosts.iter().map(|h| (*h).to_owned()).collect::<Vec<_>>(), &[])
    }

    #[test]
    fn localhost_is_always_served_and_strangers_are_not() {
        let p = policy(&[]);
        assert_eq!(p.check(Some("127.0.0.1:8080"), None), None);
        assert_eq!(p.check(Some("[::1]:8080"), None), None);
        assert_eq!(p.check(Some("evil.example"), None), Some(Refusal::Host));
        assert_eq!(p.check(None, None), Some(Refusal::Host));
    }

    #[test]
    fn allowed_names_match_any_port_and_globs() {
        let p = policy(&["*.svc.cluster.local", "exact:9000"]);
        assert_eq!(p.check(Some("a.ns.svc.cluster.local:80"), None), None);
        assert_eq!(p.check(Some("exact:9000"), None), None);
        assert_eq!(p.check(Some("exact:9001"), None), Some(Refusal::Host));
    }

    #[test]
    fn a_foreign_origin_is_refused_and_a_local_one_served() {
        let p = policy(&[]);
        assert_eq!(
            p.check(Some("localhost"), Some("https://evil.example")),
            Some(Refusal::Origin)
        );
        assert_eq!(p.check(Some("localhost"), Some("http://localhost:3000")), None);
    }

    #[test]
    fn a_lone_star_turns_the_host_check_off() {
        assert_eq!(policy(&["*"]).check(Some("anything"), None), None);
    }

    #[test]
    fn globs_match_whole_text() {
        assert!(glob("a*c", "abbc") && glob("a?c", "abc") && !glob("a*c", "abcd") && glob("*", ""));
    }
}
