//! `AUTH` and `HELLO ... AUTH`: a password checked as Redis's default
//! user's, failed attempts logged at most once a minute.

use std::net::SocketAddr;

use crate::log_limit::{held_back, LogLimit};
use crate::password::Password;

static FAILED_AUTH: LogLimit = LogLimit::new();

/// Logs a failed attempt, at most once a minute.
pub(super) fn log_failure(peer: Option<SocketAddr>) {
    if let Some(n) = FAILED_AUTH.allow() {
        let from = peer.map(|a| format!(" from {a}")).unwrap_or_default();
        tracing::warn!("redis port: failed AUTH{from}{}", held_back(n));
    }
}

/// The error of a wrong user name or password, as Redis words it.
pub(super) const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// Checks `AUTH [user] password` (or `HELLO`'s `AUTH user password`)
/// against `password`: `Ok` when it lets the connection in, else the
/// error to reply.
pub(super) fn check(
    password: Option<&Password>,
    user: Option<&[u8]>,
    given: &[u8],
    peer: Option<SocketAddr>,
) -> Result<(), &'static str> {
    let Some(password) = password else {
        if user.is_some_and(|u| u != b"default") {
            return Err(WRONGPASS);
        }
        return if user.is_some() {
            // HELLO's AUTH default <anything>, as Redis's nopass user.
            Ok(())
        } else {
            Err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
        };
    };
    let user_ok = user.is_none_or(|u| u == b"default");
    if password.matches(given) && user_ok {
        Ok(())
    } else {
        log_failure(peer);
        Err(WRONGPASS)
    }
}
