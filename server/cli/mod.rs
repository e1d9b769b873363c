//! Client commands: `serve`, `import`, `runs`, `compare`, `check`, `baseline`, `seed`,
//! `rules test`, `load run`. Each prints for people and returns the process exit code; `main` only
//! parses the command line and dispatches here.

/// `println!` for the commands' output: when the reader has gone away (`harrier runs |
/// head`), the command ends quietly with status 141, as a Unix tool killed by SIGPIPE
/// does, instead of panicking.
macro_rules! outln {
    () => { $crate::cli::write_out(format_args!("")) };
    ($($arg:tt)*) => { $crate::cli::write_out(format_args!($($arg)*)) };
}

pub mod access;
pub mod compare;
pub mod import;
pub mod load;
pub mod load_stream;
pub mod rules;
pub mod runs;
pub mod serve;

/// Writes one line of a command's output (see [`outln!`]).
pub fn write_out(line: std::fmt::Arguments) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{line}").and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(141);
        }
        eprintln!("harrier: writing the output failed: {e}");
        std::process::exit(1);
    }
}

/// The token client commands send to a server (`--token` / `HARRIER_TOKEN`), set once by
/// `main` before the command runs.
static TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Sets the token of [`http`]'s requests (the first call wins).
pub fn set_token(token: String) {
    let _ = TOKEN.set(token);
}

/// Why a request whose body could not be sent failed, in words a user can act on.
///
/// A server that refuses a request (no or a wrong token) answers before it has read the
/// body and closes the connection; a client still sending a large file then sees only a
/// broken pipe, not the answer. So after a send error this asks the server who the
/// request would have been (`GET /api/v1/whoami`, open to anyone): when sign-in is on and
/// the credentials made nobody of the request, the error says so and what to do; else the
/// original error stands, with `context` in front.
pub async fn explain_send_error(
    base: &str,
    context: String,
    error: reqwest::Error,
) -> anyhow::Error {
    let who = async {
        let r = http()
            .get(format!("{base}/api/v1/whoami"))
            .timeout(std::time::Duration::from_secs(5))
            .send()
            .await
            .ok()?;
        r.json::<serde_json::Value>().await.ok()
    }
    .await;
    if let Some(w) = who
        && w["sign_in"].as_bool() == Some(true)
        && w["kind"].as_str() == Some("anonymous")
    {
        let what = if TOKEN.get().is_some() {
            "did not accept the token given (revoked, expired or mistyped?)"
        } else {
            "requires sign-in and no token was given"
        };
        return anyhow::anyhow!(
            "{base} {what}: pass a token with --token or HARRIER_TOKEN (an admin creates one \
             with `harrier token create NAME --scope ingest`); the request failed with: {error}"
        );
    }
    anyhow::Error::new(error).context(context)
}

/// The HTTP client of commands that talk to a running server: sends the token (if one is
/// set) as `Authorization: Bearer`, which every route of a server with sign-in accepts.
pub fn http() -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(t) = TOKEN.get()
        && let Ok(mut v) = reqwest::header::HeaderValue::from_str(&format!("Bearer {}", t.trim()))
    {
        v.set_sensitive(true);
        headers.insert(reqwest::header::AUTHORIZATION, v);
    }
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap_or_default()
}
