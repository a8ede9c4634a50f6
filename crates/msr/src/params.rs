//! [`MsrParams`]: the setting of a map-shuffle-reduce run (K servers, storage fraction mu, q
//! non-stragglers waited for), checked once into an [`MsrSetting`] the schemes then trust.

use super::{MsrError, Ratio};

/// The largest number of servers: subsets of servers are `u64` masks.
pub const MAX_SERVERS: usize = 64;

/// Unchecked parameters, as a user gives them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MsrParams {
    /// K, the number of servers.
    pub servers: usize,
    /// mu, the fraction of A's rows each server may store, exactly.
    pub storage: Ratio,
    /// q, the number of servers the master waits for (the first q to finish the map phase).
    pub wait: usize,
}

/// A checked setting: `1 <= q <= K <= 64`, `0 < mu <= 1`, `mu K >= 1` and `mu q >= 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsrSetting {
    servers: usize,
    storage: Ratio,
    wait: usize,
}

impl MsrParams {
    /// K = `servers`, mu = `storage`, q = `wait`; [`MsrParams::check`] validates them.
    pub const fn new(servers: usize, storage: Ratio, wait: usize) -> Self {
        MsrParams { servers, storage, wait }
    }

    /// Checks the parameters; the error is one line naming the problem.
    pub fn check(self) -> Result<MsrSetting, MsrError> {
        let MsrParams { servers, storage, wait } = self;
        let bad = |s: String| Err(MsrError::InvalidParameter(s));
        if servers == 0 || servers > MAX_SERVERS {
            return bad(format!("servers K must be between 1 and {MAX_SERVERS}, got {servers}"));
        }
        if storage <= Ratio::ZERO || storage > Ratio::ONE {
            return bad(format!("storage mu must be in (0, 1], got {storage}"));
        }
        if wait == 0 || wait > servers {
            return bad(format!("wait q must be between 1 and K = {servers}, got {wait}"));
        }
        let k = Ratio::integer(servers as i128);
        if storage.times(k)? < Ratio::ONE {
            return bad(format!(
                "storage mu K = {} < 1: the {servers} servers together cannot store A",
                storage.times(k)?
            ));
        }
        let mu_q = storage.times(Ratio::integer(wait as i128))?;
        if mu_q < Ratio::ONE {
            let least = Ratio::ONE.over(storage)?;
            let least = if least.is_integer() { least.floor() } else { least.floor() + 1 };
            return bad(format!(
                "storage mu q = {mu_q} < 1: {wait} non-stragglers cannot hold all of A; wait for at least ceil(1/mu) = {least}"
            ));
        }
        Ok(MsrSetting { servers, storage, wait })
    }
}

impl MsrSetting {
    /// K, the number of servers.
    pub fn servers(&self) -> usize {
        self.servers
    }

    /// mu, the storage fraction.
    pub fn storage(&self) -> Ratio {
        self.storage
    }

    /// q, the number of non-stragglers.
    pub fn wait(&self) -> usize {
        self.wait
    }

    /// The number of stragglers, K - q.
    pub fn stragglers(&self) -> usize {
        self.servers - self.wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(servers: usize, storage: &str, wait: usize) -> Result<MsrSetting, MsrError> {
        MsrParams::new(servers, storage.parse().unwrap(), wait).check()
    }

    #[test]
    fn rejects_impossible_settings_with_one_line() {
        for (k, mu, q, needle) in [
            (0, "1/2", 1, "servers"),
            (65, "1/2", 1, "servers"),
            (4, "0", 2, "storage mu must"),
            (4, "3/2", 2, "storage mu must"),
            (4, "1/2", 5, "wait q"),
            (4, "1/2", 0, "wait q"),
            (4, "1/5", 4, "mu K"),
            (6, "1/3", 2, "at least ceil(1/mu) = 3"),
        ] {
            let e = check(k, mu, q).unwrap_err().to_string();
            assert!(e.contains(needle) && !e.contains('\n'), "{k} {mu} {q}: {e}");
        }
        assert!(check(4, "1/2", 2).is_ok());
        assert!(check(1, "1", 1).is_ok());
    }
}
