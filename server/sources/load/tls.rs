//! The load generator's connections: TCP, TLS (rustls) and, for HTTP/2, hyper's handshake
//! on top, and the one test connection made before a run ([`negotiate`]) that learns which
//! protocol the server speaks.
//!
//! Owns [`TlsClient`] (the client configuration of `https://` targets: the system's CA
//! store through rustls-platform-verifier, so `SSL_CERT_FILE` / `SSL_CERT_DIR` are
//! honoured as for the console's other HTTPS, plus `--ca-file`, plus a client certificate
//! for mutual TLS; the aws-lc-rs provider reqwest already brings), [`Protocol`], [`connect`]
//! and [`open`]. Must not record or schedule: the engine in this module's parent times what
//! opening a connection costs (the first request on a connection carries it; later ones on
//! the kept-alive connection do not).
//!
//! ALPN (RFC 7301): `https://` offers `h2` and `http/1.1` for the test connection
//! (`http/1.1` only with `--http1`, `h2` only with `--http2`); the run's connections then
//! offer only what the test connection agreed, so every connection of a run speaks one
//! protocol. `--http2` on `http://` is HTTP/2 with prior knowledge (h2c, RFC 9113 §3.3).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::client::conn::http2;
use hyper_util::rt::TokioIo;
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{self, ClientConfig};
use tokio_util::either::Either;

use super::LoadError;
use super::h1::Stream;

/// Which HTTP version the command line asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HttpVersion {
    /// HTTP/1.1 on `http://`; on `https://` what ALPN agrees, h2 preferred.
    #[default]
    Auto,
    /// `--http1`: HTTP/1.1 only.
    Http1,
    /// `--http2`: HTTP/2 only (h2c with prior knowledge on `http://`).
    Http2,
}

/// The protocol a run's connections speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1 over TCP.
    Http1,
    /// HTTP/1.1 over TLS (ALPN `http/1.1`, or none).
    Http1Tls,
    /// HTTP/2 over TLS, agreed by ALPN.
    Http2Tls,
    /// HTTP/2 over TCP with prior knowledge.
    H2c,
}

impl Protocol {
    /// For people and the stored run: `HTTP/2 over TLS (ALPN h2)`.
    pub fn describe(self) -> &'static str {
        match self {
            Protocol::Http1 => "HTTP/1.1",
            Protocol::Http1Tls => "HTTP/1.1 over TLS",
            Protocol::Http2Tls => "HTTP/2 over TLS (ALPN h2)",
            Protocol::H2c => "HTTP/2 (h2c, prior knowledge)",
        }
    }

    /// Requests are streams on shared connections.
    pub fn is_http2(self) -> bool {
        matches!(self, Protocol::Http2Tls | Protocol::H2c)
    }
}

/// The TLS side of an `https://` target: the client configuration and the name the server's
/// certificate must carry.
#[derive(Debug, Clone)]
pub struct TlsClient {
    config: Arc<ClientConfig>,
    server_name: ServerName<'static>,
}

/// Files a TLS client is built from (`--ca-file`, `--client-cert`, `--client-key`).
#[derive(Debug, Clone, Copy, Default)]
pub struct TlsFiles<'a> {
    /// PEM certificates trusted besides the system's CA store.
    pub ca_file: Option<&'a Path>,
    /// PEM certificate chain and private key presented to the server (mutual TLS).
    pub client_cert: Option<(&'a Path, &'a Path)>,
}

fn read_pem(flag: &str, path: &Path) -> Result<Vec<u8>, LoadError> {
    std::fs::read(path).map_err(|e| LoadError::BadInput(format!("{flag} {}: {e}", path.display())))
}

