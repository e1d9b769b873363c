//! The layers of `server/` (docs/architecture.md): every `crate::` path in a file names its
//! own layer or one below it, the JSON API and the console never name each other, the
//! domain names no framework and does no I/O, and no two folders import each other
//! through any chain.
//!
//! Read from the source text: comments (`//`, docs included: a doc link to a higher layer
//! is no import; `/* */`) are left out, string literals kept whole (a `//` inside one is no
//! comment), then every `crate::a::b` path — grouped ones spread out, `crate::{a::b, c}` —
//! is taken as an import of folder `a` (or `a/b` where `a` is a folder of folders).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Layers, lowest first; a file may import its own layer and those below it.
const LAYERS: &[(&str, u8)] = &[
    ("domain", 0),
    ("sources", 1),
    ("store", 2),
    ("config", 3),
    ("error", 3),
    ("views", 4),
    ("services", 5),
    ("state", 6),
    ("telemetry", 6),
    ("http", 7),
    ("app", 8),
    ("cli", 9),
];

/// Items of `lib.rs` any layer may use.
const ROOT_ITEMS: &[&str] = &["now_ms"];

/// Crates and std modules the domain must not use: it is pure (no HTTP, SQL, network,
/// files, runtime).
const NOT_IN_DOMAIN: &[&str] = &[
    "axum::",
    "sqlx::",
    "reqwest::",
    "tokio::",
    "hyper::",
    "std::fs",
    "std::net",
    "crate::now_ms",
];

fn server_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("server")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The source with its comments blanked out: `//` line comments (docs included) and
/// `/* … */` block comments (nested), each character replaced by a space so lines and
/// columns stay where they were. String and character literals are kept as they are, and
/// a `//` or `/*` inside one starts no comment: `"http://x"`, `r#"a // b"#`, `b"/*"`,
/// `'/'`. A lifetime (`'a`) is not a character literal.
fn code_of(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        // Line comment: up to the end of the line.
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                blank(&mut out, chars[i]);
                i += 1;
            }
            continue;
        }
        // Block comment, nested.
        if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
            continue;
        }
        let ident_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        // Raw strings: r"…", r#"…"#, br#"…"#, cr"…" (not the end of an identifier like `for`).
        if c == 'r' && (!ident_before || matches!(chars[i - 1], 'b' | 'c')) {
            let mut j = i + 1;
            while chars.get(j) == Some(&'#') {
                j += 1;
            }
            if chars.get(j) == Some(&'"') {
                let hashes = j - i - 1;
                let mut k = j + 1;
                while k < chars.len() {
                    if chars[k] == '"' && (0..hashes).all(|h| chars.get(k + 1 + h) == Some(&'#')) {
                        k += 1 + hashes;
                        break;
                    }
                    k += 1;
                }
                out.extend(&chars[i..k.min(chars.len())]);
                i = k;
                continue;
            }
        }
        // Strings (and b"…", c"…": the prefix was copied as an identifier character).
        if c == '"' {
            let mut k = i + 1;
            while k < chars.len() && chars[k] != '"' {
                k += if chars[k] == '\\' { 2 } else { 1 };
            }
            let k = (k + 1).min(chars.len());
            out.extend(&chars[i..k]);
            i = k;
            continue;
        }
        // Character literals: '\'', '\\', '/', '\u{2f}'; a lifetime has no closing quote.
        if c == '\'' {
            let len = match (next, chars.get(i + 2), chars.get(i + 3)) {
                (Some('\\'), _, _) => chars[i + 2..]
                    .iter()
                    .skip(1)
                    .position(|&x| x == '\'')
                    .map(|p| p + 4),
                (Some(_), Some('\''), _) => Some(3),
                _ => None,
            };
            if let Some(len) = len {
                let k = (i + len).min(chars.len());
                out.extend(&chars[i..k]);
                i = k;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

/// Every `crate::…` path in `code`, as its segments (identifiers only), with grouped
/// imports spread out: `crate::{http::api, store::{self, Store}}` gives `http::api`,
/// `store` and `store::Store`. A glob (`crate::x::*`) gives `x`; `as` renames are dropped.
fn crate_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut from = 0;
    while let Some(i) = code[from..].find("crate::") {
        let at = from + i;
        from = at + 7;
        if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
            continue; // `harrier_crate::` or the like
        }
        let mut rest = &code[at + 7..];
        tree(&mut rest, &mut Vec::new(), &mut out);
    }
    out
}

