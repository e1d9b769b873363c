//! Settings: command-line flags, `HARRIER_*` environment variables and an optional
//! `harrier.toml`, in that order of precedence.
//!
//! Owns the CLI definition (clap) and the resolved [`Config`]. Must not start anything.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};
use serde::Deserialize;

use crate::domain::access::{Protection, SitePolicy};
use crate::domain::alerts::AlertsConfig;
use crate::domain::egress::{EgressConfig, EgressPolicy};
use crate::domain::runs::RunLimits;
use crate::store::{DatabaseUrl, Retention, TargetSpec};

/// Default listen address: loopback only, unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7070";
/// Default database file, relative to the working directory.
pub const DEFAULT_DB: &str = "harrier.db";
/// Default largest import body: 16 GiB (imports stream; memory does not grow with it).
pub const DEFAULT_MAX_IMPORT_BYTES: u64 = 16 << 30;

/// harrier — a monitoring console for load-test runs and integration routes.
///
/// Import results from JMeter and ab, keep them in SQLite, and read them in the console at
/// http://127.0.0.1:7070/console (run reports with per-label statistics and charts).
#[derive(Debug, Parser)]
#[command(name = "harrier", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the console and the API (the default when no command is given).
    Serve(ServeArgs),
    /// Import load-test result files as runs: JMeter (JTL CSV or XML), Gatling
    /// (simulation.log), k6 (JSON points, CSV, summary export, line protocol), Locust
    /// (stats, stats history, JSON), ab, wrk/wrk2, hey, oha, vegeta, autocannon, Artillery,
    /// siege, SoapUI and Taurus; gzip-compressed files too. `--format auto` sniffs which.
    ///
    /// Each file becomes one run (an ab file holding several reports becomes one run per
    /// report). Damaged rows are counted and reported, not fatal; a file that fails leaves
    /// nothing behind.
    Import(ImportArgs),
    /// List the stored runs.
    Runs(TargetArgs),
    /// Compare 2 to 10 runs: figures per label and overall, changes vs the first run (the
    /// reference) and a verdict per figure (better / worse / no change beyond the noise).
    Compare(CompareArgs),
    /// Check a run against gates (absolute, or relative to a baseline); exit 0 when every
    /// gate passes, 1 when one fails, 2 on a usage or input error.
    ///
    /// Gates, one argument each: `p95<500ms`, `error_rate<1%`, `throughput>200/s`,
    /// `label=Login p95<300ms`; relative to the baseline: `p95 +10%`, `throughput -5%`
    /// (these fail only when the change is also beyond the noise).
    Check(CheckArgs),
    /// Show, pin or unpin the baseline of a scenario (the run later runs are judged against).
    Baseline(BaselineArgs),
    /// Import `harrier-seed` JSON files (published figures) as summary-only runs into the
    /// local database.
    Seed(SeedArgs),
    /// Alert rule tools.
    #[command(subcommand)]
    Rules(RulesCommand),
    /// Generate load (open model): `harrier load run URL --rate 500`.
    #[command(subcommand)]
    Load(LoadCommand),
    /// Local users of the console (sign-in is on once one exists): add, list, remove,
    /// change password or role.
    #[command(subcommand)]
    User(UserCommand),
    /// Tokens for CI jobs and load tools (`Authorization: Bearer …`, InfluxDB's
    /// `Token …`, or the basic-auth password on `/write`): create, list, revoke.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Copy everything from a SQLite database into a new, empty PostgreSQL database (runs,
    /// route history, targets, alert rules, state, history, silences, channels, users,
    /// tokens, share links, the audit log): one transaction, ids and times kept. Stop
    /// `harrier serve` on the SQLite file first.
    Migrate(MigrateArgs),
}

/// `harrier migrate --from sqlite:PATH --to postgres://…`.
#[derive(Debug, Clone, Args)]
pub struct MigrateArgs {
    /// The database to copy: `sqlite:PATH`.
    #[arg(long, value_name = "URL")]
    pub from: DatabaseUrl,
    /// The database to fill: `postgres://user:password@host:port/database` (it must exist
    /// and hold no data; harrier creates its tables).
    #[arg(long, value_name = "URL")]
    pub to: DatabaseUrl,
}

impl Command {
    /// The `--token` of a command that talks to a server.
    pub fn token(&self) -> Option<&str> {
        let target = match self {
            Command::Runs(t) => t,
            Command::Import(a) => &a.target,
            Command::Check(a) => &a.target,
            Command::Compare(a) => &a.target,
            Command::Baseline(a) => &a.target,
            _ => return None,
        };
        target.token.as_deref()
    }
}

/// The database a user or token command changes (the server's: these commands work
/// while it runs).
#[derive(Debug, Clone, Args)]
pub struct DbArgs {
    /// SQLite database file [default: db in harrier.toml, else ./harrier.db].
    #[arg(long, env = "HARRIER_DB")]
    pub db: Option<PathBuf>,
    /// The database as a URL: `sqlite:PATH` or `postgres://…` (wins over --db).
    #[arg(long, env = "HARRIER_DATABASE_URL", value_name = "URL")]
    pub database_url: Option<DatabaseUrl>,
}

impl DbArgs {
    pub fn database(&self) -> Result<DatabaseUrl, ConfigError> {
        Config::client_database(self.db.clone(), self.database_url.clone())
    }
}

/// `harrier user …`.
#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Add a user. The password is asked for (twice, not echoed), or read from the first
    /// line of standard input when that is not a terminal.
    Add {
        name: String,
        /// viewer (reads everything), operator (also starts, stops, suspends and resumes
        /// routes and resets their statistics), editor (also imports, deletes, edits
        /// targets, rules, silences, channels), admin (also users and tokens).
        #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(crate::domain::auth::Role::NAMES))]
        role: String,
        #[command(flatten)]
        db: DbArgs,
    },
    /// List the users.
    List {
        #[command(flatten)]
        db: DbArgs,
    },
    /// Remove a user (and end their sessions).
    Remove {
        name: String,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Set a new password (asked for as with `add`); ends the user's sessions.
    Passwd {
        name: String,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Change a user's role.
    Role {
        name: String,
        #[arg(value_parser = clap::builder::PossibleValuesParser::new(crate::domain::auth::Role::NAMES))]
        role: String,
        #[command(flatten)]
        db: DbArgs,
    },
}

/// `harrier token …`.
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token and print it (this once: only its hash is kept).
    Create {
        /// What uses it, e.g. ci-upload or k6-staging.
        name: String,
        /// ingest (send results: uploads, line protocol, OTLP metrics, gate checks; reads nothing),
        /// read (everything a viewer reads), operate (read, and route operations),
        /// write (everything an editor does).
        #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(crate::domain::auth::Scope::NAMES))]
        scope: String,
        /// Lifetime: 90d, 12h, 30m, or `never`.
        #[arg(long, default_value = "90d")]
        expires: String,
        #[command(flatten)]
        db: DbArgs,
    },
    /// List tokens: scope, created, expires, last used, revoked.
    List {
        #[command(flatten)]
        db: DbArgs,
    },
    /// Revoke a token by its id (the number after `hrt_`).
    Revoke {
        id: i64,
        #[command(flatten)]
        db: DbArgs,
    },
}

