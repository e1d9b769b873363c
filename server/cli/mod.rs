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