fn certificates(flag: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, LoadError> {
    let pem = read_pem(flag, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| LoadError::BadInput(format!("{flag} {}: not PEM: {e:?}", path.display())))?;
    if certs.is_empty() {
        return Err(LoadError::BadInput(format!(
            "{flag} {}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it",
            path.display()
        )));
    }
    Ok(certs)
}

impl TlsClient {
    /// The client for `host` (a DNS name or an IP address, as in the URL).
    pub fn new(host: &str, files: TlsFiles<'_>) -> Result<TlsClient, LoadError> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let extra = match files.ca_file {
            Some(path) => certificates("--ca-file", path)?,
            None => Vec::new(),
        };
        let verifier =
            rustls_platform_verifier::Verifier::new_with_extra_roots(extra, provider.clone())
                .map_err(|e| LoadError::BadInput(format!("cannot load trusted CAs: {e}")))?;
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| LoadError::Start(format!("TLS: {e}")))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier));
        let config = match files.client_cert {
            Some((cert, key)) => {
                let chain = certificates("--client-cert", cert)?;
                let pem = read_pem("--client-key", key)?;
                let key_der = PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
                    LoadError::BadInput(format!(
                        "--client-key {}: no PEM private key in it ({e:?})",
                        key.display()
                    ))
                })?;
                builder.with_client_auth_cert(chain, key_der).map_err(|e| {
                    LoadError::BadInput(format!(
                        "--client-cert {} with --client-key {}: {e}",
                        cert.display(),
                        key.display()
                    ))
                })?
            }
            None => builder.with_no_client_auth(),
        };
        let server_name = ServerName::try_from(host.to_string())
            .map_err(|e| LoadError::BadInput(format!("{host} is not a TLS server name: {e}")))?;
        Ok(TlsClient {
            config: Arc::new(config),
            server_name,
        })
    }

    /// A connector offering `alpn` (most preferred first).
    fn connector(&self, alpn: &[&[u8]]) -> TlsConnector {
        let mut config = (*self.config).clone();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        TlsConnector::from(Arc::new(config))
    }
}