/// `harrier load …`.
#[derive(Debug, Subcommand)]
pub enum LoadCommand {
    /// Send HTTP/1.1 or HTTP/2 requests to URL on an arrival schedule (open model) and
    /// store the run.
    ///
    /// Requests start when the schedule says, not when an earlier response returns: each is
    /// timed from its intended start (latency, corrected for coordinated omission), and
    /// service time (actual send → response) and dispatch delay (intended → actual send)
    /// are shown beside it. One line per second, a summary at the end; the run is stored
    /// in the local database (tool `harrier`) like an import, or streamed live into a
    /// running harrier with --server (its page climbs while it runs). Ctrl-C stops early and keeps
    /// what was measured. Only loopback and private addresses unless --allow-public-target.
    ///
    /// Schedules: `--rate 500` (constant), `--rate 100..2000 --over 2m` (ramp),
    /// `--steps 100,200,400 --step-duration 30s`; `--poisson` for exponential gaps. For
    /// comparison with the tools users know, `--users 10 --think 100ms` runs the closed
    /// model instead (each user waits for its response; labelled as such, not corrected).
    ///
    /// https:// speaks TLS (the system's CAs, plus --ca-file; --client-cert/--client-key for
    /// mutual TLS) and HTTP/2 when the server agrees by ALPN; --http2 / --http1 force one.
    /// Per-request data: `--feeder users.csv --body-template envelope.xml` fills each
    /// request's `{{column}}` placeholders from the next row (in order, wrapping around).
    // Boxed: the flags are many, and clap's command enum should stay small.
    Run(Box<LoadRunArgs>),
    /// Find the rate at which URL falls over: a saturation search with the open model.
    ///
    /// A low-rate probe (the baseline), then the rate doubles until a step fails, then
    /// bisection to --tolerance, then the last passing rate held for --confirm-duration.
    /// A step fails when its steady part breaks --slo (without one: the capacity rule
    /// imported runs use), when fewer requests complete than are offered or a queue builds
    /// (plateau), or on timeouts; failing steps are cut short, and each step is followed by
    /// a cool-down until nothing is in flight. One line per step; the answer ("falls over
    /// at X req/s (limited by …); sustains Y req/s with p99 …; N requests in flight at the
    /// knee") at the end and in the stored run (its JSON's `capacity`, its page).
    Find(Box<LoadFindArgs>),
    /// Wait for work from a harrier server and take part in its load tests.
    ///
    /// The agent polls the server (`--server`, token scope ingest) until a load test started
    /// from the console (or `POST /api/v1/load-tests` with `agents: N`) gives it a part: the
    /// same request with 1/N of every rate, starting with the other agents. It sends its
    /// requests from this machine and streams its seconds into the test's run, where they
    /// merge exactly with the other agents'; then it waits for the next test (`--once`: it
    /// exits). Ctrl-C ends its part early, keeping what was measured.
    Agent(LoadAgentArgs),
}

/// `harrier load agent`.
#[derive(Debug, Clone, Args)]
pub struct LoadAgentArgs {
    /// The harrier server to take work from (e.g. http://harrier.internal:7070).
    #[arg(long, env = "HARRIER_SERVER")]
    pub server: String,
    /// Token sent to --server when it has sign-in on (`harrier token create NAME --scope ingest`).
    #[arg(long, env = "HARRIER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// This agent's name on the server [default: the host name and process id].
    #[arg(long, env = "HARRIER_AGENT_NAME")]
    pub name: Option<String>,
    /// Exit after one test (a Kubernetes Job's pod, a CI step).
    #[arg(long)]
    pub once: bool,
    /// Give up when no test comes within this long (with --once; e.g. 10m) [default: wait forever].
    #[arg(long, value_name = "DURATION")]
    pub wait: Option<String>,
}

/// `harrier load run`.
#[derive(Debug, Clone, Args)]
pub struct LoadRunArgs {
    /// The URL to load (http:// or https://; only loopback and private addresses by
    /// default). Its path and query may hold --feeder `{{column}}` placeholders.
    pub url: String,
    /// Requests per second: `500`, or a ramp `100..2000` (with --over).
    #[arg(long, conflicts_with_all = ["steps", "users"])]
    pub rate: Option<String>,
    /// How long a ramp takes from its first rate to its last (`2m`, `90s`).
    #[arg(long, requires = "rate")]
    pub over: Option<String>,
    /// Rates held one after the other, requests per second: `100,200,400`.
    #[arg(long, conflicts_with = "users")]
    pub steps: Option<String>,
    /// Closed model: this many users, each sending its next request only after the
    /// response to its last (and --think); timed from the actual send, labelled as such.
    #[arg(long)]
    pub users: Option<u32>,
    /// Closed model: pause between a response and the user's next request.
    #[arg(long, requires = "users", default_value = "0ms")]
    pub think: String,
    /// How long each of --steps is held.
    #[arg(long, default_value = "30s")]
    pub step_duration: String,
    /// Poisson arrivals (exponential gaps at the schedule's rate) instead of even spacing.
    #[arg(long)]
    pub poisson: bool,
    /// Seed of the Poisson gaps (the same seed, the same arrivals).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// How long requests are scheduled [default: the ramp's --over, all --steps, else 10s].
    #[arg(long)]
    pub duration: Option<String>,
    #[command(flatten)]
    pub request: LoadRequestArgs,
    /// Print the summary only, not a line per second.
    #[arg(long, short)]
    pub quiet: bool,
}

