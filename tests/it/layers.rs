//! The layers of `server/` (README "Architecture"): every `crate::` path in a file names its
//! own layer or one below it, the JSON API and the console never name each other, the
//! domain names no framework and does no I/O, and no two folders import each other
//! through any chain.
//!
//! Read from the source text: `//` comments (docs included: a doc link to a higher layer
//! is no import) are left out, then every `crate::a::b` path is taken as an import of
//! folder `a` (or `a/b` where `a` is a folder of folders).

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

/// The source without `//` comments (string literals holding `//` are rare enough in our
/// code that cutting there only loses text after them, never adds an import).
fn code_of(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `crate::x::y` path in `code`, as its segments (identifiers only).
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
        let mut segs = Vec::new();
        let mut rest = &code[at + 7..];
        loop {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            if end == 0 {
                break;
            }
            segs.push(rest[..end].to_string());
            rest = &rest[end..];
            match rest.strip_prefix("::") {
                Some(r) => rest = r,
                None => break,
            }
        }
        if !segs.is_empty() {
            out.push(segs);
        }
    }
    out
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
