//! The agent's web configuration (`powerlens agent --web-config FILE`): the file format of
//! Prometheus's exporter-toolkit, the one node_exporter's `--web.config.file` reads, so one
//! file serves both. TLS (`tls_server_config`), basic auth with bcrypt hashes
//! (`basic_auth_users`) and paths left open (`auth_excluded_paths`); every other key of the
//! format is refused with the reason, and an unknown key with the list of keys, so that a
//! misspelt key never leaves the agent less protected than its file says.
//!
//! [`parse_web_config`] takes the file's text and touches nothing else: `security.rs`
//! reads the certificates and checks the hashes.

use std::borrow::Cow;
use std::path::PathBuf;

use saphyr_parser::{Event, Parser, ScalarStyle, Span};

/// The largest web configuration accepted: a few keys, users and perhaps inline PEM.
pub const MAX_WEB_CONFIG: usize = 1 << 20;
/// Nesting deeper than this is refused (the format nests three levels).
const MAX_DEPTH: usize = 16;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WebConfig {
    /// `None`: plain HTTP.
    pub tls: Option<TlsServerConfig>,
    /// Empty: no basic auth.
    pub basic_auth_users: Vec<BasicAuthUser>,
    /// Paths served without basic auth (exporter-toolkit's `auth_excluded_paths`).
    pub auth_excluded_paths: Vec<String>,
}

#[derive(Clone, PartialEq, Eq)]
pub struct BasicAuthUser {
    pub name: String,
    /// `$2y$10$…`: 60 characters, checked for shape only.
    pub bcrypt_hash: String,
}

// The hash is half a secret (it can be attacked offline): not in debug output.
impl std::fmt::Debug for BasicAuthUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BasicAuthUser({:?}, $2…)", self.name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsServerConfig {
    pub cert: Pem,
    pub key: Pem,
    pub client_auth: ClientAuth,
    /// Set exactly when `client_auth` verifies certificates.
    pub client_ca: Option<Pem>,
    pub min_version: TlsVersion,
    pub max_version: TlsVersion,
}

/// A PEM file (`cert_file`: relative paths are relative to the web config's directory, as
/// exporter-toolkit has them) or PEM text in the file itself (`cert`).
#[derive(Clone, PartialEq, Eq)]
pub enum Pem {
    File(PathBuf),
    Inline(String),
}

// Inline PEM may be a private key.
impl std::fmt::Debug for Pem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pem::File(p) => write!(f, "File({p:?})"),
            Pem::Inline(_) => write!(f, "Inline(…)"),
        }
    }
}

/// exporter-toolkit's `client_auth_type`, the values that authenticate someone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// `NoClientCert` (the default).
    None,
    /// `VerifyClientCertIfGiven`: a certificate is optional, but checked when sent.
    VerifyIfGiven,
    /// `RequireAndVerifyClientCert`.
    RequireAndVerify,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    Tls12,
    Tls13,
}

/// What is wrong, and on which line of the file (1-based; 0 when the whole file is meant).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebConfigError {
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for WebConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.message)
        } else {
            write!(f, "line {}: {}", self.line, self.message)
        }
    }
}

impl std::error::Error for WebConfigError {}

fn error<T>(line: usize, message: impl Into<String>) -> Result<T, WebConfigError> {
    Err(WebConfigError {
        line,
        message: message.into(),
    })
}

/// Parses a web configuration. An empty file (or `{}`) configures nothing: plain HTTP
/// without authentication, as with exporter-toolkit.
pub fn parse_web_config(text: &str) -> Result<WebConfig, WebConfigError> {
    if text.len() > MAX_WEB_CONFIG {
        return error(
            0,
            format!(
                "{} bytes: a web config is a few keys, at most {MAX_WEB_CONFIG} bytes",
                text.len()
            ),
        );
    }
    match document(text)? {
        None => Ok(WebConfig::default()),
        Some(root) => web_config(root),
    }
}

// ---------------------------------------------------------------------------------------
// A YAML document as a small tree with lines. Aliases are refused: a config that needs
// them is not one of this format's.