/// What `harrier load run` and `load find` send, and where the run goes.
#[derive(Debug, Clone, Args)]
pub struct LoadRequestArgs {
    /// Connections open at most; a request that finds them all busy waits for one (counted,
    /// and the run is labelled generator-limited).
    #[arg(long, default_value_t = 512)]
    pub max_connections: u32,
    /// Worker threads (one current-thread runtime each, sharing the schedule).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// HTTP method.
    #[arg(long, short = 'X', default_value = "GET")]
    pub method: String,
    /// A header sent with every request, `Name: value`; repeatable.
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// Send this file as every request's body.
    #[arg(long, value_name = "FILE", conflicts_with = "body_template")]
    pub body_file: Option<PathBuf>,
    /// Send this file as the body, its `{{column}}` placeholders filled from the --feeder
    /// row of each request (a SOAP envelope per user, say); values go in as they are.
    #[arg(long, value_name = "FILE")]
    pub body_template: Option<PathBuf>,
    /// Rows of per-request values: FILE.csv (a header row names the columns) or FILE.jsonl
    /// (one JSON object of string or number values per line). Each request takes the next
    /// row, in file order, wrapping around to the first after the last (over all
    /// --threads). `{{column}}` fills the --body-template, the URL's path and query
    /// (percent-encoded) and -H values; a placeholder naming no column is an error at start.
    #[arg(long, value_name = "FILE")]
    pub feeder: Option<PathBuf>,
    /// https://: trust the CA certificates in this PEM file besides the system's CA store
    /// (which SSL_CERT_FILE / SSL_CERT_DIR replace).
    #[arg(long, value_name = "PEM")]
    pub ca_file: Option<PathBuf>,
    /// https://: present this PEM certificate chain to the server (mutual TLS); needs
    /// --client-key.
    #[arg(long, value_name = "PEM", requires = "client_key")]
    pub client_cert: Option<PathBuf>,
    /// https://: the PEM private key of --client-cert.
    #[arg(long, value_name = "PEM", requires = "client_cert")]
    pub client_key: Option<PathBuf>,
    /// HTTP/2 only: h2 by ALPN on https://, prior knowledge (h2c) on http://. One
    /// connection then carries many concurrent requests (streams, as many as the server's
    /// SETTINGS allow); --max-connections still counts connections. [default: on https://
    /// h2 when the server offers it by ALPN, else HTTP/1.1; on http:// HTTP/1.1]
    #[arg(long, conflicts_with = "http1")]
    pub http2: bool,
    /// HTTP/1.1 only (on https:// too), one request at a time per kept-alive connection.
    #[arg(long)]
    pub http1: bool,
    /// Longest a request may take (from its actual send to the last byte of the response).
    #[arg(long, default_value = "10s")]
    pub timeout: String,
    /// Statuses that count as success: `200-399`, `200,201`, `200-299,404`.
    #[arg(long, default_value = "200-399")]
    pub expect_status: String,
    /// A response must contain this text, else it is a body error.
    #[arg(long, value_name = "TEXT")]
    pub expect_body_contains: Option<String>,
    /// Dispatch delay p99 above which the run is labelled generator-limited [default: half
    /// the service time p50, at least 2 ms: lateness is judged against the service].
    #[arg(long)]
    pub dispatch_limit: Option<String>,
    /// Allow a target that is neither loopback nor private.
    #[arg(long)]
    pub allow_public_target: bool,
    /// Run name [default: label and schedule].
    #[arg(long)]
    pub name: Option<String>,
    /// Scenario the run belongs to [default: method and URL].
    #[arg(long)]
    pub scenario: Option<String>,
    /// A tag such as build=123; repeatable.
    #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = parse_tag)]
    pub tags: Vec<(String, String)>,
    /// SQLite database file to store the run in [default: db in harrier.toml, else ./harrier.db].
    #[arg(long, env = "HARRIER_DB", conflicts_with = "no_store")]
    pub db: Option<PathBuf>,
    /// Stream the run into a running harrier (e.g. http://127.0.0.1:7070) instead of a
    /// database file: its run page shows it live, second by second, and it ends with the
    /// exact figures this process prints.
    #[arg(long, value_name = "URL", conflicts_with_all = ["db", "no_store"])]
    pub server: Option<String>,
    /// Token sent to --server when it has sign-in on (`harrier token create NAME --scope ingest`).
    #[arg(long, env = "HARRIER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Do not store the run (print only).
    #[arg(long)]
    pub no_store: bool,
    /// Stop early when this holds: "errors>50% for 5s", "p99>2s for 10s" (every second of
    /// the duration in a row); what was measured is kept.
    #[arg(long, value_name = "RULE")]
    pub abort_on: Option<String>,
}

/// `harrier load find`.
#[derive(Debug, Clone, Args)]
pub struct LoadFindArgs {
    /// The URL to load (http:// or https://; only loopback and private addresses by
    /// default). Its path and query may hold --feeder `{{column}}` placeholders.
    pub url: String,
    /// The objective a step must keep: "p99<200ms,errors<1%" (terms pNN<DURATION and
    /// errors<N%) [default: the capacity rule imported runs use: p95 at most twice the
    /// probe's, errors at most 1 %].
    #[arg(long)]
    pub slo: Option<String>,
    /// Stop bisecting when the bracket is this narrow, relative to the passing rate: `5%`.
    #[arg(long, default_value = "5%")]
    pub tolerance: String,
    /// The probe's rate (the baseline), requests per second; expansion doubles from it.
    #[arg(long, default_value = "20")]
    pub start_rate: String,
    /// Highest rate offered, requests per second.
    #[arg(long, default_value = "100000")]
    pub max_rate: String,
    /// How long each step is held (its first second is not judged).
    #[arg(long, default_value = "6s")]
    pub step_duration: String,
    /// How long the last passing rate is held to confirm it.
    #[arg(long, default_value = "20s")]
    pub confirm_duration: String,
    /// A step ends early after this many failing seconds in a row.
    #[arg(long, default_value = "3s")]
    pub fail_after: String,
    /// The search stops here at the latest, keeping what was measured.
    #[arg(long, default_value = "10m")]
    pub max_duration: String,
    #[command(flatten)]
    pub request: LoadRequestArgs,
    /// Print every second too, not only each step.
    #[arg(long, short)]
    pub verbose: bool,
}

/// `harrier rules …`.
#[derive(Debug, Subcommand)]
pub enum RulesCommand {
    /// Unit-test alert rules against input series, like `promtool test rules` (exit 0 all
    /// passed, 1 a test failed, 2 a file cannot be read).
    Test {
        /// Rule test files (TOML: rules, series, tests; see `alerts::ruletest`).
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
}

#[derive(Debug, Clone, Args)]
pub struct SeedArgs {
    /// harrier-seed JSON files.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// SQLite database file to write [default: ./harrier.db].
    #[arg(long, env = "HARRIER_DB")]
    pub db: Option<PathBuf>,
}

/// Output formats of `harrier compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CompareFormat {
    /// A plain-text table per label.
    Table,
    /// The comparison as JSON (as `GET /api/v1/compare`).
    Json,
    /// Markdown tables to paste into a pull request.
    Markdown,
    /// One self-contained HTML file (inline CSS and SVG charts) that can be mailed.
    Html,
}

#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// Run ids; the first is the reference.
    #[arg(required = true, num_args = 2..=10, value_name = "RUN")]
    pub runs: Vec<i64>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: CompareFormat,
    /// Write to this file instead of standard output.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Smallest change (% of the reference) called better or worse.
    #[arg(long, default_value_t = crate::domain::compare::DEFAULT_MIN_EFFECT_PCT)]
    pub min_effect_pct: f64,
    #[command(flatten)]
    pub target: TargetArgs,
}

