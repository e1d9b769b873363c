//! Imports: a result file (or an upload stream) → parsed runs → one store transaction →
//! live events and metrics.
//!
//! Shared by `harrier import --db`, `POST /api/v1/runs` and the console's upload form.
//! Parsing runs on a blocking thread over a streaming reader, so memory stays bounded
//! whatever the file size, and progress (bytes read) is reported while it runs.

use std::io::{BufReader, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;
use tokio::io::AsyncRead;
use tokio_util::io::SyncIoBridge;

use crate::domain::compare::{DEFAULT_RESAMPLES, stored};
use crate::domain::runs::limits::{MAX_NAME_CHARS, check_length, truncate_chars};
use crate::domain::runs::{RunData, RunLimits};
use crate::error::{Error, Result};
use crate::services::live::{Event, Hub};
use crate::sources::ingest::{self, Format};
use crate::store::{NewRun, Store};

/// How often a running import reports progress.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);
/// Read buffer of the parsers.
const READ_BUFFER: usize = 1 << 20;

/// Imports parsed and stored at once, process-wide: the machine's cores, at least 2. A
/// heavy import holds its parser's state (labels, buckets, distributions) until it is
/// stored, so more at once would only add memory, not speed; the others wait their turn
/// (their bytes wait in the client's socket, not in memory).
pub fn max_concurrent_imports() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().max(2))
}

/// The turns of [`max_concurrent_imports`].
static IMPORT_SLOTS: std::sync::LazyLock<tokio::sync::Semaphore> =
    std::sync::LazyLock::new(|| tokio::sync::Semaphore::new(max_concurrent_imports()));

/// What the user said about an import.
#[derive(Debug, Clone)]
pub struct ImportRequest {
    pub format: Format,
    /// Run name; default: from the content (ab: host and path), else the file name.
    pub name: Option<String>,
    /// Scenario; default: the same as the default name.
    pub scenario: Option<String>,
    pub tags: Vec<(String, String)>,
    /// Name of the input (file name), used in errors and as the run's source.
    pub source: String,
    /// Largest accepted input, bytes.
    pub max_bytes: u64,
    /// What every sample and label is held to (`[limits]` in harrier.toml).
    pub limits: RunLimits,
    /// Replace the aggregates of this existing run (e.g. a live run's streamed figures)
    /// with the file's exact ones, keeping its name, scenario, tags and notes.
    pub replace: Option<i64>,
}

/// One stored run, as reported back to the importer.
#[derive(Debug, Clone, Serialize)]
pub struct ImportedRun {
    pub id: i64,
    pub name: String,
    pub tool: String,
    /// Console page of the run.
    pub url: String,
    /// Samples in the run total (for summary-only runs: requests the tool reported).
    pub samples: u64,
    pub rejected_rows: u64,
    pub summary_only: bool,
}

/// Called with (bytes read, bytes in total if known) while an import runs.
pub type ProgressFn = Arc<dyn Fn(u64, Option<u64>) + Send + Sync>;

/// Where progress goes: the live hub (server) and/or a callback (CLI).
#[derive(Clone, Default)]
pub struct Progress {
    pub hub: Option<Hub>,
    pub callback: Option<ProgressFn>,
}

/// Counts bytes read and refuses to read past a limit.
/// Why the input itself (not its content) failed: a read error of the source (an upload
/// that broke off, a disk error) or the size limit. Parsers keep what they read before a
/// read error; an import whose *source* failed must store nothing, so this is checked
/// after parsing.
#[derive(Debug, Clone)]
enum SourceFailure {
    TooLarge(u64),
    Read(String),
}

/// Counts bytes read, refuses to read past a limit, and remembers a source failure.
struct CountingReader<R> {
    inner: R,
    read: Arc<AtomicU64>,
    max: u64,
    failure: Arc<std::sync::Mutex<Option<SourceFailure>>>,
}

impl<R: Read> CountingReader<R> {
    fn fail(&self, failure: SourceFailure) -> std::io::Error {
        let message = match &failure {
            SourceFailure::TooLarge(max) => {
                format!("input larger than the import limit of {max} bytes")
            }
            SourceFailure::Read(e) => e.clone(),
        };
        if let Ok(mut slot) = self.failure.lock() {
            slot.get_or_insert(failure);
        }
        std::io::Error::other(message)
    }
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = match self.inner.read(buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => return Err(e),
            Err(e) => return Err(self.fail(SourceFailure::Read(e.to_string()))),
        };
        let total = self.read.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
        if total > self.max {
            return Err(self.fail(SourceFailure::TooLarge(self.max)));
        }
        Ok(n)
    }
}

