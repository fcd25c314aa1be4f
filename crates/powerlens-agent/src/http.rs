//! The agent's HTTP/1.x: parsing a request head and writing a response. A scraper sends a
//! small `GET`; anything else gets the right status and the connection is closed. The
//! parser takes bytes as they arrived and never panics or allocates beyond the head's
//! limit, whatever a client sends.

/// The largest request head accepted (request line and headers).
pub const MAX_HEAD: usize = 8 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The path, without the query.
    pub path: String,
    pub accept: Option<String>,
    pub authorization: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadError {
    /// More bytes are needed: the head has not ended yet.
    Incomplete,
    /// Not an HTTP request (400).
    Malformed,
    /// The head is longer than [`MAX_HEAD`] (431).
    TooLarge,
}

impl HeadError {
    pub fn status(self) -> u16 {
        match self {
            HeadError::Incomplete | HeadError::Malformed => 400,
            HeadError::TooLarge => 431,
        }
    }
}

/// Parses a request head from the bytes received so far.
pub fn parse_request(bytes: &[u8]) -> Result<Request, HeadError> {
    let end = match find(bytes, b"\r\n\r\n") {
        Some(i) => i,
        None if bytes.len() >= MAX_HEAD => return Err(HeadError::TooLarge),
        None => return Err(HeadError::Incomplete),
    };
    if end > MAX_HEAD {
        return Err(HeadError::TooLarge);
    }
    let head = std::str::from_utf8(&bytes[..end]).map_err(|_| HeadError::Malformed)?;
    let mut lines = head.split("\r\n");
    let request_line = lines.next().ok_or(HeadError::Malformed)?;
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HeadError::Malformed);
    };
    let token = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphabetic());
    if !token(method) || !target.starts_with('/') || !version.starts_with("HTTP/1.") {
        return Err(HeadError::Malformed);
    }
    let path = target
        .split(['?', '#'])
        .next()
        .unwrap_or(target)
        .to_string();
    let mut request = Request {
        method: method.to_string(),
        path,
        accept: None,
        authorization: None,
    };
    for line in lines {
        let (name, value) = line.split_once(':').ok_or(HeadError::Malformed)?;
        if name.is_empty() || name.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(HeadError::Malformed);
        }
        let value = value.trim().to_string();
        if name.eq_ignore_ascii_case("accept") {
            request.accept = Some(value);
        } else if name.eq_ignore_ascii_case("authorization") {
            request.authorization = Some(value);
        }
    }
    Ok(request)
}

/// The user and password of an `Authorization: Basic …` header (RFC 7617).
#[derive(Clone, PartialEq, Eq)]
pub struct BasicCredentials {
    pub user: String,
    /// Bytes: a password need not be UTF-8, and bcrypt takes bytes.
    pub password: Vec<u8>,
}

// Never print a password, not even in a debug message.
impl std::fmt::Debug for BasicCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BasicCredentials")
            .field("user", &self.user)
            .field("password", &"…")
            .finish()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthorizationError {
    /// Another scheme than `Basic` (Bearer, Digest…).
    NotBasic,
    /// The credentials are not base64.
    NotBase64,
    /// The decoded credentials have no `:` between user and password.
    NoColon,
    /// The user is not UTF-8 (no configured user can match it).
    UserNotUtf8,
}

/// Decodes an `Authorization` header value of the Basic scheme: `Basic base64(user:password)`.
/// The scheme is case-insensitive; the user ends at the first `:` (RFC 7617), so the
/// password may hold colons.
pub fn parse_basic_authorization(value: &str) -> Result<BasicCredentials, AuthorizationError> {
    let value = value.trim();
    let (scheme, token) = value.split_once(' ').ok_or(AuthorizationError::NotBasic)?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(AuthorizationError::NotBasic);
    }
    let decoded = decode_base64(token.trim()).ok_or(AuthorizationError::NotBase64)?;
    let colon = decoded
        .iter()
        .position(|&b| b == b':')
        .ok_or(AuthorizationError::NoColon)?;
    let user = std::str::from_utf8(&decoded[..colon])
        .map_err(|_| AuthorizationError::UserNotUtf8)?
        .to_string();
    Ok(BasicCredentials {
        user,
        password: decoded[colon + 1..].to_vec(),
    })
}

