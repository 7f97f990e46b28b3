//! The process's descriptor budget: `lamina serve` and `lamina cluster`
//! raise the soft `RLIMIT_NOFILE` to the hard limit at start, then size
//! their connection caps to what is left after a reserve for the engine's
//! own files (tables, logs, the manifest) and replication, as Redis sizes
//! `maxclients`.

use std::io;

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// Raises the soft limit on open descriptors to the hard limit; returns
/// the soft limit in force afterwards (`None`: unlimited).
pub fn raise_nofile_limit() -> io::Result<Option<u64>> {
    let limit = getrlimit(Resource::Nofile);
    if limit.current == limit.maximum {
        return Ok(limit.current);
    }
    let raised = Rlimit {
        current: limit.maximum,
        maximum: limit.maximum,
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => Ok(limit.maximum),
        // Some systems cap the soft limit below an unlimited hard one.
        Err(e) => {
            tracing::warn!("cannot raise the descriptor limit to the hard limit: {e}");
            Ok(getrlimit(Resource::Nofile).current)
        }
    }
}

/// The soft limit on open descriptors now in force (`None`: unlimited).
pub fn nofile_limit() -> Option<u64> {
    getrlimit(Resource::Nofile).current
}

#[cfg(test)]
mod tests {
    use rustix::process::{getrlimit, Resource};

    #[test]
    fn the_soft_limit_reaches_the_hard_one() {
        let hard = getrlimit(Resource::Nofile).maximum;
        let now = super::raise_nofile_limit().unwrap();
        assert_eq!(now, super::nofile_limit());
        // Where the kernel allows it (it does for an unprivileged raise to
        // the hard limit), the soft limit is the hard one.
        if hard.is_some() {
            assert_eq!(now, hard);
        }
    }
}