fn file_stem(source: &str) -> String {
    let base = source.rsplit(['/', '\\']).next().unwrap_or(source);
    let base = base.strip_suffix(".gz").unwrap_or(base);
    match base.rsplit_once('.') {
        Some((stem, _)) if !stem.is_empty() => stem.to_string(),
        _ => base.to_string(),
    }
}

/// Imports from a synchronous reader (a file). `bytes_total` is the input size if known.
pub async fn import_reader<R: Read + Send + 'static>(
    store: &Store,
    progress: &Progress,
    req: ImportRequest,
    reader: R,
    bytes_total: Option<u64>,
) -> Result<Vec<ImportedRun>> {
    let import_id = format!(
        "imp-{}-{}",
        crate::now_ms(),
        std::process::id() ^ rand_u32()
    );
    // Held until the runs are stored (or refused); never closed, so acquiring cannot fail.
    let _turn = IMPORT_SLOTS
        .acquire()
        .await
        .map_err(|_| Error::Internal("the import queue is closed".to_string()))?;
    let read = Arc::new(AtomicU64::new(0));
    let failure = Arc::new(std::sync::Mutex::new(None));
    let counting = CountingReader {
        inner: reader,
        read: read.clone(),
        max: req.max_bytes,
        failure: failure.clone(),
    };
    let (format, source) = (req.format, req.source.clone());
    // The byte limit counts decompressed bytes too (a gzip bomb is refused).
    let limits = RunLimits {
        max_input_bytes: req.max_bytes,
        ..req.limits
    };
    let parse = tokio::task::spawn_blocking(move || {
        ingest::parse_with(
            BufReader::with_capacity(READ_BUFFER, counting),
            format,
            &source,
            &limits,
        )
    });

    let ticker = {
        let (progress, read, import_id, source) = (
            progress.clone(),
            read.clone(),
            import_id.clone(),
            req.source.clone(),
        );
        tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(
                tokio::time::Instant::now() + PROGRESS_EVERY,
                PROGRESS_EVERY,
            );
            loop {
                tick.tick().await;
                let bytes_read = read.load(Ordering::Relaxed);
                if let Some(hub) = &progress.hub {
                    hub.publish(&Event::ImportProgress {
                        import_id: import_id.clone(),
                        source: source.clone(),
                        bytes_read,
                        bytes_total,
                    });
                }
                if let Some(cb) = &progress.callback {
                    cb(bytes_read, bytes_total);
                }
            }
        })
    };
    let parsed = parse.await;
    ticker.abort();
    let source_failure = failure.lock().ok().and_then(|f| f.clone());
    let outcome = match (source_failure, parsed) {
        (Some(SourceFailure::TooLarge(max)), _) => Err(Error::TooLarge(format!(
            "{}: larger than the import limit of {max} bytes; nothing was stored (raise max_import_bytes in harrier.toml)",
            req.source
        ))),
        (Some(SourceFailure::Read(e)), _) => Err(Error::BadRequest(format!(
            "{}: reading the input failed ({e}); nothing was stored",
            req.source
        ))),
        (None, parsed) => match parsed {
            Ok(Ok(runs)) => store_runs(store, &req, runs).await,
            Ok(Err(e)) => Err(Error::from(e)),
            Err(join) => Err(Error::Internal(format!(
                "import of {} stopped: {join}",
                req.source
            ))),
        },
    };
    if let Some(hub) = &progress.hub {
        if let Ok(runs) = &outcome {
            for run in runs {
                if let Ok(Some(item)) = crate::views::runs::run_list_item(store, run.id).await {
                    hub.publish(&Event::RunImported { run: item });
                }
            }
        }
        match &outcome {
            Ok(runs) => hub.publish(&Event::ImportDone {
                import_id,
                source: req.source.clone(),
                run_ids: runs.iter().map(|r| r.id).collect(),
            }),
            Err(e) => hub.publish(&Event::ImportFailed {
                import_id,
                source: req.source.clone(),
                error: e.to_string(),
            }),
        }
    }
    outcome
}

