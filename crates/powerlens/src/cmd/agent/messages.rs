//! What `powerlens agent` tells its operator about its web config and its address: the
//! library's errors with the flag they came from, how exposed the address is, and what a
//! change of the web config came to.

use powerlens_agent::{Error, Exposure, Reload};

/// An error of the agent library, with the flag its file or address came from and, for an
/// address, the likely fix.
pub fn error(e: Error) -> anyhow::Error {
    match e {
        Error::WebConfig { .. } => anyhow::anyhow!("--web-config {e}"),
        Error::Listen { addr, error } => {
            let hint = match error.kind() {
                std::io::ErrorKind::AddrInUse => {
                    "the port is in use (another agent?): stop it, or pick another with --listen ADDR:PORT"
                }
                std::io::ErrorKind::PermissionDenied => {
                    "ports below 1024 need root or CAP_NET_BIND_SERVICE: pick a higher port"
                }
                _ => "check the address with `ip addr`",
            };
            anyhow::anyhow!("cannot listen on {addr}: {error}: {hint}")
        }
        Error::Server(_) => anyhow::anyhow!("{e}"),
    }
}

/// The line for an address other hosts reach: a warning naming what is missing, or a
/// note saying what protects it.
pub fn exposure(exposure: &Exposure) -> String {
    match exposure {
        Exposure::Protected {
            addr,
            protection,
            open_paths,
        } => {
            let open = if open_paths.is_empty() {
                String::new()
            } else {
                format!(" ({} open)", open_paths.join(", "))
            };
            format!("serving on {addr}, reachable from other hosts: {protection}{open}")
        }
        Exposure::Unprotected { addr } => format!(
            "warning: serving on {addr}, reachable from other hosts, without TLS or authentication: anyone who reaches it reads the metrics; give --web-config FILE with tls_server_config and basic_auth_users (docs/AGENT.md#security)"
        ),
        Exposure::Unauthenticated { addr } => format!(
            "warning: serving on {addr}, reachable from other hosts, over TLS but without authentication: anyone who reaches it reads the metrics; add basic_auth_users or client certificates to the web config (docs/AGENT.md#security)"
        ),
        Exposure::Unencrypted { addr, protection } => format!(
            "warning: serving on {addr}, reachable from other hosts, with {protection}: passwords cross the network readable by anyone on the path; add tls_server_config to the web config (docs/AGENT.md#security)"
        ),
    }
}

/// Prints what a change of the web config came to.
pub fn reload(reload: Reload<'_>) {
    let keeping = "the agent serves with the web config as it was until its files change again";
    match reload {
        Reload::Loaded {
            path,
            protection,
            exposure: exposed,
        } => {
            eprintln!(
                "powerlens: --web-config {} changed: serving with {protection} from now on",
                path.display()
            );
            if let Some(e) = exposed {
                eprintln!("powerlens: {}", exposure(&e));
            }
        }
        Reload::TlsTurned { path, on } => eprintln!(
            "powerlens: warning: --web-config {}: TLS turned {} while serving: restart the agent for that (clients would have to change scheme); {keeping}",
            path.display(),
            if on { "on" } else { "off" }
        ),
        Reload::Refused(e) => eprintln!("powerlens: warning: {:#}; {keeping}", error(e)),
    }
}