#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// The run to check.
    #[arg(value_name = "RUN")]
    pub run: String,
    /// Gates, one argument each (quote those with spaces): `FIGURE OP VALUE` (`p95<500ms`,
    /// `error_rate<1%`, `throughput>200/s`, `capacity_rps>150`) or `FIGURE ±N%` against the
    /// baseline (`p95 +10%`, `capacity_rps -10%`: fails when the figure moved that far the
    /// bad way AND beyond the noise), optionally `label=NAME ` first. Figures: p50 p90 p95
    /// p99 mean max (ms), error_rate (%), throughput (req/s, failed requests included),
    /// successful_rps (req/s that did not fail), capacity_rps (the stated capacity: the
    /// successful req/s a ramp sustained up to its first breach — knee, p95 doubling or
    /// errors past 1 % — or the rate a `harrier load find` search sustained; run total
    /// only), capacity_users (the users there; ramps only). A figure the run does not have
    /// fails the gate, saying so.
    #[arg(value_name = "GATE")]
    pub gates: Vec<String>,
    /// Baseline for relative gates: a run id, `auto` (the scenario's pinned baseline, else
    /// the latest earlier run that passed its check) or `none`.
    #[arg(long, default_value = "auto")]
    pub baseline: String,
    /// Write a JUnit XML report (one test case per gate) for Jenkins or GitLab.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Smallest change (% of the baseline) a verdict calls worse.
    #[arg(long, default_value_t = crate::domain::compare::DEFAULT_MIN_EFFECT_PCT)]
    pub min_effect_pct: f64,
    /// Do not store the result (stored results let `auto` skip runs that failed).
    #[arg(long)]
    pub no_record: bool,
    #[command(flatten)]
    pub target: TargetArgs,
}

#[derive(Debug, Clone, Args)]
pub struct BaselineArgs {
    /// The scenario.
    pub scenario: String,
    /// Pin this run as the baseline (it must belong to the scenario).
    #[arg(value_name = "RUN", conflicts_with = "clear")]
    pub run: Option<i64>,
    /// Unpin the baseline (`auto` then picks the latest passing run).
    #[arg(long)]
    pub clear: bool,
    #[command(flatten)]
    pub target: TargetArgs,
}

/// Where `serve` listens and keeps its data.
#[derive(Debug, Default, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on [default: 127.0.0.1:7070; a non-loopback address, such as
    /// 0.0.0.0:7070, needs sign-in on (a user from `harrier user add`, or [oidc] or
    /// [auth_proxy] in harrier.toml) or --insecure-no-auth].
    #[arg(long, env = "HARRIER_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// SQLite database file, created if missing [default: ./harrier.db].
    #[arg(long, env = "HARRIER_DB")]
    pub db: Option<PathBuf>,
    /// The database as a URL: `sqlite:PATH` or `postgres://user:password@host:port/database`
    /// (the database must exist; harrier creates its tables). Wins over --db.
    #[arg(long, env = "HARRIER_DATABASE_URL", value_name = "URL")]
    pub database_url: Option<DatabaseUrl>,
    /// Configuration file [default: ./harrier.toml when it exists].
    #[arg(long, env = "HARRIER_CONFIG")]
    pub config: Option<PathBuf>,
    /// The address users open, when a reverse proxy serves harrier
    /// (`https://harrier.example.com`): its host is accepted in the Host header and its
    /// origin for websockets and changes [default: public_url under [server] in harrier.toml].
    #[arg(long, env = "HARRIER_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Serve a non-loopback address (0.0.0.0, a LAN address) without any sign-in: anyone
    /// who reaches it can read and change everything.
    #[arg(long, env = "HARRIER_INSECURE_NO_AUTH")]
    pub insecure_no_auth: bool,
}

/// Which harrier a client command talks to: a running server or a database file.
#[derive(Debug, Clone, Args)]
pub struct TargetArgs {
    /// Talk to a running harrier (e.g. http://127.0.0.1:7070) instead of opening the database.
    #[arg(long, env = "HARRIER_SERVER", conflicts_with = "db")]
    pub server: Option<String>,
    /// Token sent to --server when it has sign-in on (`harrier token create`): scope
    /// ingest for `import` and `check`, read for `runs`, `compare`, `baseline`.
    #[arg(long, env = "HARRIER_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// SQLite database file [default: db in harrier.toml, else ./harrier.db].
    #[arg(long, env = "HARRIER_DB")]
    pub db: Option<PathBuf>,
    /// The database as a URL: `sqlite:PATH` or `postgres://…` (wins over --db).
    #[arg(
        long,
        env = "HARRIER_DATABASE_URL",
        value_name = "URL",
        conflicts_with = "server"
    )]
    pub database_url: Option<DatabaseUrl>,
}

impl TargetArgs {
    /// The database this command opens: `--database-url`, else `--db`, else the
    /// configuration file's (see [`Config::client_database`]).
    pub fn database(&self) -> Result<DatabaseUrl, ConfigError> {
        Config::client_database(self.db.clone(), self.database_url.clone())
    }
}

#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// Result files to import (`-` reads standard input).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Input format; `auto` sniffs it from the first bytes.
    #[arg(long, default_value = "auto", value_parser = clap::builder::PossibleValuesParser::new(crate::sources::ingest::Format::NAMES))]
    pub format: String,
    /// Run name [default: the file name; for ab, host and path].
    #[arg(long)]
    pub name: Option<String>,
    /// Scenario the run belongs to (runs of one scenario are compared). A file of reports
    /// against several targets (an ab loop over two URLs) gets one scenario per target:
    /// `SCENARIO · host:port/path`.
    #[arg(long)]
    pub scenario: Option<String>,
    /// A tag such as build=123 or env=staging; repeatable. `service=NAME` shades the run on
    /// that service's route charts.
    #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = parse_tag)]
    pub tags: Vec<(String, String)>,
    /// Replace the figures of this existing run (e.g. one streamed live) with the file's
    /// exact ones, keeping its name, scenario, tags and notes.
    #[arg(long, value_name = "RUN")]
    pub replace: Option<i64>,
    #[command(flatten)]
    pub target: TargetArgs,
}

fn parse_tag(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
        _ => Err(format!("expected KEY=VALUE, got {s:?}")),
    }
}

