//! The docs checked against the product: the `curl` examples of README.md and of every
//! page of `docs/`, run as written against a real `harrier serve`, so the docs cannot
//! drift from the API — each ```sh block's `curl` commands (continued lines and
//! multi-line quoted bodies joined), in order, with only the addresses filled in —
//! `localhost:7070` is the server under test, `127.0.0.1:9101` (a scrape target) and
//! `127.0.0.1:9095` a receiver started here (harrier refuses its own address as a target). A command fails the test
//! when curl fails or the server answers 4xx/5xx. And every relative link in those files
//! points at a file of the repository, and at a heading of it when it names one (`#anchor`).

use std::process::Command;

use crate::server::start;

/// README.md and every `docs/*.md` page, as (path relative to the repository, text).
fn doc_files() -> Vec<(String, String)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut names = vec!["README.md".to_string()];
    let mut pages: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    pages.sort();
    names.extend(pages);
    names
        .into_iter()
        .map(|n| {
            let text =
                std::fs::read_to_string(root.join(&n)).unwrap_or_else(|e| panic!("{n}: {e}"));
            (n, text)
        })
        .collect()
}

/// The `curl` commands of README.md's and the docs pages' ```sh blocks, in order, each on
/// one line, with the file it came from.
fn doc_curl_commands() -> Vec<(String, String)> {
    doc_files()
        .into_iter()
        .flat_map(|(name, text)| {
            curl_commands(&text)
                .into_iter()
                .map(move |c| (name.clone(), c))
        })
        .collect()
}

/// The `curl` commands of one Markdown text's ```sh blocks.
fn curl_commands(readme: &str) -> Vec<String> {
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
    let commands = doc_curl_commands();
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
    for (file, command) in commands {
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
            "{file} example failed: {command}\nran: {filled}\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// GitHub's anchor for a heading: lowercased, characters other than letters, digits,
/// spaces, `-` and `_` dropped, spaces made `-`.
fn anchor_of(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown text's headings (outside code blocks); a repeated heading's
/// later anchors get `-1`, `-2`, … as on GitHub.
fn anchors(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code || !line.starts_with('#') {
            continue;
        }
        let heading = line.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let base = anchor_of(&heading.replace('`', ""));
        let mut name = base.clone();
        let mut n = 0;
        while out.contains(&name) {
            n += 1;
            name = format!("{base}-{n}");
        }
        out.push(name);
    }
    out
}

/// The targets of a Markdown text's inline links `[text](target)`, outside code blocks and
/// code spans.
fn link_targets(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        // Code spans are not links: drop them first.
        let mut plain = String::new();
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                plain.push_str(part);
            }
        }
        let mut rest = plain.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split_whitespace().next().unwrap_or("");
            out.push(target.to_string());
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_in_the_docs_points_at_something() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = doc_files();
    assert!(
        files.len() >= 10,
        "README and the docs pages: {}",
        files.len()
    );
    let mut checked = 0;
    let mut broken = Vec::new();
    for (name, text) in &files {
        let dir = std::path::Path::new(name).parent().unwrap();
        for target in link_targets(text) {
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                std::path::PathBuf::from(name)
            } else {
                dir.join(path)
            };
            checked += 1;
            if !root.join(&file).exists() {
                broken.push(format!("{name}: {target} (no file {})", file.display()));
                continue;
            }
            if let Some(anchor) = anchor
                && file.extension().is_some_and(|e| e == "md")
            {
                let page = std::fs::read_to_string(root.join(&file)).unwrap();
                if !anchors(&page).iter().any(|a| a == anchor) {
                    broken.push(format!(
                        "{name}: {target} (no heading #{anchor} in {})",
                        file.display()
                    ));
                }
            }
        }
    }
    assert!(checked >= 20, "only {checked} relative links checked");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_link_checker_sees_a_broken_link() {
    let text = "# Getting `started`\n## Getting started\nSee [a](a.md#x), `[b](no.md)`.\n```\n[c](in-code.md)\n```\n";
    assert_eq!(link_targets(text), ["a.md#x"]);
    assert_eq!(anchors(text), ["getting-started", "getting-started-1"]);
    assert_eq!(
        anchor_of("Routes, services & pools"),
        "routes-services--pools"
    );
}

/// Comments and docs point only at files of this repository: no file under the code's
/// folders names the design, format or style notes kept outside it (their content is in
/// `docs/`).
#[test]
fn nothing_points_at_notes_outside_the_repository() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    // Built from parts, so this file does not name them itself.
    let names: Vec<String> = ["FORMATS", "DESIGN", "STYLE"]
        .iter()
        .map(|n| format!("{n}.md"))
        .collect();
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target") {
                    walk(&path, out);
                }
            } else {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    for dir in [
        "server", "tests", "bench", "scripts", "web", "static", "examples", "fuzz", "docs",
    ] {
        walk(&root.join(dir), &mut files);
    }
    files.push(root.join("README.md"));
    assert!(files.len() > 200, "found only {} files", files.len());
    let mut found = Vec::new();
    for file in &files {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue; // not text
        };
        for (i, line) in text.lines().enumerate() {
            if names.iter().any(|n| line.contains(n.as_str())) {
                found.push(format!(
                    "{}:{}: {}",
                    file.strip_prefix(root).unwrap().display(),
                    i + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}
