//! README's `curl` examples, run as written against a real `harrier serve`, so the docs
//! cannot drift from the API: each ```sh block's `curl` commands (continued lines and
//! multi-line quoted bodies joined), in order, with only the addresses filled in —
//! `localhost:7070` is the server under test, `127.0.0.1:9101` (a scrape target) and
//! `127.0.0.1:9095` a receiver started here (harrier refuses its own address as a target). A command fails the test
//! when curl fails or the server answers 4xx/5xx.

use std::process::Command;

use crate::server::start;

/// The `curl` commands of README.md's ```sh blocks, in order, each on one line.
fn readme_curl_commands() -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut pending = String::new();
    for line in readme.lines() {
        if line.trim_start().starts_with("```") {
            in_sh = !in_sh && line.trim() == "```sh";
            pending.clear();
            continue;
        }
        if !in_sh {
            continue;
        }
        if pending.is_empty() && !line.trim_start().starts_with("curl ") {
            continue;
        }
        let piece = line.trim_end().trim_end_matches('\\');
        if !pending.is_empty() {
            pending.push(' ');
        }
        pending.push_str(piece.trim());
        // Continued: a trailing backslash, or a single-quoted body still open.
        let open_quote = !pending.matches('\'').count().is_multiple_of(2);
        if line.trim_end().ends_with('\\') || open_quote {
            continue;
        }
        // A trailing shell comment is documentation, not part of the command.
        let command = match pending.find("  #") {
            Some(i) if pending[..i].matches('\'').count().is_multiple_of(2) => {
                pending[..i].trim_end().to_string()
            }
            _ => pending.clone(),
        };
        out.push(command);
        pending.clear();
    }
    out
}

#[tokio::test]
async fn readme_curl_examples_work_as_written() {
    let commands = readme_curl_commands();
    assert!(
        commands.len() >= 8,
        "found only {} curl examples: {commands:?}",
        commands.len()
    );
    // A webhook receiver for the channel examples.
    let receiver = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = receiver.local_addr().unwrap();
    tokio::spawn(async move {
        let app = axum::Router::new().fallback(|| async { "ok" });
        axum::serve(receiver, app).await.unwrap()
    });

    let dir = tempfile::tempdir().unwrap();
    let (_proc, base) = start(dir.path(), "self_scrape = false\n", None);
    let addr = base.trim_start_matches("http://").to_string();
    for command in commands {
        let filled = command
            .replace("localhost:7070", &addr)
            .replace("127.0.0.1:9101", &hook.to_string())
            .replace("127.0.0.1:9095", &hook.to_string())
            .replacen("curl ", "curl -sS --fail-with-body -m 10 ", 1);
        let out = tokio::task::spawn_blocking({
            let filled = filled.clone();
            move || {
                Command::new("bash")
                    .arg("-c")
                    .arg(&filled)
                    .output()
                    .unwrap()
            }
        })
        .await
        .unwrap();
        assert!(
            out.status.success(),
            "README example failed: {command}\nran: {filled}\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