#[derive(Debug)]
enum Node<'a> {
    Scalar {
        text: Cow<'a, str>,
        style: ScalarStyle,
        line: usize,
    },
    Sequence {
        items: Vec<Node<'a>>,
        line: usize,
    },
    Mapping {
        entries: Vec<Entry<'a>>,
        line: usize,
    },
}

#[derive(Debug)]
struct Entry<'a> {
    key: String,
    line: usize,
    value: Node<'a>,
}

impl Node<'_> {
    fn line(&self) -> usize {
        match self {
            Node::Scalar { line, .. }
            | Node::Sequence { line, .. }
            | Node::Mapping { line, .. } => *line,
        }
    }

    /// `~`, `null` or nothing at all.
    fn is_null(&self) -> bool {
        matches!(self, Node::Scalar { text, style: ScalarStyle::Plain, .. }
            if matches!(text.as_ref(), "" | "~" | "null" | "Null" | "NULL"))
    }
}

struct Events<'a> {
    parser: Parser<'a, saphyr_parser::StrInput<'a>>,
    last_line: usize,
}

impl<'a> Events<'a> {
    fn next(&mut self) -> Result<(Event<'a>, Span), WebConfigError> {
        match self.parser.next_event() {
            Some(Ok((event, span))) => {
                self.last_line = span.start.line();
                Ok((event, span))
            }
            Some(Err(e)) => error(
                e.marker().line(),
                format!(
                    "not valid YAML: {} (column {}): fix the syntax (indent with spaces, quote values that start with a special character)",
                    e.info(),
                    e.marker().col() + 1
                ),
            ),
            None => error(self.last_line, "the YAML ends early"),
        }
    }
}

/// The one document of the file, `None` when there is none.
fn document(text: &str) -> Result<Option<Node<'_>>, WebConfigError> {
    let mut events = Events {
        parser: Parser::new_from_str(text),
        last_line: 1,
    };
    let mut root = None;
    loop {
        let (event, span) = events.next()?;
        match event {
            Event::StreamStart | Event::DocumentEnd | Event::Nothing => {}
            Event::StreamEnd => return Ok(root),
            Event::DocumentStart(_) if root.is_some() => {
                return error(
                    span.start.line(),
                    "a second YAML document (`---`): the web config is one document; remove it",
                )
            }
            Event::DocumentStart(_) => {
                let (event, span) = events.next()?;
                root = Some(node(&mut events, event, span, 0)?);
            }
            _ => return error(span.start.line(), "unexpected YAML outside a document"),
        }
    }
}

fn node<'a>(
    events: &mut Events<'a>,
    event: Event<'a>,
    span: Span,
    depth: usize,
) -> Result<Node<'a>, WebConfigError> {
    let line = span.start.line();
    if depth > MAX_DEPTH {
        return error(
            line,
            format!("nested more than {MAX_DEPTH} levels deep: the format nests three"),
        );
    }
    match event {
        Event::Scalar(text, style, _, _) => Ok(Node::Scalar { text, style, line }),
        Event::SequenceStart(..) => {
            let mut items = Vec::new();
            loop {
                let (event, span) = events.next()?;
                if matches!(event, Event::SequenceEnd) {
                    return Ok(Node::Sequence { items, line });
                }
                items.push(node(events, event, span, depth + 1)?);
            }
        }
        Event::MappingStart(..) => {
            let mut entries: Vec<Entry<'a>> = Vec::new();
            loop {
                let (event, span) = events.next()?;
                let key_line = span.start.line();
                let key = match event {
                    Event::MappingEnd => return Ok(Node::Mapping { entries, line }),
                    Event::Scalar(text, ..) => text.into_owned(),
                    _ => {
                        return error(
                            key_line,
                            "a key that is not a plain word: write `key: value`",
                        )
                    }
                };
                if let Some(first) = entries.iter().find(|e| e.key == key) {
                    return error(
                        key_line,
                        format!(
                            "`{key}` appears twice (first on line {}): keep one",
                            first.line
                        ),
                    );
                }
                let (event, span) = events.next()?;
                let value = node(events, event, span, depth + 1)?;
                entries.push(Entry {
                    key,
                    line: key_line,
                    value,
                });
            }
        }
        Event::Alias(_) => error(
            line,
            "a YAML alias (`*name`): write the value itself; aliases are not supported",
        ),
        _ => error(line, "unexpected YAML"),
    }
}