/// Reads one use-tree from the start of `rest` (segments `a::b`, then optionally a
/// `{…}` group of trees or `*`), pushing every full path under `prefix` to `out`.
fn tree(rest: &mut &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let depth = prefix.len();
    loop {
        *rest = rest.trim_start();
        if let Some(r) = rest.strip_prefix('{') {
            *rest = r;
            loop {
                *rest = rest.trim_start();
                if let Some(r) = rest.strip_prefix('}') {
                    *rest = r;
                    break;
                }
                if rest.is_empty() {
                    break;
                }
                let before = rest.len();
                tree(rest, prefix, out);
                *rest = rest.trim_start();
                // `as name` and anything else up to the next item or the group's end.
                while let Some(c) = rest.chars().next() {
                    if c == ',' {
                        *rest = &rest[1..];
                        break;
                    }
                    if c == '}' {
                        break;
                    }
                    if c == '{' {
                        // not a use list (e.g. `crate::f()` then a block): stop here
                        prefix.truncate(depth);
                        return;
                    }
                    *rest = &rest[c.len_utf8()..];
                }
                if rest.len() == before {
                    break;
                }
            }
            prefix.truncate(depth);
            return;
        }
        if let Some(r) = rest.strip_prefix('*') {
            *rest = r;
            break;
        }
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        let seg = &rest[..end];
        *rest = &rest[end..];
        if seg != "self" {
            prefix.push(seg.to_string());
        }
        match rest.trim_start().strip_prefix("::") {
            Some(r) => *rest = r,
            None => break,
        }
    }
    if !prefix.is_empty() {
        out.push(prefix.clone());
    }
    prefix.truncate(depth);
}

/// The folder a module path belongs to: `domain/alerts`, `http/api`, `store`, `config`.
/// Layers made of folders (domain, sources, services, views, http) are split one level
/// further, so the cycle check sees `domain/alerts` and `domain/routes` apart.
fn folder_of(segs: &[String]) -> Option<String> {
    let first = segs.first()?.as_str();
    let split = matches!(first, "domain" | "sources" | "services" | "views" | "http");
    match (split, segs.get(1)) {
        (true, Some(second)) if second.chars().next().is_some_and(|c| c.is_lowercase()) => {
            Some(format!("{first}/{second}"))
        }
        _ => Some(first.to_string()),
    }
}

fn layer_of(folder: &str) -> Option<u8> {
    let top = folder.split('/').next()?;
    LAYERS.iter().find(|(n, _)| *n == top).map(|(_, l)| *l)
}

/// `server/http/api/runs.rs` → `["http", "api", "runs"]`.
fn module_of(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(server_dir()).unwrap();
    let mut segs: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if segs.last().is_some_and(|s| s == "mod") {
        segs.pop();
    }
    segs
}

struct Imports {
    /// (file, folder of the file, folder imported, the path as written).
    edges: Vec<(String, String, String, String)>,
    /// (file, what it uses) for the domain's forbidden uses.
    domain_uses: Vec<(String, String)>,
}

fn imports() -> Imports {
    let mut files = Vec::new();
    rust_files(&server_dir(), &mut files);
    files.sort();
    assert!(files.len() > 50, "found only {} files", files.len());
    let mut edges = Vec::new();
    let mut domain_uses = Vec::new();
    for file in files {
        let module = module_of(&file);
        let name = file
            .strip_prefix(server_dir())
            .unwrap()
            .display()
            .to_string();
        if matches!(module.as_slice(), [m] if m == "lib" || m == "main") {
            continue; // the top: wires everything
        }
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        let Some(me) = folder_of(&module) else {
            continue;
        };
        if me.starts_with("domain") {
            for bad in NOT_IN_DOMAIN {
                if code.contains(bad) {
                    domain_uses.push((name.clone(), bad.to_string()));
                }
            }
        }
        for segs in crate_paths(&code) {
            if segs.len() == 1 || ROOT_ITEMS.contains(&segs[0].as_str()) {
                continue;
            }
            let Some(to) = folder_of(&segs) else { continue };
            if to != me {
                edges.push((name.clone(), me.clone(), to, segs.join("::")));
            }
        }
    }
    Imports { edges, domain_uses }
}

#[test]
fn every_import_points_down() {
    let Imports { edges, .. } = imports();
    let mut up = Vec::new();
    for (file, me, to, path) in &edges {
        let (Some(a), Some(b)) = (layer_of(me), layer_of(to)) else {
            up.push(format!(
                "{file}: crate::{path} (a folder outside the layer table)"
            ));
            continue;
        };
        if b > a {
            up.push(format!("{file}: crate::{path} ({me} → {to}, up)"));
        }
    }
    assert!(up.is_empty(), "imports pointing up:\n{}", up.join("\n"));
    assert!(
        edges
            .iter()
            .any(|(_, me, to, _)| me == "http/api" && to.starts_with("views")),
        "the API reads through views"
    );
}

