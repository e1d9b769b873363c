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