// ---------------------------------------------------------------------------------------
// The format.

const TOP_KEYS: &str = "tls_server_config, basic_auth_users, auth_excluded_paths";
const TLS_KEYS: &str = "cert_file, key_file, cert, key, client_auth_type, client_ca_file, client_ca, min_version, max_version";

/// The entries of a mapping (none for a null value), or an error naming `what`.
fn mapping<'a>(node: Node<'a>, what: &str) -> Result<Vec<Entry<'a>>, WebConfigError> {
    if node.is_null() {
        return Ok(Vec::new());
    }
    match node {
        Node::Mapping { entries, .. } => Ok(entries),
        other => error(
            other.line(),
            format!("{what} is a mapping of `key: value` lines, indented under it"),
        ),
    }
}

/// A scalar's text (`None` when null), or an error naming `key`.
fn scalar(node: Node<'_>, key: &str) -> Result<Option<String>, WebConfigError> {
    if node.is_null() {
        return Ok(None);
    }
    match node {
        Node::Scalar { text, .. } => Ok(Some(text.into_owned())),
        other => error(
            other.line(),
            format!("`{key}` takes one value on its line, not a list or a mapping"),
        ),
    }
}

fn web_config(root: Node<'_>) -> Result<WebConfig, WebConfigError> {
    let mut config = WebConfig::default();
    for Entry { key, line, value } in mapping(root, "the web config")? {
        match key.as_str() {
            "tls_server_config" => config.tls = tls_server_config(value, line)?,
            "basic_auth_users" => config.basic_auth_users = basic_auth_users(value)?,
            "auth_excluded_paths" => config.auth_excluded_paths = excluded_paths(value)?,
            "http_server_config" => {
                return error(
                    line,
                    "`http_server_config` is not supported: the agent serves HTTP/1.1 and sets its own headers; remove it",
                )
            }
            "rate_limit" => {
                return error(
                    line,
                    "`rate_limit` is not supported: the agent serves at most 32 connections at once; remove it",
                )
            }
            _ => {
                return error(
                    line,
                    format!("unknown key `{key}`: the keys are {TOP_KEYS}"),
                )
            }
        }
    }
    Ok(config)
}

