//! Basic auth against the web config's bcrypt hashes. bcrypt is slow on purpose (tens of
//! milliseconds at cost 10), too slow to pay on every scrape of a 1-s scrape interval, so
//! credentials that verified are remembered: as an HMAC-SHA256 tag under a key drawn at
//! start, never the password itself, and compared in constant time. Credentials that did
//! not verify are never remembered, so a wrong password costs a bcrypt every time and can
//! never be let in by the cache; the hashes run one at a time, so a flood of wrong
//! passwords takes at most one core while remembered scrapes go on at once.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use ring::hmac;
use subtle::ConstantTimeEq;

use crate::error::WebConfigProblem;
use crate::http::parse_basic_authorization;
use crate::web_config::BasicAuthUser;

/// Verified credentials remembered; beyond it, the oldest is forgotten (and costs one
/// bcrypt again). A handful of scrapers need a handful.
const REMEMBERED: usize = 64;

pub struct BasicAuth {
    users: Vec<BasicAuthUser>,
    /// Checked for an unknown user, so that an unknown user costs as long as a wrong
    /// password (no user enumeration by timing). Its cost is the highest of the users'.
    decoy_hash: String,
    key: hmac::Key,
    verified: Mutex<VecDeque<[u8; 32]>>,
    /// One bcrypt at a time.
    bcrypt: Mutex<()>,
    bcrypt_runs: AtomicU64,
}

impl BasicAuth {
    pub fn new(users: Vec<BasicAuthUser>) -> Result<BasicAuth, WebConfigProblem> {
        let rng = ring::rand::SystemRandom::new();
        let key = hmac::Key::generate(hmac::HMAC_SHA256, &rng)
            .map_err(|_| WebConfigProblem::NoRandomness("the credential cache"))?;
        let cost = users
            .iter()
            .filter_map(|u| u.bcrypt_hash.get(4..6)?.parse::<u32>().ok())
            .max()
            .unwrap_or(bcrypt::DEFAULT_COST);
        let mut decoy = [0u8; 16];
        ring::rand::SecureRandom::fill(&rng, &mut decoy)
            .map_err(|_| WebConfigProblem::NoRandomness("the decoy hash"))?;
        let decoy_hash = bcrypt::hash(decoy, cost).map_err(WebConfigProblem::DecoyHash)?;
        Ok(BasicAuth {
            users,
            decoy_hash,
            key,
            verified: Mutex::new(VecDeque::new()),
            bcrypt: Mutex::new(()),
            bcrypt_runs: AtomicU64::new(0),
        })
    }

    /// Whether an `Authorization` header value names a user of the config with the right
    /// password.
    pub fn allows(&self, authorization: Option<&str>) -> bool {
        let Some(credentials) = authorization.and_then(|v| parse_basic_authorization(v).ok())
        else {
            return false;
        };
        let user = self.users.iter().find(|u| u.name == credentials.user);
        let tag = self.tag(&credentials.user, &credentials.password);
        if self.remembered(&tag) {
            return true;
        }
        let hash = user.map_or(self.decoy_hash.as_str(), |u| u.bcrypt_hash.as_str());
        let matches = {
            let _one_at_a_time = self.bcrypt.lock().unwrap_or_else(|p| p.into_inner());
            self.bcrypt_runs.fetch_add(1, Ordering::Relaxed);
            // Passwords of 72 bytes or more are refused rather than cut to 72 (bcrypt reads
            // no further), so that two different passwords never both pass.
            bcrypt::non_truncating_verify(&credentials.password, hash).unwrap_or(false)
        };
        let allowed = user.is_some() && matches;
        if allowed {
            self.remember(tag);
        }
        allowed
    }

    fn remember(&self, tag: [u8; 32]) {
        let mut verified = self.verified.lock().unwrap_or_else(|p| p.into_inner());
        if verified.len() >= REMEMBERED {
            verified.pop_front();
        }
        verified.push_back(tag);
    }

    /// How many users the config names.
    pub fn users(&self) -> usize {
        self.users.len()
    }

    /// bcrypt hashes computed so far (each check the cache did not answer).
    #[cfg(test)]
    fn bcrypt_runs(&self) -> u64 {
        self.bcrypt_runs.load(Ordering::Relaxed)
    }

