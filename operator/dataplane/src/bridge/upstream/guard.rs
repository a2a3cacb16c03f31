//! The egress guard under every connection of the bridge's client (`bridge/egress.py`'s
//! `BRIDGE_EGRESS`, applied as `net/dial.py` applies it): a URL's host judged before anything
//! (metadata names, IP literals, which `HttpConnector` never resolves), and a name resolved
//! at every connect with only the addresses the policy allows kept, so that a name that
//! resolves differently later (DNS rebinding) gains nothing. A refusal fails the connection
//! with the Python's words (`refused to connect to <host> is a link-local address`): that
//! server is unavailable, the others are untouched.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper::Uri;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::dns::Name;

use crate::bridge::egress::{BRIDGE_EGRESS, EgressPolicy, refused_to_connect};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Boxed<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

/// A name resolved by the system, the addresses the policy refuses dropped.
#[derive(Clone, Copy, Debug)]
pub struct GuardedResolver {
    policy: EgressPolicy,
}

impl tower_service::Service<Name> for GuardedResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = io::Error;
    type Future = Boxed<Self::Response, io::Error>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), io::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let policy = self.policy;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            // The port is the connector's to set on each address.
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            allowed(policy, &host, found)
        })
    }
}

/// The addresses of `host` that `policy` allows (in the resolver's order; at least one), or
/// the refusal of the first when none is allowed.
fn allowed(
    policy: EgressPolicy,
    host: &str,
    found: Vec<SocketAddr>,
) -> io::Result<std::vec::IntoIter<SocketAddr>> {
    let kept: Vec<SocketAddr> = found
        .iter()
        .copied()
        .filter(|addr| policy.refusal(addr.ip()).is_none())
        .collect();
    if !kept.is_empty() {
        return Ok(kept.into_iter());
    }
    let (shown, why) = match found.first() {
        Some(first) => (
            format!("{host} ({})", first.ip()),
            policy.refusal(first.ip()).unwrap_or("it has no address"),
        ),
        None => (host.to_owned(), "it has no address"),
    };
    Err(io::Error::new(
        io::ErrorKind::PermissionDenied,
        refused_to_connect(&shown, why),
    ))
}

/// The TCP connector of the bridge's client, every destination judged by the policy.
#[derive(Clone)]
pub struct GuardedConnector {
    inner: HttpConnector<GuardedResolver>,
    policy: EgressPolicy,
}

impl GuardedConnector {
    /// A connector under `BRIDGE_EGRESS`; `configure` sets the TCP options.
    pub fn new(configure: impl FnOnce(&mut HttpConnector<GuardedResolver>)) -> Self {
        let policy = BRIDGE_EGRESS;
        let mut inner = HttpConnector::new_with_resolver(GuardedResolver { policy });
        configure(&mut inner);
        GuardedConnector { inner, policy }
    }
}

impl tower_service::Service<Uri> for GuardedConnector {
    type Response = <HttpConnector<GuardedResolver> as tower_service::Service<Uri>>::Response;
    type Error = BoxError;
    type Future = Boxed<Self::Response, BoxError>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        if let Some(host) = uri.host()
            && let Some(why) = self.policy.host_refusal(host)
        {
            let refused = refused_to_connect(host, why);
            return Box::pin(
                async move { Err(io::Error::new(io::ErrorKind::PermissionDenied, refused).into()) },
            );
        }
        let connecting = self.inner.call(uri);
        Box::pin(async move { connecting.await.map_err(Into::into) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower_service::Service;

    fn addrs(texts: &[&str]) -> Vec<SocketAddr> {
        texts
            .iter()
            .map(|t| SocketAddr::new(t.parse().unwrap(), 0))
            .collect()
    }

    #[test]
    fn refused_addresses_are_dropped_and_a_name_with_none_left_is_refused() {
        let kept: Vec<_> = allowed(BRIDGE_EGRESS, "svc", addrs(&["169.254.1.1", "10.0.0.7"]))
            .unwrap()
            .collect();
        assert_eq!(kept, addrs(&["10.0.0.7"]));
        let refused = allowed(
            BRIDGE_EGRESS,
            "rebind.test",
            addrs(&["169.254.169.254", "0.0.0.0"]),
        )
        .unwrap_err();
        assert_eq!(
            refused.to_string(),
            "refused to connect to rebind.test (169.254.169.254) is a cloud metadata address"
        );
    }

    #[tokio::test]
    async fn a_refused_literal_or_name_never_connects() {
        let mut connector = GuardedConnector::new(|_| {});
        for (url, words) in [
            (
                "http://169.254.169.254:9/mcp",
                "refused to connect to 169.254.169.254 is a cloud metadata address",
            ),
            (
                "http://[fe80::1]:9/",
                "refused to connect to [fe80::1] is a link-local address",
            ),
            (
                "http://metadata.google.internal/",
                "is a cloud metadata host name",
            ),
        ] {
            let Err(error) = connector.call(url.parse().unwrap()).await else {
                panic!("{url} was connected");
            };
            assert!(error.to_string().contains(words), "{url}: {error}");
        }
    }

    #[tokio::test]
    async fn an_allowed_address_is_connected() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut connector = GuardedConnector::new(|_| {});
        for url in [
            format!("http://127.0.0.1:{port}/"),
            format!("http://localhost:{port}/"),
        ] {
            assert!(connector.call(url.parse().unwrap()).await.is_ok(), "{url}");
        }
    }
}