#[test]
fn api_and_console_never_import_each_other() {
    let Imports { edges, .. } = imports();
    let crossed: Vec<String> = edges
        .iter()
        .filter(|(_, me, to, _)| {
            (me == "http/api" && to == "http/console") || (me == "http/console" && to == "http/api")
        })
        .map(|(file, _, _, path)| format!("{file}: crate::{path}"))
        .collect();
    assert!(crossed.is_empty(), "{}", crossed.join("\n"));
}

#[test]
fn the_domain_is_pure() {
    let Imports { domain_uses, .. } = imports();
    let found: Vec<String> = domain_uses
        .iter()
        .map(|(file, what)| format!("{file} uses {what}"))
        .collect();
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn no_import_cycle_between_folders() {
    let Imports { edges, .. } = imports();
    let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (_, me, to, _) in &edges {
        graph.entry(me).or_default().insert(to);
    }
    assert!(graph.len() > 10, "{graph:?}");
    // Depth-first search; a grey node met again closes a cycle.
    fn visit<'a>(
        n: &'a str,
        graph: &BTreeMap<&'a str, BTreeSet<&'a str>>,
        colour: &mut BTreeMap<&'a str, u8>,
        stack: &mut Vec<&'a str>,
        cycles: &mut Vec<String>,
    ) {
        colour.insert(n, 1);
        stack.push(n);
        for &m in graph.get(n).into_iter().flatten() {
            match colour.get(m).copied().unwrap_or(0) {
                0 => visit(m, graph, colour, stack, cycles),
                1 => {
                    let from = stack.iter().position(|s| *s == m).unwrap_or(0);
                    cycles.push(format!("{} → {m}", stack[from..].join(" → ")));
                }
                _ => {}
            }
        }
        stack.pop();
        colour.insert(n, 2);
    }
    let mut colour = BTreeMap::new();
    let mut cycles = Vec::new();
    for &n in graph.keys() {
        if colour.get(n).copied().unwrap_or(0) == 0 {
            visit(n, &graph, &mut colour, &mut Vec::new(), &mut cycles);
        }
    }
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

#[test]
fn the_checker_sees_an_upward_import() {
    // The parser this file relies on: a path in code counts, one in a comment does not.
    let code = code_of("use crate::http::api::runs::run_id; // crate::app::router\n");
    let paths = crate_paths(&code);
    assert_eq!(paths, vec![vec!["http", "api", "runs", "run_id"]]);
    assert_eq!(folder_of(&paths[0]).as_deref(), Some("http/api"));
    assert!(layer_of("http/api") > layer_of("views"));
}

fn paths_of(source: &str) -> Vec<String> {
    crate_paths(&code_of(source))
        .iter()
        .map(|p| p.join("::"))
        .collect()
}

#[test]
fn grouped_imports_are_spread_out() {
    // The old parser stopped at `{`: it saw nothing of the first line and only `store`
    // of the second.
    assert_eq!(
        paths_of("use crate::{http::api::runs, store::Store};"),
        ["http::api::runs", "store::Store"]
    );
    assert_eq!(
        paths_of("use crate::store::{self, sqlite::{Pool, rows as r}, Store};"),
        [
            "store",
            "store::sqlite::Pool",
            "store::sqlite::rows",
            "store::Store"
        ]
    );
    assert_eq!(
        paths_of("use crate::{\n    app::{router, AppState},\n    domain::*,\n};"),
        ["app::router", "app::AppState", "domain"]
    );
    let folders: Vec<Option<String>> = crate_paths(&code_of(
        "use crate::domain::{alerts::Rule, routes::Interval};",
    ))
    .iter()
    .map(|p| folder_of(p))
    .collect();
    assert_eq!(
        folders,
        [Some("domain/alerts".into()), Some("domain/routes".into())]
    );
    // An expression path with a block after it is no use list.
    assert_eq!(
        paths_of("let x = crate::now_ms(); if y { crate::store::z() }"),
        ["now_ms", "store::z"]
    );
}

#[test]
fn a_comment_marker_inside_a_string_hides_nothing() {
    // The old parser cut every line at its first `//`, so the import after the URL was lost.
    assert_eq!(
        paths_of("let u = \"http://x\"; use crate::app::router; // crate::cli::x"),
        ["app::router"]
    );
    assert_eq!(
        paths_of("f(r#\"a // b\"#, '/', b\"//\"); crate::http::guard::check();"),
        ["http::guard::check"]
    );
    assert_eq!(
        paths_of("s = \"\\\" // \"; crate::views::runs::x; /* crate::app::y /* n */ */"),
        ["views::runs::x"]
    );
    // A lifetime is not a character literal: the comment after it is still a comment.
    assert_eq!(
        paths_of("fn f<'a>(x: &'a str) {} // crate::app::z\ncrate::store::w"),
        ["store::w"]
    );
}