/// `harrier.toml`: every key optional.
///
/// ```toml
/// listen = "127.0.0.1:7070"
/// db = "harrier.db"          # or: database_url = "postgres://harrier@127.0.0.1:5432/harrier"
/// max_import_bytes = 17179869184
/// apdex_t_ms = 500
/// live_idle_timeout_s = 30
/// self_scrape = true          # scrape harrier's own /metrics as target "harrier"
///
/// [retention]                 # route figures
/// raw_hours = 48
/// minute_days = 30
/// ten_minute_days = 90
/// hour_days = 365
///
/// [[targets]]
/// name = "orders"
/// url = "http://127.0.0.1:9101/metrics"
/// kind = "prometheus"         # or "jolokia" (a Jolokia agent URL)
/// interval_s = 15
/// timeout_s = 10
/// labels = { service = "orders", instance = "orders-1" }
///
/// [alerts]                    # see alerts::AlertsConfig
/// evaluation_interval = "15s"
///
/// [egress]                    # see egress::EgressConfig
/// deny = ["10.20.0.0/16"]
///
/// [auth_proxy]                # see auth::AuthProxyConfig
/// header = "X-Forwarded-User"
/// proxies = ["127.0.0.1/32"]
///
/// [oidc]                      # see oidc::OidcConfig
/// issuer = "https://sso.example.com"
/// client_id = "harrier"
/// groups = { "perf-team" = "editor" }
///
/// [limits]                    # see LimitsSection
/// min_timestamp = "1990-01-01"
/// max_timestamp = "2100-01-01"
/// max_elapsed_ms = 86400000
/// ```
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub listen: Option<SocketAddr>,
    pub db: Option<PathBuf>,
    /// `sqlite:PATH` or `postgres://…`; wins over `db`.
    pub database_url: Option<DatabaseUrl>,
    pub max_import_bytes: Option<u64>,
    pub apdex_t_ms: Option<u64>,
    pub live_idle_timeout_s: Option<u64>,
    pub self_scrape: Option<bool>,
    pub retention: Option<Retention>,
    #[serde(default)]
    pub targets: Vec<TargetSpec>,
    pub alerts: Option<AlertsConfig>,
    pub server: Option<ServerSection>,
    pub limits: Option<LimitsSection>,
    pub egress: Option<EgressConfig>,
    /// `[auth_proxy]`: sign-in by a reverse proxy's user header.
    pub auth_proxy: Option<crate::domain::auth::AuthProxyConfig>,
    /// `[oidc]`: single sign-on with an OpenID Connect provider.
    pub oidc: Option<crate::domain::oidc::OidcConfig>,
    /// `[load]`: load tests started from the console.
    pub load: Option<LoadSection>,
}

/// `[load]` in `harrier.toml`: load tests started from the console (Runs → New load test).
/// Off by default: a server that sends load to any URL someone types is a risk on a shared
/// network.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadSection {
    /// Allow editors and admins to start load tests from the console (default false).
    pub enabled: Option<bool>,
    /// Also load addresses that are neither loopback nor private (default false).
    pub allow_public_targets: Option<bool>,
    /// Highest rate a console load test may offer, req/s (default 5,000).
    pub max_rate: Option<f64>,
    /// Longest a console load test may run: `10m`, `1h` (default `10m`).
    pub max_duration: Option<String>,
}

/// The resolved `[load]` section.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadTestPolicy {
    pub enabled: bool,
    pub allow_public_targets: bool,
    /// req/s.
    pub max_rate: f64,
    /// s.
    pub max_duration_s: f64,
}

impl Default for LoadTestPolicy {
    fn default() -> Self {
        LoadTestPolicy {
            enabled: false,
            allow_public_targets: false,
            max_rate: 5_000.0,
            max_duration_s: 600.0,
        }
    }
}

impl LoadTestPolicy {
    fn from_section(s: &LoadSection) -> Result<LoadTestPolicy, String> {
        let d = LoadTestPolicy::default();
        let max_duration_s = match &s.max_duration {
            Some(text) => crate::domain::format::parse_duration_ms(text)
                .filter(|ms| *ms > 0)
                .map(|ms| ms as f64 / 1000.0)
                .ok_or_else(|| {
                    format!("[load] max_duration {text:?}: expected a duration such as 10m")
                })?,
            None => d.max_duration_s,
        };
        let max_rate = s.max_rate.unwrap_or(d.max_rate);
        if !(max_rate.is_finite() && max_rate >= 1.0) {
            return Err(format!(
                "[load] max_rate {max_rate}: expected requests per second, at least 1"
            ));
        }
        Ok(LoadTestPolicy {
            enabled: s.enabled.unwrap_or(false),
            allow_public_targets: s.allow_public_targets.unwrap_or(false),
            max_rate,
            max_duration_s,
        })
    }
}

/// `[limits]` in `harrier.toml`: the resource budget of every input (docs/limits.md).
/// Every key is optional; the defaults are those of [`RunLimits::default`].
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsSection {
    /// Earliest plausible sample time: `YYYY-MM-DD` or RFC 3339 (default `1990-01-01`).
    pub min_timestamp: Option<String>,
    /// Latest plausible sample time, exclusive: `YYYY-MM-DD` or RFC 3339 (default `2100-01-01`).
    pub max_timestamp: Option<String>,
    /// Longest plausible elapsed time of one sample, ms (default 86,400,000 = 24 h).
    pub max_elapsed_ms: Option<u64>,
    /// Largest decompressed : compressed ratio of a gzip input past 8 MiB (default 200;
    /// 0 turns the check off).
    pub max_gzip_ratio: Option<u64>,
    /// Distinct labels kept per run (default 10,000); further labels are folded into one
    /// "(other labels)" row.
    pub max_labels: Option<usize>,
    /// Longest label kept, characters (default 512); longer ones are cut and marked "…".
    pub max_label_chars: Option<usize>,
    /// Longest error message kept, characters (default 2,048); cut and marked "…".
    pub max_message_chars: Option<usize>,
    /// Routes kept per scrape target (default 10,000); series of further routes are
    /// skipped and the target says so.
    pub max_routes_per_target: Option<usize>,
    /// Longest line, CSV row, XML element or line-protocol line read, bytes (default
    /// 1 MiB: real tool output stays far below it); a longer line is a rejected row.
    pub max_line_bytes: Option<usize>,
    /// Largest whole-file summary (k6 summary export, Locust `--json`, a wrk report…),
    /// bytes (default 64 MiB: real ones are a few KB to a few MB); larger stops the import.
    pub max_document_bytes: Option<u64>,
}