/// Connectors for a run's connections, built once (cloning a connector is a reference count).
#[derive(Clone)]
pub(crate) struct Dialer {
    addr: SocketAddr,
    protocol: Protocol,
    tls: Option<(TlsConnector, ServerName<'static>)>,
}

impl Dialer {
    /// The dialer of a run whose test connection agreed on `protocol`.
    pub(crate) fn new(addr: SocketAddr, protocol: Protocol, tls: Option<&TlsClient>) -> Dialer {
        let alpn: &[&[u8]] = if protocol.is_http2() {
            &[b"h2"]
        } else {
            &[b"http/1.1"]
        };
        Dialer {
            addr,
            protocol,
            tls: tls.map(|t| (t.connector(alpn), t.server_name.clone())),
        }
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub(crate) fn protocol(&self) -> Protocol {
        self.protocol
    }
}

/// An open HTTP/2 connection: its sender and the task driving its socket (aborted when
/// dropped).
pub(crate) struct Opened {
    pub(crate) sender: http2::SendRequest<Full<Bytes>>,
    pub(crate) driver: JoinHandle<()>,
}

/// Runs hyper's HTTP/2 connection tasks on the worker's own thread (its `LocalSet`).
#[derive(Clone, Copy)]
struct LocalExec;

impl<F> hyper::rt::Executor<F> for LocalExec
where
    F: std::future::Future + 'static,
{
    fn execute(&self, fut: F) {
        tokio::task::spawn_local(fut);
    }
}

async fn tcp(addr: SocketAddr) -> Result<tokio::net::TcpStream, String> {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// Opens one connection's byte stream (on the worker's `LocalSet`): TCP, and TLS when the
/// target is `https://`, checking that ALPN agreed on the run's protocol. The error says
/// which step failed. HTTP/1.1 connections speak on it directly ([`super::h1`]).
pub(crate) async fn connect(dialer: &Dialer) -> Result<Stream, String> {
    let stream = tcp(dialer.addr).await?;
    let http2 = dialer.protocol.is_http2();
    match &dialer.tls {
        None => Ok(Either::Left(stream)),
        Some((connector, name)) => {
            let tls = connector
                .connect(name.clone(), stream)
                .await
                .map_err(|e| format!("TLS handshake with {} failed: {e}", dialer.addr))?;
            let agreed_h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
            if agreed_h2 != http2 {
                return Err(format!(
                    "{} did not agree to {} by ALPN on this connection",
                    dialer.addr,
                    if http2 { "h2" } else { "http/1.1" }
                ));
            }
            Ok(Either::Right(tls))
        }
    }
}

/// Opens one HTTP/2 connection of the run: [`connect`], then the HTTP/2 handshake, its
/// connection task spawned on the worker's `LocalSet`.
pub(crate) async fn open(dialer: &Dialer) -> Result<Opened, String> {
    let io = TokioIo::new(connect(dialer).await?);
    // One stream until the server's SETTINGS arrive, then as many as they allow (h2's
    // default of 100 before them would overrun a lower limit, and the server would refuse
    // the extra streams).
    let (sender, conn) = http2::Builder::new(LocalExec)
        .initial_max_send_streams(1)
        .handshake(io)
        .await
        .map_err(|e| format!("HTTP/2 handshake failed: {e}"))?;
    let driver = tokio::task::spawn_local(async move {
        let _ = conn.await;
    });
    Ok(Opened { sender, driver })
}

/// How long the test connection waits for a TLS server's refusal after the handshake.
const POST_HANDSHAKE_WAIT: std::time::Duration = std::time::Duration::from_millis(250);

/// What the test connection before a run found.
#[derive(Debug, Clone)]
pub struct Negotiated {
    pub protocol: Protocol,
    /// Why it could not be opened (`None`: it could): the run still goes (every request
    /// then likely ends as a connect error), and the summary shows this message.
    pub error: Option<String>,
}

/// Opens one connection to `addr` (TCP, and TLS with ALPN for `https://`, then up to a
/// quarter second for the server to refuse the session) and closes it: the protocol the
/// run will speak, or why connecting fails.
pub async fn negotiate(
    addr: SocketAddr,
    tls: Option<&TlsClient>,
    version: HttpVersion,
) -> Negotiated {
    let Some(tls) = tls else {
        let protocol = match version {
            HttpVersion::Http2 => Protocol::H2c,
            _ => Protocol::Http1,
        };
        return Negotiated {
            protocol,
            error: tcp(addr).await.err(),
        };
    };
    let (alpn, fallback): (&[&[u8]], Protocol) = match version {
        HttpVersion::Auto => (&[b"h2", b"http/1.1"], Protocol::Http1Tls),
        HttpVersion::Http1 => (&[b"http/1.1"], Protocol::Http1Tls),
        HttpVersion::Http2 => (&[b"h2"], Protocol::Http2Tls),
    };
    let stream = match tcp(addr).await {
        Ok(s) => s,
        Err(e) => {
            return Negotiated {
                protocol: fallback,
                error: Some(e),
            };
        }
    };
    match tls
        .connector(alpn)
        .connect(tls.server_name.clone(), stream)
        .await
    {
        Ok(mut s) => {
            let h2 = s.get_ref().1.alpn_protocol() == Some(b"h2");
            // A TLS 1.3 server refuses a client certificate (or its absence) after the
            // client's side of the handshake is done: its alert comes with the first read.
            let mut first = [0u8; 64];
            if let Ok(Err(e)) = tokio::time::timeout(
                POST_HANDSHAKE_WAIT,
                tokio::io::AsyncReadExt::read(&mut s, &mut first),
            )
            .await
            {
                return Negotiated {
                    protocol: if h2 { Protocol::Http2Tls } else { fallback },
                    error: Some(format!(
                        "TLS handshake with {addr} failed: the server refused the session: {e}"
                    )),
                };
            }
            match (version, h2) {
                (HttpVersion::Http2, false) => Negotiated {
                    protocol: Protocol::Http2Tls,
                    error: Some(format!("{addr} did not agree to h2 by ALPN (--http2)")),
                },
                (_, true) => Negotiated {
                    protocol: Protocol::Http2Tls,
                    error: None,
                },
                (_, false) => Negotiated {
                    protocol: Protocol::Http1Tls,
                    error: None,
                },
            }
        }
        Err(e) => Negotiated {
            protocol: fallback,
            error: Some(format!("TLS handshake with {addr} failed: {e}")),
        },
    }
}