    /// The tag remembered for a user and password: the user's length first, so that no
    /// other split of the same bytes gives the same tag.
    fn tag(&self, user: &str, password: &[u8]) -> [u8; 32] {
        let mut ctx = hmac::Context::with_key(&self.key);
        ctx.update(&(user.len() as u64).to_be_bytes());
        ctx.update(user.as_bytes());
        ctx.update(password);
        let mut tag = [0u8; 32];
        tag.copy_from_slice(ctx.sign().as_ref());
        tag
    }

    /// Compares with every remembered tag, in constant time, without stopping at a match.
    fn remembered(&self, tag: &[u8; 32]) -> bool {
        let verified = self.verified.lock().unwrap_or_else(|p| p.into_inner());
        let mut found = subtle::Choice::from(0);
        for known in verified.iter() {
            found |= known.ct_eq(tag);
        }
        found.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Authorization: Basic` for a user and password.
    fn header(user: &str, password: &str) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let bytes = format!("{user}:{password}").into_bytes();
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let mut n = [0u8; 3];
            n[..chunk.len()].copy_from_slice(chunk);
            let v = u32::from_be_bytes([0, n[0], n[1], n[2]]);
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(ALPHABET[(v >> (18 - 6 * i) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
        format!("Basic {out}")
    }

    /// Users whose hashes bcrypt makes here (cost 4: the test is about the cache, not
    /// the cost).
    fn auth() -> BasicAuth {
        BasicAuth::new(vec![
            BasicAuthUser {
                name: "prometheus".into(),
                bcrypt_hash: bcrypt::hash("s3cret", 4).unwrap(),
            },
            BasicAuthUser {
                name: "grafana".into(),
                bcrypt_hash: bcrypt::hash("other", 4).unwrap(),
            },
        ])
        .unwrap()
    }

    #[test]
    fn right_credentials_pass_and_are_verified_once() {
        let a = auth();
        let right = header("prometheus", "s3cret");
        assert!(a.allows(Some(&right)));
        assert_eq!(a.bcrypt_runs(), 1);
        for _ in 0..100 {
            assert!(a.allows(Some(&right)));
        }
        assert_eq!(a.bcrypt_runs(), 1, "the cache answers the next scrapes");
    }

    #[test]
    fn wrong_credentials_fail_every_time_and_are_never_remembered() {
        let a = auth();
        assert!(a.allows(Some(&header("prometheus", "s3cret"))));
        let wrong = [
            header("prometheus", "s3cre"),
            header("prometheus", "s3cret "),
            header("grafana", "s3cret"),
            header("nobody", "s3cret"),
            header("prometheus:s3cret", ""),
            header("prometheu", "ss3cret"),
            "Bearer abc".into(),
            "Basic !!!!".into(),
        ];
        for round in 0..3 {
            for w in &wrong {
                assert!(!a.allows(Some(w)), "{w} let in on round {round}");
            }
        }
        assert!(!a.allows(None));
        // Every well-formed wrong attempt cost a bcrypt, each round: none was remembered.
        assert_eq!(a.bcrypt_runs(), 1 + 3 * 6);
        assert!(a.allows(Some(&header("grafana", "other"))));
    }

    #[test]
    fn long_passwords_are_refused_not_truncated() {
        let long = "x".repeat(80);
        let a = BasicAuth::new(vec![BasicAuthUser {
            name: "u".into(),
            bcrypt_hash: bcrypt::hash(&long, 4).unwrap(),
        }])
        .unwrap();
        assert!(!a.allows(Some(&header("u", &long))));
        assert!(!a.allows(Some(&header("u", &format!("{long}y")))));
    }

    #[test]
    fn the_cache_forgets_the_oldest_beyond_its_size() {
        let a = auth();
        let right = header("prometheus", "s3cret");
        assert!(a.allows(Some(&right)));
        // The same password with other user-name splits is not the same tag.
        assert!(!a.allows(Some(&header("prometheuss", "3cret"))));
        for i in 0..REMEMBERED {
            a.remember([i as u8; 32]);
        }
        assert_eq!(a.verified.lock().unwrap().len(), REMEMBERED);
        let runs = a.bcrypt_runs();
        assert!(a.allows(Some(&right)));
        assert_eq!(a.bcrypt_runs(), runs + 1, "forgotten: verified again");
        assert_eq!(a.verified.lock().unwrap().len(), REMEMBERED);
    }
}