impl LimitsSection {
    /// The run limits these keys give over the defaults; `Err` names the key that is wrong.
    pub fn run_limits(&self) -> Result<RunLimits, String> {
        let mut l = RunLimits::default();
        if let Some(t) = &self.min_timestamp {
            l.samples.min_start_ms =
                time_ms(t).map_err(|e| format!("limits.min_timestamp: {e}"))?;
        }
        if let Some(t) = &self.max_timestamp {
            l.samples.max_start_ms =
                time_ms(t).map_err(|e| format!("limits.max_timestamp: {e}"))?;
        }
        if l.samples.min_start_ms >= l.samples.max_start_ms {
            return Err("limits.min_timestamp must be before limits.max_timestamp".into());
        }
        if let Some(ms) = self.max_elapsed_ms {
            l.samples.max_elapsed_ms = ms;
        }
        if let Some(r) = self.max_gzip_ratio {
            l.max_gzip_ratio = r;
        }
        match self.max_line_bytes {
            Some(n) if n < 1024 => return Err("limits.max_line_bytes must be at least 1024".into()),
            Some(n) => l.max_line_bytes = n,
            None => {}
        }
        match self.max_document_bytes {
            Some(n) if n < 1024 => {
                return Err("limits.max_document_bytes must be at least 1024".into());
            }
            Some(n) => l.max_document_bytes = n,
            None => {}
        }
        for (key, value, slot) in [
            ("max_labels", self.max_labels, &mut l.max_labels),
            (
                "max_label_chars",
                self.max_label_chars,
                &mut l.max_label_chars,
            ),
            (
                "max_message_chars",
                self.max_message_chars,
                &mut l.max_message_chars,
            ),
        ] {
            match value {
                Some(0) => return Err(format!("limits.{key} must be at least 1")),
                Some(n) => *slot = n,
                None => {}
            }
        }
        Ok(l)
    }
}

/// `YYYY-MM-DD` (midnight UTC) or an RFC 3339 time → unix epoch ms.
fn time_ms(text: &str) -> Result<i64, String> {
    use time::format_description::well_known::Rfc3339;
    let date = time::macros::format_description!("[year]-[month]-[day]");
    let t = match time::Date::parse(text, &date) {
        Ok(d) => d.midnight().assume_utc(),
        Err(_) => time::OffsetDateTime::parse(text, &Rfc3339)
            .map_err(|_| format!("{text:?} is neither a date (YYYY-MM-DD) nor an RFC 3339 time"))?,
    };
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).map_err(|e| e.to_string())
}

/// `[server]` in `harrier.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    /// harrier's address as its users reach it (`https://harrier.example.com`): links in
    /// alert notifications point there. Default: `http://` + the listen address.
    pub public_url: Option<String>,
    /// Connections served at once (default 512); past it new connections wait in the
    /// listen backlog until one closes.
    pub max_connections: Option<usize>,
    /// Seconds a client may take to send a request's headers, and to start the next
    /// request on a kept-alive connection (default 10).
    pub header_timeout_s: Option<u64>,
    /// Seconds `serve` waits for requests in flight after Ctrl-C or SIGTERM before it
    /// closes the connections left (default 10).
    pub shutdown_grace_s: Option<u64>,
    /// Serve a non-loopback listen address without sign-in (as `--insecure-no-auth`).
    pub insecure_no_auth: Option<bool>,
}

/// How the server treats connections (`[server]` in `harrier.toml`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConnectionLimits {
    /// Connections served at once.
    pub max_connections: usize,
    /// Time allowed for a request's headers (and between requests on a kept-alive
    /// connection), seconds.
    pub header_timeout_s: u64,
    /// Time given to requests in flight at shutdown, seconds.
    pub shutdown_grace_s: u64,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: 512,
            header_timeout_s: 10,
            shutdown_grace_s: 10,
        }
    }
}

/// Default idle time after which a live run is complete, seconds.
pub const DEFAULT_LIVE_IDLE_TIMEOUT_S: u64 = 30;

/// Default number of routes kept per scrape target.
pub const DEFAULT_MAX_ROUTES_PER_TARGET: usize = 10_000;

/// Default Apdex threshold T, ms.
pub const DEFAULT_APDEX_T_MS: u64 = 500;

/// The resolved settings of a server.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    /// The SQLite file, when `database_url` is not set (see [`Config::database`]).
    pub db: PathBuf,
    /// The database as a URL (`--database-url`, `HARRIER_DATABASE_URL`, `database_url`);
    /// `None`: the SQLite file `db`.
    pub database_url: Option<DatabaseUrl>,
    /// Largest accepted import body, bytes.
    pub max_import_bytes: u64,
    /// Apdex threshold T, ms (a request is satisfied at ≤ T, tolerating at ≤ 4T).
    pub apdex_t_ms: u64,
    /// A live run with no points for this long is complete, seconds.
    pub live_idle_timeout_s: u64,
    /// Scrape harrier's own `/metrics` (the built-in target "harrier").
    pub self_scrape: bool,
    /// How long route figures are kept per resolution.
    pub retention: Retention,
    /// Scrape targets from the configuration file.
    pub targets: Vec<TargetSpec>,
    /// Alert settings and rules from the configuration file.
    pub alerts: AlertsConfig,
    /// Connection cap and time-outs.
    pub connections: ConnectionLimits,
    /// What every imported or streamed run is held to (`[limits]`).
    pub run_limits: RunLimits,
    /// Routes kept per scrape target (`[limits] max_routes_per_target`).
    pub max_routes_per_target: usize,
    /// The address users open behind a proxy (`--public-url`, `[server] public_url`).
    pub public_url: Option<String>,
    /// Serve a non-loopback address without sign-in (`--insecure-no-auth`).
    pub insecure_no_auth: bool,
    /// Hosts, origins and start-up check of the server (from `listen` and `public_url`).
    pub site: SitePolicy,
    /// Where scrapes and notifications may go (`[egress]`).
    pub egress: EgressPolicy,
    /// Sign-in by a reverse proxy's user header (`[auth_proxy]`).
    pub auth_proxy: Option<crate::domain::auth::AuthProxy>,
    /// Single sign-on with an OpenID Connect provider (`[oidc]`).
    pub oidc: Option<crate::domain::oidc::Oidc>,
    /// Load tests started from the console (`[load]`).
    pub load_tests: LoadTestPolicy,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: DEFAULT_LISTEN.parse().expect("valid default address"),
            db: PathBuf::from(DEFAULT_DB),
            database_url: None,
            max_import_bytes: DEFAULT_MAX_IMPORT_BYTES,
            apdex_t_ms: DEFAULT_APDEX_T_MS,
            live_idle_timeout_s: DEFAULT_LIVE_IDLE_TIMEOUT_S,
            self_scrape: true,
            retention: Retention::default(),
            targets: Vec::new(),
            alerts: AlertsConfig::default(),
            connections: ConnectionLimits::default(),
            run_limits: RunLimits::default(),
            max_routes_per_target: DEFAULT_MAX_ROUTES_PER_TARGET,
            public_url: None,
            insecure_no_auth: false,
            site: SitePolicy::default(),
            egress: EgressPolicy::default(),
            auth_proxy: None,
            oidc: None,
            load_tests: LoadTestPolicy::default(),
        }
    }
}

