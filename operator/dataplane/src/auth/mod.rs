//! Who may call a server side: bearer tokens verified offline against an issuer's keys.
//!
//! - `access` the access configuration the operator mounts (audience, issuer keys, who may
//!   call, revoked Pods), re-read when the file changes;
//! - `tokens` the checks that make a JWT a `Caller` (signature by a key of the JWK Set under
//!   the key's own algorithm, issuer, audience, times, the `kubernetes.io` claims);
//! - `gate`   the HTTP side: where the token comes from, the verdict cache, 401/403, the
//!   refusal counts, each caller logged once.
//!
//! Tokens are read by `jsonwebtoken` (the kept crate), not by hand.

pub mod access;
pub mod gate;
pub mod tokens;
