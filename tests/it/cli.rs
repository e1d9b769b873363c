//! The `harrier` command as a user runs it.

use std::path::PathBuf;
use std::process::Command;

const HARRIER: &str = env!("CARGO_BIN_EXE_harrier");

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

fn run(dir: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(HARRIER)
        .args(args)
        .current_dir(dir)
        .env_remove("HARRIER_DB")
        .env_remove("HARRIER_CONFIG")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn help_explains_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, out, _) = run(dir.path(), &["--help"]);
    assert!(ok);
    for cmd in ["serve", "import", "runs"] {
        assert!(out.contains(cmd), "{out}");
    }
    let (ok, out, _) = run(dir.path(), &["import", "--help"]);
    assert!(ok);
    for flag in [
        "--format",
        "--scenario",
        "--tag",
        "--server",
        "--db",
        "--replace",
        "jmeter-csv",
    ] {
        assert!(out.contains(flag), "import --help names {flag}: {out}");
    }
}

#[test]
fn import_and_runs_use_the_database_named_in_harrier_toml() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("harrier.toml"), "db = \"team.db\"\n").unwrap();
    let ec01 = fixture("edge-cases/EC01/input.jtl");
    let (ok, out, err) = run(
        dir.path(),
        &["import", ec01.to_str().unwrap(), "--name", "from toml"],
    );
    assert!(ok, "{out}{err}");
    assert!(out.contains("4 samples"), "{out}");
    assert!(
        dir.path().join("team.db").exists(),
        "the db from harrier.toml"
    );
    assert!(!dir.path().join("harrier.db").exists());
    let (ok, out, _) = run(dir.path(), &["runs"]);
    assert!(ok);
    assert!(
        out.contains("from toml") && out.contains("50.00 %"),
        "{out}"
    );
}

#[test]
fn runs_on_a_missing_database_says_so_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, _, err) = run(dir.path(), &["runs", "--db", "typo.db"]);
    assert!(!ok);
    assert!(err.contains("no database at typo.db"), "{err}");
    assert!(!dir.path().join("typo.db").exists());
}

#[test]
fn a_bad_file_fails_with_a_message_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hello\n").unwrap();
    let (ok, _, err) = run(dir.path(), &["import", "notes.txt", "--db", "x.db"]);
    assert!(!ok);
    assert!(
        err.contains("notes.txt: not a supported format") && err.contains("--format"),
        "{err}"
    );
    let (ok, _, err) = run(dir.path(), &["import", "missing.jtl", "--db", "x.db"]);
    assert!(!ok);
    assert!(err.contains("cannot open missing.jtl"), "{err}");
    let (ok, out, _) = run(dir.path(), &["runs", "--db", "x.db"]);
    assert!(ok);
    assert!(out.contains("no runs yet"), "{out}");
}

#[test]
fn import_help_names_every_tool() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, out, _) = run(dir.path(), &["import", "--help"]);
    assert!(ok);
    for tool in [
        "JMeter",
        "Gatling",
        "k6",
        "Locust",
        "ab",
        "wrk",
        "hey",
        "oha",
        "vegeta",
        "autocannon",
        "Artillery",
        "siege",
        "SoapUI",
        "Taurus",
    ] {
        assert!(
            out.contains(tool),
            "import --help does not name {tool}: {out}"
        );
    }
}

#[test]
fn runs_into_a_closed_pipe_ends_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let (ok, _, err) = run(
        dir.path(),
        &[
            "import",
            "--db",
            db.to_str().unwrap(),
            fixture("jmeter/default_props_2.13.jtl").to_str().unwrap(),
        ],
    );
    assert!(ok, "{err}");
    // `harrier runs | head -0`: the reader is gone before the first line is written.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = std::process::Command::new(HARRIER)
        .args(["runs", "--db", db.to_str().unwrap()])
        .current_dir(dir.path())
        .stdout(writer)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(141), "{stderr}");
}

/// Issue 12: hey and ab have no per-request success flag, so a response with status ≥ 400
/// is an error (docs/numbers.md). Real outputs against a server that answers 500 to 7 of 8
/// requests (`fixtures/error-rule/`): the error rate is the share of 500s, and a gate on
/// it fails with exit code 1.
#[test]
fn hey_and_ab_http_500s_are_errors_and_fail_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    for (file, pct) in [
        ("error-rule/hey_mostly500_text.txt", "87.50 %"),
        ("error-rule/hey_mostly500.csv", "87.50 %"),
        ("error-rule/ab_mostly500_stdout.txt", "87.50 %"),
    ] {
        let _ = std::fs::remove_file(dir.path().join("h.db"));
        let path = fixture(file);
        let (ok, out, err) = run(
            dir.path(),
            &["import", path.to_str().unwrap(), "--db", "h.db"],
        );
        assert!(ok, "{file}: {out}{err}");
        let (ok, out, _) = run(dir.path(), &["runs", "--db", "h.db"]);
        assert!(ok);
        assert!(out.contains(pct), "{file}: {out}");
        let out = Command::new(HARRIER)
            .args(["check", "1", "error_rate<1%", "--no-record", "--db", "h.db"])
            .current_dir(dir.path())
            .env_remove("HARRIER_CONFIG")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{file}: {text}");
        assert!(text.contains("1 failed"), "{file}: {text}");
    }
}

#[tokio::test]
async fn a_loop_over_several_targets_gets_a_scenario_per_target() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let example = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/ab-loop.out");
    let single = fixture("ab/slow_stdout.txt");
    for file in [&example, &single] {
        let (ok, _, err) = run(
            dir.path(),
            &[
                "import",
                "--db",
                db.to_str().unwrap(),
                "--scenario",
                "nightly",
                file.to_str().unwrap(),
            ],
        );
        assert!(ok, "{err}");
    }
    let store = harrier::store::Store::open(&db).await.unwrap();
    let mut scenarios: Vec<String> = store
        .list_runs()
        .await
        .unwrap()
        .into_iter()
        .filter_map(|r| r.scenario)
        .collect();
    scenarios.sort();
    assert_eq!(
        scenarios,
        [
            "nightly",
            "nightly · 127.0.0.1:8099/error",
            "nightly · 127.0.0.1:8099/slow"
        ],
        "the loop's two targets apart; a file of one target keeps the scenario as given"
    );
}