/// A configuration file that cannot be read or parsed.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

impl Config {
    /// The database a client command (`import`, `runs`) uses: `--db` / `HARRIER_DB`, else
    /// `db` in the configuration file (`HARRIER_CONFIG`, else `./harrier.toml`), else
    /// `./harrier.db` — the same file `harrier serve` would open from here.
    pub fn client_db(db: Option<PathBuf>) -> Result<PathBuf, ConfigError> {
        if let Some(db) = db {
            return Ok(db);
        }
        Ok(Config::client()?.db)
    }

    /// The database a client command uses: `--database-url` / `HARRIER_DATABASE_URL`, else
    /// `--db` / `HARRIER_DB`, else the configuration file's `database_url` or `db`, else
    /// `sqlite:harrier.db` — the database `harrier serve` would open from here.
    pub fn client_database(
        db: Option<PathBuf>,
        url: Option<DatabaseUrl>,
    ) -> Result<DatabaseUrl, ConfigError> {
        if let Some(url) = url {
            return Ok(url);
        }
        if let Some(db) = db {
            return Ok(DatabaseUrl::from_db_arg(&db));
        }
        Ok(Config::client()?.database())
    }

    /// The database to open: `database_url` when set, else the SQLite file `db`.
    pub fn database(&self) -> DatabaseUrl {
        self.database_url
            .clone()
            .unwrap_or_else(|| DatabaseUrl::Sqlite(self.db.clone()))
    }

    /// The settings a client command reads (`HARRIER_CONFIG`, else `./harrier.toml`, else
    /// the defaults): e.g. the `[limits]` that `harrier import --db` holds files to.
    pub fn client() -> Result<Config, ConfigError> {
        let args = ServeArgs {
            config: std::env::var_os("HARRIER_CONFIG").map(PathBuf::from),
            ..ServeArgs::default()
        };
        Config::resolve(&args)
    }

    /// Resolves flags/environment over the file (explicit `--config`, else `./harrier.toml`
    /// when present) over the defaults.
    pub fn resolve(args: &ServeArgs) -> Result<Config, ConfigError> {
        let file = match &args.config {
            Some(path) => load_file(path)?,
            None if Path::new("harrier.toml").exists() => load_file(Path::new("harrier.toml"))?,
            None => FileConfig::default(),
        };
        let defaults = Config::default();
        let server = file.server.unwrap_or_default();
        let public_url = args.public_url.clone().or(server.public_url);
        let mut alerts = file.alerts.unwrap_or_default();
        if alerts.external_url.is_none() {
            alerts.external_url = public_url
                .as_ref()
                .map(|u| u.trim_end_matches('/').to_string());
        }
        let conn_defaults = ConnectionLimits::default();
        let connections = ConnectionLimits {
            max_connections: server
                .max_connections
                .filter(|n| *n > 0)
                .unwrap_or(conn_defaults.max_connections),
            header_timeout_s: server
                .header_timeout_s
                .filter(|n| *n > 0)
                .unwrap_or(conn_defaults.header_timeout_s),
            shutdown_grace_s: server
                .shutdown_grace_s
                .unwrap_or(conn_defaults.shutdown_grace_s),
        };
        let config_error = |message: String| ConfigError {
            path: args
                .config
                .clone()
                .unwrap_or_else(|| PathBuf::from("harrier.toml"))
                .display()
                .to_string(),
            message,
        };
        alerts.validate().map_err(config_error)?;
        let limits = file.limits.unwrap_or_default();
        let run_limits = limits.run_limits().map_err(config_error)?;
        let listen = args.listen.or(file.listen).unwrap_or(defaults.listen);
        let site = SitePolicy::new(listen, public_url.as_deref())
            .map_err(|e| config_error(e.to_string()))?;
        Ok(Config {
            listen,
            public_url,
            insecure_no_auth: args.insecure_no_auth || server.insecure_no_auth.unwrap_or(false),
            site,
            egress: EgressPolicy::from_config(&file.egress.unwrap_or_default())
                .map_err(config_error)?,
            auth_proxy: match &file.auth_proxy {
                Some(c) => {
                    Some(crate::domain::auth::AuthProxy::from_config(c).map_err(config_error)?)
                }
                None => None,
            },
            oidc: match &file.oidc {
                Some(c) => Some(
                    crate::domain::oidc::Oidc::from_config(
                        c,
                        std::env::var("HARRIER_OIDC_CLIENT_SECRET").ok(),
                    )
                    .map_err(config_error)?,
                ),
                None => None,
            },
            load_tests: LoadTestPolicy::from_section(&file.load.clone().unwrap_or_default())
                .map_err(config_error)?,
            // Flags and environment over the file; within each, the URL over the path.
            database_url: match (&args.database_url, &args.db) {
                (Some(url), _) => Some(url.clone()),
                // `--db postgres://…` is taken as the URL it is, not as a file name.
                (None, Some(db)) => match DatabaseUrl::from_db_arg(db) {
                    DatabaseUrl::Sqlite(_) => None,
                    url => Some(url),
                },
                (None, None) => file.database_url,
            },
            db: args.db.clone().or(file.db).unwrap_or(defaults.db),
            max_import_bytes: file.max_import_bytes.unwrap_or(defaults.max_import_bytes),
            apdex_t_ms: file
                .apdex_t_ms
                .filter(|t| *t > 0)
                .unwrap_or(defaults.apdex_t_ms),
            live_idle_timeout_s: file
                .live_idle_timeout_s
                .filter(|t| *t > 0)
                .unwrap_or(defaults.live_idle_timeout_s),
            self_scrape: file.self_scrape.unwrap_or(defaults.self_scrape),
            retention: file.retention.unwrap_or_default(),
            targets: file.targets,
            alerts,
            connections,
            run_limits,
            max_routes_per_target: match limits.max_routes_per_target {
                Some(0) => {
                    return Err(config_error(
                        "limits.max_routes_per_target must be at least 1".into(),
                    ));
                }
                Some(n) => n,
                None => DEFAULT_MAX_ROUTES_PER_TARGET,
            },
        })
    }
}

impl Config {
    /// What protects this server when it serves other machines (see
    /// [`crate::domain::access::exposure_check`], which `serve` calls before it binds).
    pub fn protection(&self) -> Protection {
        Protection {
            insecure_no_auth: self.insecure_no_auth,
            users: false,
            auth_proxy: self.auth_proxy.is_some(),
            oidc: self.oidc.is_some(),
        }
    }
}