/// Imports from an async stream (an HTTP body or upload field).
pub async fn import_async<R: AsyncRead + Send + Unpin + 'static>(
    store: &Store,
    progress: &Progress,
    req: ImportRequest,
    reader: R,
    bytes_total: Option<u64>,
) -> Result<Vec<ImportedRun>> {
    import_reader(store, progress, req, SyncIoBridge::new(reader), bytes_total).await
}

async fn store_runs(
    store: &Store,
    req: &ImportRequest,
    runs: Vec<ingest::ParsedRun>,
) -> Result<Vec<ImportedRun>> {
    if runs.is_empty() {
        return Err(Error::BadRequest(format!(
            "{}: no run found in the input",
            req.source
        )));
    }
    check_names(req)?;
    if let Some(id) = req.replace {
        return replace_run(store, req, id, runs).await;
    }
    let now = crate::now_ms();
    let several = runs.len() > 1;
    // A loop against several targets (an ab `nohup.out` over two hosts): with one
    // `--scenario`, each target gets its own scenario, so trends compare like with like.
    let targets: std::collections::BTreeSet<&str> =
        runs.iter().filter_map(|r| r.name_hint.as_deref()).collect();
    let per_target = targets.len() > 1;
    let stem = file_stem(&req.source);
    let new_runs: Vec<NewRun> = runs
        .iter()
        .map(|run| {
            let content_name = run.name_hint.clone().unwrap_or_else(|| stem.clone());
            let name = match (&req.name, several) {
                (Some(name), true) => format!("{name} · {content_name}"),
                (Some(name), false) => name.clone(),
                (None, _) => content_name.clone(),
            };
            let scenario = match &req.scenario {
                Some(s) if per_target && run.name_hint.is_some() => {
                    format!("{s} · {content_name}")
                }
                Some(s) => s.clone(),
                None => content_name,
            };
            // Names made from the file's content are cut to the limit, not refused.
            let cut = |s: &str| truncate_chars(s, MAX_NAME_CHARS).into_owned();
            NewRun {
                name: cut(&name),
                scenario: Some(cut(&scenario)),
                tool: run.tool.clone(),
                source: Some(req.source.clone()),
                tags: req.tags.clone(),
                imported_at_ms: now,
            }
        })
        .collect();
    let pairs: Vec<(NewRun, &RunData)> = new_runs
        .iter()
        .cloned()
        .zip(runs.iter().map(|r| &r.data))
        .collect();
    let ids = insert_runs(store, &pairs).await?;
    keep_capacities(store, &ids).await;

    let mut out = Vec::with_capacity(ids.len());
    for ((id, new), run) in ids.into_iter().zip(new_runs).zip(&runs) {
        metrics::counter!("harrier_runs_imported_total").increment(1);
        metrics::counter!("harrier_samples_imported_total").increment(run.data.overall.count);
        metrics::counter!("harrier_rejected_rows_total").increment(run.data.rejected_rows);
        out.push(ImportedRun {
            id,
            name: new.name,
            tool: run.tool.clone(),
            url: crate::views::runs::run_url(id),
            samples: run.data.overall.count,
            rejected_rows: run.data.rejected_rows,
            summary_only: run.data.summary_only,
        });
    }
    Ok(out)
}

/// Refuses a run name, scenario or tag longer than [`MAX_NAME_CHARS`] given by the caller.
/// Stores runs in one transaction, each with its bootstrap draws (computed here, before
/// the transaction: [`stored::precompute`]); the new ids in order.
pub async fn insert_runs(
    store: &Store,
    runs: &[(NewRun, &RunData)],
) -> crate::store::Result<Vec<i64>> {
    let with_draws: Vec<(NewRun, &RunData, stored::RunBlobs)> = runs
        .iter()
        .map(|(run, data)| {
            (
                run.clone(),
                *data,
                stored::precompute(data, DEFAULT_RESAMPLES),
            )
        })
        .collect();
    store.insert_runs(&with_draws).await
}

/// Stores one run with its bootstrap draws (see [`insert_runs`]); its id.
pub async fn insert_run(store: &Store, run: &NewRun, data: &RunData) -> crate::store::Result<i64> {
    Ok(insert_runs(store, &[(run.clone(), data)]).await?[0])
}

