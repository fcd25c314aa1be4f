//! TLS for the agent (rustls with the `ring` provider): the server configuration built from
//! the web config's `tls_server_config`, and a connection that reads the socket at most
//! once per call, so that the server's deadline holds during the handshake too (a client
//! that dribbles its hello one byte at a time is cut off like one that dribbles a request).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection};

use crate::error::TlsError;
use crate::web_config::{ClientAuth, Pem, TlsServerConfig, TlsVersion};

/// The rustls configuration of `tls`; relative file names are relative to `dir` (the web
/// config's directory, as exporter-toolkit has them).
pub fn server_config(tls: &TlsServerConfig, dir: &Path) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: Vec<&'static rustls::SupportedProtocolVersion> = [
        (TlsVersion::Tls12, &rustls::version::TLS12),
        (TlsVersion::Tls13, &rustls::version::TLS13),
    ]
    .into_iter()
    .filter(|(v, _)| (tls.min_version..=tls.max_version).contains(v))
    .map(|(_, r)| r)
    .collect();
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(TlsError::Versions)?;
    let builder = match tls.client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        ClientAuth::VerifyIfGiven | ClientAuth::RequireAndVerify => {
            let pem = tls.client_ca.as_ref().expect("parsed");
            let mut roots = RootCertStore::empty();
            for cert in certificates("client_ca_file", pem, dir)? {
                roots.add(cert).map_err(TlsError::ClientCa)?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if tls.client_auth == ClientAuth::VerifyIfGiven {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier.build().map_err(TlsError::ClientVerifier)?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let certs = certificates("cert_file", &tls.cert, dir)?;
    let key = private_key(&tls.key, dir)?;
    let config = builder.with_single_cert(certs, key).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => TlsError::KeyMismatch,
        e => TlsError::CertificateAndKey(e),
    })?;
    Ok(Arc::new(config))
}

/// Where a PEM is, for messages: the key and the file.
fn describe(key: &str, pem: &Pem, dir: &Path) -> String {
    match pem {
        Pem::File(p) => format!("tls_server_config: {key} {}", dir.join(p).display()),
        Pem::Inline(_) => format!("tls_server_config: {}", key.trim_end_matches("_file")),
    }
}

fn read_pem(key: &str, pem: &Pem, dir: &Path) -> Result<Vec<u8>, TlsError> {
    match pem {
        Pem::File(p) => std::fs::read(dir.join(p)).map_err(|error| TlsError::ReadPem {
            place: describe(key, pem, dir),
            error,
        }),
        Pem::Inline(text) => Ok(text.clone().into_bytes()),
    }
}

fn certificates(
    key: &str,
    pem: &Pem,
    dir: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read_pem(key, pem, dir)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| TlsError::NotPem {
            place: describe(key, pem, dir),
            error,
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            place: describe(key, pem, dir),
        });
    }
    Ok(certs)
}

fn private_key(pem: &Pem, dir: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read_pem("key_file", pem, dir)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|error| TlsError::NoPrivateKey {
        place: describe("key_file", pem, dir),
        error,
    })
}

/// Whether the first byte a client sent opens a TLS handshake record (type 22); anything
/// else on a TLS port is most likely plain HTTP.
pub fn opens_tls(first: u8) -> bool {
    first == 0x16
}

/// A server-side TLS connection over a TCP socket. `read` does at most one socket read per
/// call and returns `Interrupted` when it brought no plaintext yet, so the caller checks
/// its deadline between reads.
pub struct TlsStream {
    conn: ServerConnection,
    pub sock: TcpStream,
}

impl TlsStream {
    pub fn new(config: Arc<ServerConfig>, sock: TcpStream) -> io::Result<TlsStream> {
        let conn = ServerConnection::new(config).map_err(io::Error::other)?;
        Ok(TlsStream { conn, sock })
    }

    fn send_pending(&mut self) -> io::Result<()> {
        while self.conn.wants_write() {
            self.conn.write_tls(&mut Send(&mut self.sock))?;
        }
        Ok(())
    }

    /// Says goodbye (close_notify) after the response, so that the client knows the body
    /// was whole.
    pub fn close(&mut self) {
        self.conn.send_close_notify();
        let _ = self.send_pending();
    }
}

impl Read for TlsStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.conn.reader().read(buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            other => return other,
        }
        self.send_pending()?;
        if self.conn.read_tls(&mut self.sock)? == 0 {
            // The client closed: the reader says how (cleanly or cut off).
            return self.conn.reader().read(buf);
        }
        if let Err(e) = self.conn.process_new_packets() {
            // The alert that says why, then the error.
            let _ = self.send_pending();
            return Err(io::Error::new(io::ErrorKind::InvalidData, e));
        }
        self.send_pending()?;
        match self.conn.reader().read(buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                Err(io::ErrorKind::Interrupted.into())
            }
            other => other,
        }
    }
}

impl Write for TlsStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.conn.writer().write(buf)?;
        self.send_pending()?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.conn.writer().flush()?;
        self.send_pending()
    }
}

/// Writes to the socket one buffer at a time. rustls writes its records with
/// `write_vectored`, which std implements with writev(2): to a client that has gone, that
/// raises SIGPIPE and ended the agent (exit 141). `write` is send(2) with MSG_NOSIGNAL: an
/// error for this connection only.
struct Send<'a>(&'a mut TcpStream);

impl Write for Send<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}