fn load_file(path: &Path) -> Result<FileConfig, ConfigError> {
    let err = |message: String| ConfigError {
        path: path.display().to_string(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    toml::from_str(&text).map_err(|e| err(e.to_string()))
}

#[cfg(test)]
mod alerts_tests {
    use super::FileConfig;

    #[test]
    fn alerts_section_of_harrier_toml() {
        let text = r#"
            [alerts]
            evaluation_interval = "30s"
            builtin_rules = false

            [[alerts.rules]]
            name = "CheckoutSlow"
            subject = { route = "/checkout*" }
            measure = "p95_ms"
            comparison = ">"
            threshold = 800
            for = "2m"
        "#;
        let file: FileConfig = toml::from_str(text).unwrap();
        let alerts = file.alerts.unwrap();
        alerts.validate().unwrap();
        assert_eq!(alerts.evaluation_interval.ms(), 30_000);
        assert!(!alerts.builtin_rules);
        assert_eq!(alerts.rules[0].name, "CheckoutSlow");
        assert_eq!(alerts.rules[0].window.ms(), 300_000);

        let mut twice = alerts.clone();
        twice.rules.push(alerts.rules[0].clone());
        assert!(twice.validate().unwrap_err().contains("used twice"));
        let mut fast = alerts;
        fast.evaluation_interval = crate::domain::alerts::rule::Duration(10);
        assert!(fast.validate().unwrap_err().contains("evaluation_interval"));
    }
}

#[cfg(test)]
mod limits_tests {
    use super::{FileConfig, LimitsSection};

    #[test]
    fn limits_section_of_harrier_toml() {
        let file: FileConfig = toml::from_str(
            "[limits]\nmin_timestamp = \"2000-01-01\"\nmax_timestamp = \"2030-06-01T12:00:00Z\"\nmax_elapsed_ms = 600000\n",
        )
        .unwrap();
        let l = file.limits.unwrap().run_limits().unwrap();
        assert_eq!(l.samples.min_start_ms, 946_684_800_000);
        assert_eq!(l.samples.max_start_ms, 1_906_545_600_000);
        assert_eq!(l.samples.max_elapsed_ms, 600_000);
        let bad = LimitsSection {
            min_timestamp: Some("yesterday".into()),
            ..LimitsSection::default()
        };
        assert!(
            bad.run_limits()
                .unwrap_err()
                .contains("limits.min_timestamp")
        );
        let reversed = LimitsSection {
            min_timestamp: Some("2100-01-02".into()),
            ..LimitsSection::default()
        };
        assert!(reversed.run_limits().unwrap_err().contains("before"));
    }
}

#[cfg(test)]
mod targets_tests {
    use super::FileConfig;

    /// An unset scrape time-out is 10 s, or the interval when that is shorter (as
    /// Prometheus does), so `interval_s = 1` alone is a valid target; a given one is kept.
    #[test]
    fn unset_timeout_follows_a_short_interval() {
        let text = r#"
            [[targets]]
            name = "fast"
            url = "http://127.0.0.1:9100/metrics"
            interval_s = 1

            [[targets]]
            name = "default"
            url = "http://127.0.0.1:9101/metrics"

            [[targets]]
            name = "given"
            url = "http://127.0.0.1:9102/metrics"
            interval_s = 30
            timeout_s = 2.5
        "#;
        let file: FileConfig = toml::from_str(text).unwrap();
        let t: Vec<(f64, f64)> = file
            .targets
            .iter()
            .map(|t| (t.interval_s, t.timeout_s))
            .collect();
        assert_eq!(t, [(1.0, 1.0), (15.0, 10.0), (30.0, 2.5)]);
    }
}

#[cfg(test)]
mod database_tests {
    use std::path::PathBuf;

    use super::{Config, DatabaseUrl, FileConfig, ServeArgs};

    #[test]
    fn database_urls_parse_or_say_what_is_accepted() {
        assert_eq!(
            DatabaseUrl::parse("sqlite:data/h.db").unwrap(),
            DatabaseUrl::Sqlite(PathBuf::from("data/h.db"))
        );
        assert_eq!(
            DatabaseUrl::parse("sqlite:///var/lib/h.db").unwrap(),
            DatabaseUrl::Sqlite(PathBuf::from("/var/lib/h.db"))
        );
        let pg = "postgres://harrier:secret@127.0.0.1:5432/harrier";
        assert_eq!(
            DatabaseUrl::parse(pg).unwrap(),
            DatabaseUrl::Postgres(pg.into())
        );
        assert!(!DatabaseUrl::parse(pg).unwrap().shown().contains("secret"));
        assert!(DatabaseUrl::parse("sqlite:").is_err());
        let err = DatabaseUrl::parse("mysql://root:pw@db/h").unwrap_err();
        assert!(err.contains("sqlite:PATH or postgres://"), "{err}");
        assert!(!err.contains("pw"), "the password is never shown: {err}");
        // `--db` takes a URL too, and a file name otherwise.
        assert_eq!(
            DatabaseUrl::from_db_arg(std::path::Path::new(pg)),
            DatabaseUrl::Postgres(pg.into())
        );
        assert_eq!(
            Config::client_database(Some(PathBuf::from(pg)), None).unwrap(),
            DatabaseUrl::Postgres(pg.into())
        );
        assert_eq!(
            DatabaseUrl::from_db_arg(std::path::Path::new("data/h.db")),
            DatabaseUrl::Sqlite(PathBuf::from("data/h.db"))
        );
        // In harrier.toml, a bad URL is an error naming the key's value.
        assert!(toml::from_str::<FileConfig>("database_url = \"oracle:x\"").is_err());
    }

    #[test]
    fn flags_win_over_the_file_and_a_url_over_a_path() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("harrier.toml");
        std::fs::write(
            &file,
            "db = \"file.db\"\ndatabase_url = \"postgres://h@127.0.0.1/file\"\n",
        )
        .unwrap();
        let args = |db: Option<&str>, url: Option<&str>| ServeArgs {
            db: db.map(PathBuf::from),
            database_url: url.map(|u| DatabaseUrl::parse(u).unwrap()),
            config: Some(file.clone()),
            ..ServeArgs::default()
        };
        let database = |a: ServeArgs| Config::resolve(&a).unwrap().database();
        assert_eq!(
            database(args(None, None)),
            DatabaseUrl::Postgres("postgres://h@127.0.0.1/file".into()),
            "the file's URL over the file's db"
        );
        assert_eq!(
            database(args(Some("flag.db"), None)),
            DatabaseUrl::Sqlite(PathBuf::from("flag.db")),
            "--db over the file"
        );
        assert_eq!(
            database(args(Some("flag.db"), Some("sqlite:url.db"))),
            DatabaseUrl::Sqlite(PathBuf::from("url.db")),
            "--database-url over --db"
        );
        assert_eq!(
            Config::default().database(),
            DatabaseUrl::Sqlite(PathBuf::from("harrier.db"))
        );
    }
}