fn check_names(req: &ImportRequest) -> Result<()> {
    let given = [
        ("name", req.name.as_deref()),
        ("scenario", req.scenario.as_deref()),
    ];
    for (what, value) in given {
        if let Some(v) = value {
            check_length(what, v, MAX_NAME_CHARS).map_err(Error::BadRequest)?;
        }
    }
    for (k, v) in &req.tags {
        check_length("a tag key", k, MAX_NAME_CHARS).map_err(Error::BadRequest)?;
        check_length(&format!("tag {k:?}"), v, MAX_NAME_CHARS).map_err(Error::BadRequest)?;
    }
    Ok(())
}

/// Computes and keeps the capacity of each new run, so that the runs list can show it
/// without reading buckets. A failure is logged, not returned: the runs are stored, and the
/// capacity is computed again when first asked for.
async fn keep_capacities(store: &Store, ids: &[i64]) {
    for &id in ids {
        let run = match store.get_run(id).await {
            Ok(Some(run)) => run,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!(run = id, error = %e, "could not read the run back to keep its capacity");
                continue;
            }
        };
        if let Err(e) = crate::views::runs::run_capacity(store, &run).await {
            tracing::warn!(run = id, error = %e, "could not compute the run's capacity");
        }
    }
}

async fn replace_run(
    store: &Store,
    req: &ImportRequest,
    id: i64,
    mut runs: Vec<ingest::ParsedRun>,
) -> Result<Vec<ImportedRun>> {
    if runs.len() != 1 {
        return Err(Error::BadRequest(format!(
            "{}: holds {} runs; replace needs a file with exactly one",
            req.source,
            runs.len()
        )));
    }
    let run = runs.remove(0);
    let Some(existing) = store.get_run(id).await? else {
        return Err(Error::NotFound(format!("run {id}")));
    };
    if existing.status == "live" {
        return Err(Error::BadRequest(format!(
            "run {id} is still live; end it first (POST /api/v1/runs/{id}/end)"
        )));
    }
    let draws = stored::precompute(&run.data, DEFAULT_RESAMPLES);
    store
        .replace_run_data(
            id,
            &run.data,
            &draws,
            "complete",
            Some((&run.tool, &req.source)),
        )
        .await?;
    metrics::counter!("harrier_samples_imported_total").increment(run.data.overall.count);
    metrics::counter!("harrier_rejected_rows_total").increment(run.data.rejected_rows);
    Ok(vec![ImportedRun {
        id,
        name: existing.name,
        tool: run.tool,
        url: crate::views::runs::run_url(id),
        samples: run.data.overall.count,
        rejected_rows: run.data.rejected_rows,
        summary_only: run.data.summary_only,
    }])
}

/// A little entropy for import ids (not security-relevant).
fn rand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(crate::now_ms() as u64);
    h.finish() as u32
}

/// Which of `names` (file names given together, in order) are the files of one Locust
/// `--csv` run: two or more sharing a prefix (`x_stats.csv`, `x_stats_history.csv`,
/// `x_failures.csv`, `x_exceptions.csv`), when the format is `auto` or `locust`. Returns
/// the sets (prefix, indexes into `names`) and the indexes of every other file.
pub fn locust_sets(names: &[String], format: Format) -> (Vec<(String, Vec<usize>)>, Vec<usize>) {
    if !matches!(format, Format::Auto | Format::Locust) {
        return (Vec::new(), (0..names.len()).collect());
    }
    let mut sets: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, n) in names.iter().enumerate() {
        if let Some((prefix, _)) = ingest::locust::csv_set_part(n) {
            match sets.iter_mut().find(|(p, _)| *p == prefix) {
                Some((_, v)) => v.push(i),
                None => sets.push((prefix, vec![i])),
            }
        }
    }
    sets.retain(|(_, v)| v.len() > 1);
    let rest: Vec<usize> = (0..names.len())
        .filter(|i| !sets.iter().any(|(_, v)| v.contains(i)))
        .collect();
    (sets, rest)
}

/// Opens an [`InputFile`]: its reader and its length when known.
type Opener = Box<dyn FnOnce() -> std::io::Result<(Box<dyn Read + Send>, Option<u64>)> + Send>;

/// One input of an import of several files: its name (a file name: the run's source, and
/// how Locust sets are told apart) and how to open it.
pub struct InputFile {
    pub source: String,
    open: Opener,
}

impl InputFile {
    /// A file already in memory (an upload read whole).
    pub fn bytes(source: String, bytes: Vec<u8>) -> InputFile {
        InputFile {
            source,
            open: Box::new(move || {
                let total = bytes.len() as u64;
                Ok((Box::new(std::io::Cursor::new(bytes)) as _, Some(total)))
            }),
        }
    }