fn tls_server_config(
    node: Node<'_>,
    line: usize,
) -> Result<Option<TlsServerConfig>, WebConfigError> {
    let entries = mapping(node, "`tls_server_config`")?;
    if entries.is_empty() {
        // exporter-toolkit serves plain HTTP then, too.
        return Ok(None);
    }
    let mut values: Vec<(String, usize, String)> = Vec::new();
    for Entry { key, line, value } in entries {
        match key.as_str() {
            "cert_file" | "key_file" | "cert" | "key" | "client_auth_type" | "client_ca_file"
            | "client_ca" | "min_version" | "max_version" => {
                if let Some(v) = scalar(value, &key)? {
                    values.push((key, line, v));
                }
            }
            "cipher_suites" | "curve_preferences" | "prefer_server_cipher_suites" => {
                return error(
                    line,
                    format!("`{key}` is not supported: the agent uses rustls's choice (TLS 1.3 and 1.2 AEAD suites, X25519 and NIST curves); remove it"),
                )
            }
            "client_allowed_sans" => {
                return error(
                    line,
                    "`client_allowed_sans` is not supported: any client certificate the client CA signed is accepted; remove it, or give the agent a CA of its own",
                )
            }
            _ => {
                return error(
                    line,
                    format!("unknown key `{key}` in tls_server_config: the keys are {TLS_KEYS}"),
                )
            }
        }
    }
    let get = |k: &str| values.iter().find(|(key, ..)| key == k);
    let pem = |file: &str, inline: &str| -> Result<Option<Pem>, WebConfigError> {
        match (get(file), get(inline)) {
            (Some(_), Some((_, l, _))) => error(
                *l,
                format!("both `{file}` and `{inline}`: give the PEM one way; remove one"),
            ),
            (Some((_, _, path)), None) => Ok(Some(Pem::File(PathBuf::from(path)))),
            (None, Some((_, _, text))) => Ok(Some(Pem::Inline(text.clone()))),
            (None, None) => Ok(None),
        }
    };
    let Some(cert) = pem("cert_file", "cert")? else {
        return error(
            line,
            "tls_server_config has no `cert_file`: add `cert_file` and `key_file` (PEM), or remove tls_server_config to serve plain HTTP",
        );
    };
    let Some(key) = pem("key_file", "key")? else {
        return error(
            line,
            "tls_server_config has no `key_file`: add the certificate's private key (PEM)",
        );
    };
    let client_auth = match get("client_auth_type") {
        None => ClientAuth::None,
        Some((_, l, v)) => match v.as_str() {
            "NoClientCert" => ClientAuth::None,
            "VerifyClientCertIfGiven" => ClientAuth::VerifyIfGiven,
            "RequireAndVerifyClientCert" => ClientAuth::RequireAndVerify,
            "RequestClientCert" | "RequireAnyClientCert" => {
                return error(
                    *l,
                    format!("client_auth_type {v} is not supported: a certificate nobody verifies authenticates nobody; write RequireAndVerifyClientCert and set client_ca_file"),
                )
            }
            other => {
                return error(
                    *l,
                    format!("client_auth_type `{other}`: write NoClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert"),
                )
            }
        },
    };
    let client_ca = pem("client_ca_file", "client_ca")?;
    match (client_auth, &client_ca) {
        (ClientAuth::None, Some(_)) => {
            let l = get("client_ca_file")
                .or(get("client_ca"))
                .map_or(line, |v| v.1);
            return error(
                l,
                "a client CA without client_auth_type: add `client_auth_type: RequireAndVerifyClientCert`, or remove the CA",
            );
        }
        (ClientAuth::VerifyIfGiven | ClientAuth::RequireAndVerify, None) => {
            let l = get("client_auth_type").map_or(line, |v| v.1);
            return error(
                l,
                "client certificates are verified against `client_ca_file`: add it (the PEM of the CA that signs them)",
            );
        }
        _ => {}
    }
    let version = |k: &str, default: TlsVersion| -> Result<TlsVersion, WebConfigError> {
        match get(k) {
            None => Ok(default),
            Some((_, _, v)) if v == "TLS12" => Ok(TlsVersion::Tls12),
            Some((_, _, v)) if v == "TLS13" => Ok(TlsVersion::Tls13),
            Some((_, l, v)) if v == "TLS10" || v == "TLS11" => error(
                *l,
                format!(
                    "{k} {v}: the agent serves TLS 1.2 and 1.3 only (rustls); write TLS12 or TLS13"
                ),
            ),
            Some((_, l, v)) => error(*l, format!("{k} `{v}`: write TLS12 or TLS13")),
        }
    };
    let min_version = version("min_version", TlsVersion::Tls12)?;
    let max_version = version("max_version", TlsVersion::Tls13)?;
    if min_version > max_version {
        let l = get("max_version").map_or(line, |v| v.1);
        return error(
            l,
            "max_version is below min_version: no TLS version is left; raise max_version",
        );
    }
    Ok(Some(TlsServerConfig {
        cert,
        key,
        client_auth,
        client_ca,
        min_version,
        max_version,
    }))
}

fn basic_auth_users(node: Node<'_>) -> Result<Vec<BasicAuthUser>, WebConfigError> {
    let mut users = Vec::new();
    for Entry { key, line, value } in mapping(node, "`basic_auth_users`")? {
        if key.is_empty() || key.contains(':') || key.chars().any(char::is_control) {
            return error(
                line,
                format!("basic_auth_users: the user {key:?} cannot log in with basic auth (no `:`, no control characters, not empty): rename it"),
            );
        }
        let hash = scalar(value, &key)?.unwrap_or_default();
        if !is_bcrypt_hash(&hash) {
            // The value is not echoed: it may be a password written in clear.
            return error(
                line,
                format!("basic_auth_users: the password of `{key}` is not a bcrypt hash ($2y$10$ and 53 more characters): put the hash, not the password; make one with `htpasswd -nBC 10 \"\" | tr -d ':\\n'`"),
            );
        }
        users.push(BasicAuthUser {
            name: key,
            bcrypt_hash: hash,
        });
    }
    Ok(users)
}

