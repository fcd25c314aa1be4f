//! "Available, or why not and how to fix it": the shape every item of `info` takes.

use serde::Serialize;

use crate::SysError;

/// Whether something can be used; if not, why and what would make it usable.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Availability {
    pub available: bool,
    /// Where it came from when available; why not otherwise.
    pub reason: String,
    pub fix: Option<String>,
}

impl Availability {
    pub fn yes(reason: impl Into<String>) -> Self {
        Availability {
            available: true,
            reason: reason.into(),
            fix: None,
        }
    }

    pub fn no(reason: impl Into<String>, fix: Option<String>) -> Self {
        Availability {
            available: false,
            reason: reason.into(),
            fix,
        }
    }

    /// Unavailable because of `err`: its reason, and its fix where it has one (a missing
    /// driver, a permission).
    pub fn from_error(err: &SysError) -> Self {
        match err {
            SysError::Unavailable { reason, fix, .. } => {
                Availability::no(reason.clone(), fix.clone())
            }
            SysError::PermissionDenied { path, fix } => Availability::no(
                format!("permission denied reading {}", path.display()),
                Some(fix.clone()),
            ),
            other => Availability::no(other.to_string(), None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_become_reasons_and_fixes() {
        let denied = SysError::PermissionDenied {
            path: "/sys/x".into(),
            fix: "run as root".into(),
        };
        let a = Availability::from_error(&denied);
        assert!(!a.available && a.reason.contains("/sys/x"));
        assert_eq!(a.fix.as_deref(), Some("run as root"));
        let missing = SysError::NotFound {
            path: "/sys/y".into(),
        };
        let a = Availability::from_error(&missing);
        assert_eq!((a.reason.as_str(), a.fix), ("/sys/y does not exist", None));
    }
}