    /// A file on disk, opened when its turn comes; `-` is standard input.
    pub fn path(source: String, path: std::path::PathBuf) -> InputFile {
        InputFile {
            source,
            open: Box::new(move || {
                if path.as_os_str() == "-" {
                    return Ok((Box::new(std::io::stdin()) as _, None));
                }
                let file = std::fs::File::open(&path).map_err(|e| {
                    std::io::Error::new(e.kind(), format!("cannot open {}: {e}", path.display()))
                })?;
                let total = file.metadata().ok().map(|m| m.len());
                Ok((Box::new(file) as _, total))
            }),
        }
    }

    fn open(self) -> Result<(Box<dyn Read + Send>, Option<u64>)> {
        (self.open)().map_err(|e| Error::BadRequest(e.to_string()))
    }

    /// The whole file, at most `max_bytes` (a Locust set's files are merged in memory).
    fn read_whole(self, max_bytes: u64) -> Result<(String, Vec<u8>)> {
        let source = self.source.clone();
        let (reader, _) = self.open()?;
        let mut bytes = Vec::new();
        reader
            .take(max_bytes.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| Error::BadRequest(format!("{source}: {e}")))?;
        if bytes.len() as u64 > max_bytes {
            return Err(Error::TooLarge(format!(
                "{source}: the files of one Locust --csv run are read whole, at most {max_bytes} bytes together (limits.max_document_bytes, or max_import_bytes when lower, in harrier.toml); nothing was stored"
            )));
        }
        Ok((source, bytes))
    }
}

/// The import of several files given together, as one plan for every caller (the API's
/// multipart upload, `harrier import` on the command line): the files of each Locust
/// `--csv` run (see [`locust_sets`]) make ONE run, read whole; every other file is streamed
/// into runs of its own; in the order the files came (a set where its first file was).
/// `request(source)` gives each import's options — `source` is the file's name, or
/// `PREFIX_*.csv` for a Locust set. Returns each import's source and result, in order; with
/// `keep_going` a failed import is reported and the others go on, else it is the last. A
/// Locust set with `replace` set is an error (`replace` takes one run's file).
pub async fn import_files(
    store: &Store,
    progress: &(dyn Fn(&str) -> Progress + Sync),
    files: Vec<InputFile>,
    format: Format,
    request: &(dyn Fn(&str) -> Result<ImportRequest> + Sync),
    keep_going: bool,
) -> Vec<(String, Result<Vec<ImportedRun>>)> {
    let names: Vec<String> = files.iter().map(|f| f.source.clone()).collect();
    let (sets, rest) = locust_sets(&names, format);
    // Each job by the index of its first file, so jobs keep the files' order.
    let mut jobs: Vec<(usize, Option<String>, Vec<usize>)> = sets
        .into_iter()
        .map(|(prefix, idx)| (idx[0], Some(prefix), idx))
        .chain(rest.into_iter().map(|i| (i, None, vec![i])))
        .collect();
    jobs.sort_by_key(|j| j.0);
    let mut slots: Vec<Option<InputFile>> = files.into_iter().map(Some).collect();
    let mut out = Vec::new();
    for (_, prefix, idx) in jobs {
        let inputs: Vec<InputFile> = idx.iter().filter_map(|&i| slots[i].take()).collect();
        let (source, result) = match prefix {
            Some(prefix) => {
                let source = format!("{prefix}_*.csv");
                let result =
                    import_set(store, &progress(&source), request(&source), &prefix, inputs).await;
                (source, result)
            }
            None => {
                let input = inputs.into_iter().next().expect("one file per job");
                let source = input.source.clone();
                let result = match (request(&source), input.open()) {
                    (Ok(req), Ok((reader, total))) => {
                        import_reader(store, &progress(&source), req, reader, total).await
                    }
                    (Err(e), _) | (_, Err(e)) => Err(e),
                };
                (source, result)
            }
        };
        let failed = result.is_err();
        out.push((source, result));
        if failed && !keep_going {
            break;
        }
    }
    out
}

