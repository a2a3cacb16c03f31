//! Who may call a server side: bearer tokens verified offline against an issuer's keys.
//!
//! - `access` the access configuration the operator mounts (audience, issuer keys, who may
//!   call, revoked Pods), re-read when the file changes;
//! - `tokens` the checks that make a JWT a `Caller` (signature by a key of the JWK Set under
//!   the key's own algorithm, issuer, audience, times, the `kubernetes.io` claims);
//! - `bearer` where a request's token comes from (`Mcp-Operator-Authorization`, else
//!   `Authorization`);
//! - `gate`   the HTTP side: the verdict cache, 401/403, the refusal counts, each caller
//!   logged once, and the `/metrics` scraper check (`admit_scraper`);
//! - `test_tokens` (tests only) the keys, access files and tokens the tests sign and write.
//!
//! Tokens are read by `jsonwebtoken` (the kept crate), not by hand.

pub mod access;
pub mod bearer;
pub mod gate;
#[cfg(test)]
mod test_tokens;
pub mod tokens;
