//! `harrier rules test FILE…`: runs alert rule unit tests (promtool's format).

use std::process::ExitCode;

/// `harrier rules test FILE…`: 0 all passed, 1 a test failed, 2 a file cannot be run.
pub fn test_rules(files: &[std::path::PathBuf]) -> ExitCode {
    let mut code = ExitCode::SUCCESS;
    for path in files {
        let result = std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|text| crate::domain::alerts::ruletest::run(&text));
        match result {
            Ok(failures) if failures.is_empty() => outln!("{}: SUCCESS", path.display()),
            Ok(failures) => {
                outln!("{}: FAILED", path.display());
                for f in failures {
                    outln!("  {f}");
                }
                if code != ExitCode::from(2) {
                    code = ExitCode::from(1);
                }
            }
            Err(e) => {
                eprintln!("harrier: {}: {e}", path.display());
                code = ExitCode::from(2);
            }
        }
    }
    code
}