/// A Locust set of [`import_files`]: read whole (together within `req.max_bytes`), one run.
async fn import_set(
    store: &Store,
    progress: &Progress,
    req: Result<ImportRequest>,
    prefix: &str,
    inputs: Vec<InputFile>,
) -> Result<Vec<ImportedRun>> {
    let req = req?;
    if req.replace.is_some() {
        return Err(Error::BadRequest(
            "replace takes one file, not the files of a Locust run".into(),
        ));
    }
    // Read whole: together within the import limit and the limit of a document held whole.
    let mut left = req.max_bytes.min(req.limits.max_document_bytes);
    let mut files = Vec::new();
    for input in inputs {
        let (source, bytes) = input.read_whole(left)?;
        left = left.saturating_sub(bytes.len() as u64);
        files.push((source, bytes));
    }
    import_locust_set(store, progress, req, prefix, files).await
}

/// Imports the files of one Locust `--csv` run (`files`: name and content, see
/// [`locust_sets`]) as ONE run ([`ingest::locust::merge_set`]): all of them read or
/// nothing stored; a file that does not read is named in the error. `req.source` is
/// ignored: the run's source lists the files.
pub async fn import_locust_set(
    store: &Store,
    progress: &Progress,
    mut req: ImportRequest,
    prefix: &str,
    files: Vec<(String, Vec<u8>)>,
) -> Result<Vec<ImportedRun>> {
    use crate::sources::ingest::locust::{self, CsvPart, CsvSet};
    let _turn = IMPORT_SLOTS
        .acquire()
        .await
        .map_err(|_| Error::Internal("the import queue is closed".to_string()))?;
    let total: u64 = files.iter().map(|(_, b)| b.len() as u64).sum();
    if total > req.limits.max_document_bytes {
        return Err(Error::TooLarge(format!(
            "{prefix}_*.csv: the files of a Locust --csv run are read whole, together at most {} bytes (limits.max_document_bytes in harrier.toml); nothing was stored",
            req.limits.max_document_bytes
        )));
    }
    if total > req.max_bytes {
        return Err(Error::TooLarge(format!(
            "{prefix}_*.csv: larger than the import limit of {} bytes together; nothing was stored (raise max_import_bytes in harrier.toml)",
            req.max_bytes
        )));
    }
    req.source = files
        .iter()
        .map(|(n, _)| n.as_str())
        .collect::<Vec<_>>()
        .join(" + ");
    let source = req.source.clone();
    let req_limits = req.limits;
    let prefix_owned = prefix.to_string();
    let merged = tokio::task::spawn_blocking(move || -> Result<ingest::ParsedRun> {
        let mut set = CsvSet::default();
        for (name, bytes) in files {
            let Some((_, part)) = locust::csv_set_part(&name) else {
                return Err(Error::BadRequest(format!(
                    "{name}: not a file of a Locust --csv run"
                )));
            };
            let twice = || {
                Error::BadRequest(format!(
                    "{name}: a second {part:?} file for the Locust run {prefix_owned}; give each file once"
                ))
            };
            match part {
                CsvPart::Stats | CsvPart::History => {
                    let mut runs =
                        locust::parse_with(std::io::Cursor::new(bytes), &name, &req_limits)?;
                    let run = runs.pop().ok_or_else(|| {
                        Error::BadRequest(format!("{name}: no run found in the input"))
                    })?;
                    let slot = if part == CsvPart::Stats {
                        &mut set.stats
                    } else {
                        &mut set.history
                    };
                    if slot.replace(run).is_some() {
                        return Err(twice());
                    }
                }
                CsvPart::Failures => {
                    let f = locust::parse_failures(bytes.as_slice(), &name)?;
                    if set.failures.replace(f).is_some() {
                        return Err(twice());
                    }
                }
                CsvPart::Exceptions => {
                    let e = locust::parse_exceptions(bytes.as_slice(), &name)?;
                    if set.exceptions.replace(e).is_some() {
                        return Err(twice());
                    }
                }
            }
            set.inputs.push(name);
        }
        let mut run = locust::merge_set(set, &format!("{prefix_owned}_*.csv"))?;
        run.name_hint = Some(prefix_owned);
        Ok(run)
    })
    .await
    .map_err(|e| Error::Internal(format!("import of {source} stopped: {e}")))?;
    let outcome = match merged {
        Ok(run) => store_runs(store, &req, vec![run]).await,
        Err(e) => Err(e),
    };
    if let Some(hub) = &progress.hub
        && let Ok(runs) = &outcome
    {
        for run in runs {
            if let Ok(Some(item)) = crate::views::runs::run_list_item(store, run.id).await {
                hub.publish(&Event::RunImported { run: item });
            }
        }
    }
    outcome
}
