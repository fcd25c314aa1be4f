//! What `powerlens agent` reads from the network and from its operator: HTTP request heads
//! (with the credentials of an `Authorization: Basic` header) and the `--web-config` file.
//! Checks: a head that parses has a method of letters and a path that starts with `/`
//! (nothing the parser was given leaks in unchecked); credentials decode to no more bytes
//! than base64 can carry; a web config that parses holds only well-formed bcrypt hashes
//! and user names without `:` (what `htpasswd` and RFC 7617 allow).

use powerlens_agent::http::{decode_base64, parse_basic_authorization, parse_request};
use powerlens_agent::web_config::{is_bcrypt_hash, parse_web_config};

pub const HTTP_DICT: &[&str] = &[
    "GET ",
    "HEAD ",
    "POST ",
    " HTTP/1.1\r\n",
    " HTTP/1.0\r\n",
    "\r\n\r\n",
    "/metrics",
    "/healthz",
    "Accept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5\r\n",
    "Authorization: Basic ",
    "cHJvbWV0aGV1czpzZWNyZXQ=",
    "Host: 127.0.0.1:9877\r\n",
    "?x=1",
    "#",
];

pub fn http(input: &[u8]) {
    let Ok(request) = parse_request(input) else {
        return;
    };
    assert!(
        !request.method.is_empty() && request.method.bytes().all(|b| b.is_ascii_alphabetic()),
        "a method that is not a token: {:?}",
        request.method
    );
    assert!(
        request.path.starts_with('/'),
        "a path outside the origin form"
    );
    assert!(
        !request.path.contains(['?', '#']),
        "a query or fragment left in the path"
    );
    assert!(
        input.len() >= request.path.len(),
        "a path longer than the request"
    );
    if let Some(value) = &request.authorization {
        if let Some(token) = value.trim().split_once(' ').map(|(_, t)| t.trim()) {
            if let Some(bytes) = decode_base64(token) {
                assert!(
                    bytes.len() <= token.len() / 4 * 3 + 3,
                    "{} bytes decoded from {} characters of base64",
                    bytes.len(),
                    token.len()
                );
            }
        }
        if let Ok(c) = parse_basic_authorization(value) {
            assert!(!c.user.contains(':'), "a user name with a colon");
        }
    }
}

pub const WEB_CONFIG_DICT: &[&str] = &[
    "tls_server_config:\n",
    "  cert_file: agent.crt\n",
    "  key_file: agent.key\n",
    "  client_auth_type: RequireAndVerifyClientCert\n",
    "  client_ca_file: ca.crt\n",
    "  min_version: TLS13\n",
    "basic_auth_users:\n",
    "  prometheus: $2y$10$k01fl0ntZdGuCjfHW36i3uGKGbkmEBdHOxEQFSH89Ncbgqpk.hSL6\n",
    "auth_excluded_paths: [/healthz]\n",
    "cert: |\n",
    "---\n",
    "&a ",
    "*a",
    "\"",
    "'",
];

pub fn web_config(input: &[u8]) {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    let Ok(config) = parse_web_config(text) else {
        return;
    };
    for user in &config.basic_auth_users {
        assert!(
            is_bcrypt_hash(&user.bcrypt_hash),
            "a password accepted that is not a bcrypt hash"
        );
        assert!(!user.name.contains(':'), "a user name with a colon");
    }
}