/// Standard base64 (RFC 4648 alphabet), with or without its `=` padding. `None` on any
/// other character, a misplaced `=`, or a length no encoding has.
pub fn decode_base64(text: &str) -> Option<Vec<u8>> {
    fn value(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let bytes = text.as_bytes();
    let data = match bytes {
        [rest @ .., b'=', b'='] | [rest @ .., b'='] if bytes.len().is_multiple_of(4) => rest,
        _ => bytes,
    };
    if data.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(data.len() / 4 * 3 + 2);
    for chunk in data.chunks(4) {
        let mut acc = 0u32;
        for &c in chunk {
            acc = (acc << 6) | value(c)?;
        }
        // A short final chunk of n characters carries n - 1 bytes in its high bits.
        let bits = 6 * chunk.len();
        acc <<= 24 - bits;
        out.extend_from_slice(&acc.to_be_bytes()[1..bits / 8 + 1]);
    }
    Some(out)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A whole response, `Connection: close`.
pub fn response(
    status: u16,
    content_type: &str,
    extra_headers: &[(&str, &str)],
    body: &[u8],
) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Error",
    };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in extra_headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prometheus_scrape_is_parsed() {
        let r = parse_request(
            b"GET /metrics?x=1 HTTP/1.1\r\nHost: 127.0.0.1:9877\r\nAccept: application/openmetrics-text;version=1.0.0\r\nauthorization: Basic YTpi\r\n\r\n",
        )
        .unwrap();
        assert_eq!((r.method.as_str(), r.path.as_str()), ("GET", "/metrics"));
        assert_eq!(
            r.accept.as_deref(),
            Some("application/openmetrics-text;version=1.0.0")
        );
        assert_eq!(r.authorization.as_deref(), Some("Basic YTpi"));
    }

    #[test]
    fn bad_heads_are_refused_with_the_right_status() {
        assert_eq!(
            parse_request(b"GET / HTTP/1.1\r\n"),
            Err(HeadError::Incomplete)
        );
        assert_eq!(
            parse_request(b"\x16\x03\x01\x02\x00\r\n\r\n"),
            Err(HeadError::Malformed)
        );
        assert_eq!(
            parse_request(b"GET /  HTTP/1.1\r\n\r\n"),
            Err(HeadError::Malformed)
        );
        assert_eq!(
            parse_request(b"GET / HTTP/1.1\r\nNoColon\r\n\r\n"),
            Err(HeadError::Malformed)
        );
        assert_eq!(
            parse_request(b"GET http://x/ HTTP/1.1\r\n\r\n"),
            Err(HeadError::Malformed)
        );
        let big = [b'a'; MAX_HEAD + 10];
        assert_eq!(parse_request(&big), Err(HeadError::TooLarge));
        assert_eq!(HeadError::TooLarge.status(), 431);
    }

    #[test]
    fn base64_decodes_the_rfc_4648_vectors() {
        // RFC 4648, section 10, padded and unpadded.
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(decode_base64(encoded).as_deref(), Some(plain.as_bytes()));
            let bare = encoded.trim_end_matches('=');
            assert_eq!(decode_base64(bare).as_deref(), Some(plain.as_bytes()));
        }
        for bad in [
            "Z", "Zg=", "Z===", "Zm9v=", "Zm 9", "Zm9v\n", "Zg==Zg==", "Zm-_",
        ] {
            assert_eq!(decode_base64(bad), None, "{bad:?}");
        }
        assert_eq!(decode_base64("/+8=").as_deref(), Some(&[0xff, 0xef][..]));
    }

    #[test]
    fn basic_credentials_are_decoded_as_rfc_7617_has_them() {
        // The RFC's own example.
        let c = parse_basic_authorization("Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==").unwrap();
        assert_eq!(c.user, "Aladdin");
        assert_eq!(c.password, b"open sesame");
        // The scheme is case-insensitive; the password keeps its colons.
        let c = parse_basic_authorization("basic dTphOmI=").unwrap();
        assert_eq!((c.user.as_str(), c.password.as_slice()), ("u", &b"a:b"[..]));
        assert!(!format!("{c:?}").contains("a:b"), "{c:?}");
        assert_eq!(
            parse_basic_authorization("Bearer dTphOmI="),
            Err(AuthorizationError::NotBasic)
        );
        assert_eq!(
            parse_basic_authorization("Basic"),
            Err(AuthorizationError::NotBasic)
        );
        assert_eq!(
            parse_basic_authorization("Basic dTph!"),
            Err(AuthorizationError::NotBase64)
        );
        // "user" without a colon.
        assert_eq!(
            parse_basic_authorization("Basic dXNlcg=="),
            Err(AuthorizationError::NoColon)
        );
        // A user of bytes that are not UTF-8 (0xff), password "p".
        assert_eq!(
            parse_basic_authorization("Basic /zpw"),
            Err(AuthorizationError::UserNotUtf8)
        );
    }

    #[test]
    fn responses_carry_their_length_and_close() {
        let r = String::from_utf8(response(200, "text/plain", &[("X-A", "b")], b"hi")).unwrap();
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(r.contains("Content-Length: 2\r\n"));
        assert!(r.contains("Connection: close\r\nX-A: b\r\n\r\nhi"));
    }
}