fn excluded_paths(node: Node<'_>) -> Result<Vec<String>, WebConfigError> {
    if node.is_null() {
        return Ok(Vec::new());
    }
    let Node::Sequence { items, .. } = node else {
        return error(
            node.line(),
            "auth_excluded_paths is a list of paths, one `- /path` line each",
        );
    };
    let mut paths = Vec::new();
    for item in items {
        let line = item.line();
        match scalar(item, "auth_excluded_paths")? {
            Some(p) if p.starts_with('/') => paths.push(p),
            _ => {
                return error(
                    line,
                    "auth_excluded_paths: a path starts with `/` (e.g. /healthz)",
                )
            }
        }
    }
    Ok(paths)
}

/// The shape of a bcrypt hash: `$2a$`, `$2b$`, `$2x$` or `$2y$`, a cost of 04 to 31, `$`,
/// then 53 characters of bcrypt's base64 (salt and hash).
pub fn is_bcrypt_hash(hash: &str) -> bool {
    let b = hash.as_bytes();
    b.len() == 60
        && b.starts_with(b"$2")
        && matches!(b[2], b'a' | b'b' | b'x' | b'y')
        && b[3] == b'$'
        && b[6] == b'$'
        && b[4].is_ascii_digit()
        && b[5].is_ascii_digit()
        && (4..=31).contains(&((b[4] - b'0') * 10 + (b[5] - b'0')))
        && b[7..]
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "$2y$10$k01fl0ntZdGuCjfHW36i3uGKGbkmEBdHOxEQFSH89Ncbgqpk.hSL6";

    fn err(text: &str) -> WebConfigError {
        parse_web_config(text).unwrap_err()
    }

    #[test]
    fn node_exporter_style_config_is_read() {
        let c = parse_web_config(&format!(
            "# as for node_exporter\ntls_server_config:\n  cert_file: server.crt\n  key_file: \"/etc/keys/server.key\"\n  min_version: TLS13\nbasic_auth_users:\n  prometheus: {HASH}\n  'other': '{HASH}'\nauth_excluded_paths: [/healthz]\n"
        ))
        .unwrap();
        let tls = c.tls.unwrap();
        assert_eq!(tls.cert, Pem::File("server.crt".into()));
        assert_eq!(tls.key, Pem::File("/etc/keys/server.key".into()));
        assert_eq!(tls.client_auth, ClientAuth::None);
        assert_eq!(
            (tls.min_version, tls.max_version),
            (TlsVersion::Tls13, TlsVersion::Tls13)
        );
        let names: Vec<_> = c.basic_auth_users.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(names, ["prometheus", "other"]);
        assert!(c.basic_auth_users.iter().all(|u| u.bcrypt_hash == HASH));
        assert_eq!(c.auth_excluded_paths, ["/healthz"]);
    }

    #[test]
    fn inline_pem_and_client_certificates() {
        let c = parse_web_config(
            "tls_server_config:\n  cert: |\n    -----BEGIN CERTIFICATE-----\n    AAAA\n    -----END CERTIFICATE-----\n  key_file: k.pem\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n",
        )
        .unwrap();
        let tls = c.tls.unwrap();
        assert_eq!(
            tls.cert,
            Pem::Inline("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".into())
        );
        assert_eq!(tls.client_auth, ClientAuth::RequireAndVerify);
        assert_eq!(tls.client_ca, Some(Pem::File("ca.pem".into())));
    }

    #[test]
    fn empty_files_configure_nothing() {
        for text in [
            "",
            "# nothing\n",
            "---\n",
            "{}\n",
            "tls_server_config:\nbasic_auth_users: {}\n",
        ] {
            assert_eq!(
                parse_web_config(text).unwrap(),
                WebConfig::default(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn unknown_keys_are_refused_with_their_line_and_the_keys() {
        let e = err("basic_auth_users:\ntls_server_confg:\n  cert_file: a\n");
        assert_eq!(e.line, 2);
        assert!(e.message.contains("unknown key `tls_server_confg`"), "{e}");
        assert!(
            e.message.contains("tls_server_config, basic_auth_users"),
            "{e}"
        );
        let e = err("tls_server_config:\n  cert_file: a\n  key_file: b\n  certfile: c\n");
        assert_eq!(e.line, 4);
        assert!(
            e.to_string()
                .starts_with("line 4: unknown key `certfile` in tls_server_config"),
            "{e}"
        );
    }

    #[test]
    fn exporter_toolkit_keys_powerlens_does_not_serve_say_so() {
        let e = err("http_server_config:\n  http2: false\n");
        assert!(
            e.message.contains("not supported") && e.message.contains("remove it"),
            "{e}"
        );
        let e = err("tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n");
        assert_eq!(e.line, 4);
        assert!(
            e.message.contains("`cipher_suites` is not supported"),
            "{e}"
        );
        let e = err("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAnyClientCert\n");
        assert!(e.message.contains("RequireAndVerifyClientCert"), "{e}");
        let e = err("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS11\n");
        assert!(e.message.contains("TLS 1.2 and 1.3 only"), "{e}");
    }

    #[test]
    fn inconsistent_tls_settings_are_refused() {
        let e = err("tls_server_config:\n  key_file: b\n");
        assert_eq!(e.line, 1);
        assert!(e.message.contains("no `cert_file`"), "{e}");
        let e = err("tls_server_config:\n  cert_file: a\n");
        assert!(e.message.contains("no `key_file`"), "{e}");
        let e = err("tls_server_config:\n  cert_file: a\n  cert: x\n  key_file: b\n");
        assert!(e.message.contains("both `cert_file` and `cert`"), "{e}");
        let e = err("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: c\n");
        assert_eq!(e.line, 4);
        assert!(e.message.contains("client_auth_type"), "{e}");
        let e = err("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: VerifyClientCertIfGiven\n");
        assert!(e.message.contains("add it"), "{e}");
        let e = err("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS13\n  max_version: TLS12\n");
        assert_eq!(e.line, 5);
    }

    #[test]
    fn a_password_in_clear_is_refused_and_not_echoed() {
        let e = err("basic_auth_users:\n  alice: hunter2\n");
        assert_eq!(e.line, 2);
        assert!(
            e.message.contains("not a bcrypt hash") && e.message.contains("htpasswd"),
            "{e}"
        );
        assert!(!e.message.contains("hunter2"), "{e}");
        assert!(err(&format!("basic_auth_users:\n  'a:b': {HASH}\n"))
            .message
            .contains("rename it"));
        assert!(err("basic_auth_users:\n  alice:\n")
            .message
            .contains("not a bcrypt hash"));
        assert!(err("basic_auth_users: [alice]\n")
            .message
            .contains("mapping"));
    }

    #[test]
    fn bad_yaml_names_its_line() {
        let e = err("basic_auth_users:\n  alice: \"unterminated\n");
        assert!(e.message.starts_with("not valid YAML"), "{e}");
        assert!(e.line >= 2, "{e:?}");
        let e = err(&format!(
            "basic_auth_users:\n  alice: {HASH}\n  alice: {HASH}\n"
        ));
        assert_eq!(e.line, 3);
        assert!(e.message.contains("first on line 2"), "{e}");
        let e = err("a: &x 1\nb: *x\n");
        assert!(e.message.contains("alias"), "{e}");
        assert!(err("basic_auth_users:\n---\nbasic_auth_users:\n")
            .message
            .contains("second YAML document"));
        assert!(err("just a string\n").message.contains("mapping"));
        assert!(err("auth_excluded_paths: [healthz]\n")
            .message
            .contains("starts with `/`"));
        let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(err(&format!("auth_excluded_paths: {deep}\n"))
            .message
            .contains("nested"));
    }

    #[test]
    fn bcrypt_hash_shapes() {
        assert!(is_bcrypt_hash(HASH));
        assert!(is_bcrypt_hash(&HASH.replace("$2y$", "$2b$")));
        assert!(!is_bcrypt_hash(&HASH.replace("$10$", "$03$")));
        assert!(!is_bcrypt_hash(&HASH.replace("$2y$", "$1y$")));
        assert!(!is_bcrypt_hash(&HASH[..59]));
        // 60 bytes, one character not ASCII.
        assert!(!is_bcrypt_hash(&format!("{}é{}", &HASH[..10], &HASH[12..])));
    }
}
