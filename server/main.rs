//! The `harrier` command: parses the command line and hands over to the library.

use std::process::ExitCode;

use clap::Parser;
use harrier::cli::{access, compare as cli_compare, import, load, rules, runs, serve};
use harrier::config::{Cli, Command, RulesCommand, ServeArgs};
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            // The platform verifier logs every certificate it refuses; the refusal is
            // already the caller's error (a channel's test result, a load run's connect
            // error), and a load run against a wrong certificate would log it per request.
            EnvFilter::try_from_env("HARRIER_LOG").unwrap_or_else(|_| {
                EnvFilter::new("info,sqlx=warn,tower_http=warn,rustls_platform_verifier=off")
            }),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("harrier: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    if let Some(token) = cli.command.as_ref().and_then(Command::token) {
        harrier::cli::set_token(token.to_string());
    }
    let result = runtime.block_on(async {
        match cli.command.unwrap_or(Command::Serve(ServeArgs::default())) {
            Command::Serve(args) => serve::serve(args).await,
            Command::Import(args) => import::import_files(args).await,
            Command::Runs(args) => runs::list_runs(args).await,
            Command::Check(args) => Ok(cli_compare::check(args).await),
            Command::Compare(args) => cli_compare::compare(args)
                .await
                .or_else(|e| cli_error("compare", e)),
            Command::Baseline(args) => cli_compare::baseline(args)
                .await
                .or_else(|e| cli_error("baseline", e)),
            Command::Seed(args) => cli_compare::seed(args)
                .await
                .or_else(|e| cli_error("seed", e)),
            Command::Rules(RulesCommand::Test { files }) => Ok(rules::test_rules(&files)),
            Command::Load(command) => load::load(command).await,
            Command::User(command) => access::user(command).await,
            Command::Token(command) => access::token(command).await,
            Command::Migrate(args) => access::migrate(args).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("harrier: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// Reports a failed client command; its exit code tells an input error (2) from others.
fn cli_error(command: &str, e: anyhow::Error) -> anyhow::Result<ExitCode> {
    eprintln!("harrier {command}: {e:#}");
    Ok(cli_compare::error_code(&e))
}
