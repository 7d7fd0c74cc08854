//! What the fair Cassandra lock's command-line tools (`lock-bench`, `lock-jepsen`) share:
//!
//! * [`duration`]: durations in `humantime`'s syntax (`250us`, `1.5ms`, `2min`), refused
//!   with a message that says what is wrong and how to write one;
//! * [`default_out_dir`] and [`create_out_dir`]: where a run's files go without `--out`;
//! * [`load_average`]: how busy the machine was, for reports of timed runs;
//! * [`emit`] and [`note`]: reports on stdout (a closed pipe is no error) and progress on
//!   stderr;
//! * `testing` (feature `testing`): running a tool from a test as a person does.

pub mod duration;
#[cfg(feature = "testing")]
pub mod testing;

use std::path::{Path, PathBuf};

/// Why an output directory could not be made.
#[derive(Debug, thiserror::Error)]
#[error("cannot create the output directory {}: {source}; choose another with --out", path.display())]
pub struct OutDirError {
    /// The directory asked for.
    pub path: PathBuf,
    /// What the file system said.
    #[source]
    pub source: std::io::Error,
}

/// Where a tool called `tool` writes without `--out`: `tool` in the Cargo target directory
/// the binary runs from (so that `cargo run` writes under the ignored `target/`), else
/// `<tool>-results` in the current directory.
pub fn default_out_dir(tool: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            exe.ancestors()
                .skip(1)
                .take(3)
                .find(|dir| is_cargo_target_dir(dir))
                .map(|target| target.join(tool))
        })
        .unwrap_or_else(|| PathBuf::from(format!("{tool}-results")))
}

/// Whether `dir` is a Cargo target directory: Cargo writes `CACHEDIR.TAG` into one it
/// creates, and `.rustc_info.json` into every one it builds in (a target directory made
/// before Cargo first used it has no tag).
pub fn is_cargo_target_dir(dir: &Path) -> bool {
    dir.join("CACHEDIR.TAG").is_file() || dir.join(".rustc_info.json").is_file()
}

/// Creates the output directory: `out`, or [`default_out_dir`] of `tool` without one.
pub fn create_out_dir(out: Option<&Path>, tool: &str) -> Result<PathBuf, OutDirError> {
    let path = out.map_or_else(|| default_out_dir(tool), Path::to_path_buf);
    std::fs::create_dir_all(&path).map_err(|source| OutDirError {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// Writes `text` to stdout. A closed stdout (as in `lock-bench | head`) is not an error:
/// the rest of the output is dropped, and the tool still writes its files.
pub fn emit(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => Err(error),
        _ => Ok(()),
    }
}

/// Writes a line to stderr, ignoring failure: progress and log lines never stop a run.
pub fn note(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// The machine's load averages over 1, 5 and 15 minutes from `/proc/loadavg`, as
/// `0.52, 0.61, 0.70` (`unknown` where there is none): a busy machine explains slow runs.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(", ")
        })
        .filter(|load| !load.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_directory_is_known_by_either_of_cargos_marks() {
        let root = std::env::temp_dir().join(format!("lock-cli-support-{}", std::process::id()));
        let tagged = root.join("tagged");
        let used = root.join("used");
        let plain = root.join("plain");
        for dir in [&tagged, &used, &plain] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(tagged.join("CACHEDIR.TAG"), "Signature").unwrap();
        std::fs::write(used.join(".rustc_info.json"), "{}").unwrap();
        let verdicts = [&tagged, &used, &plain].map(|dir| is_cargo_target_dir(dir));
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(verdicts, [true, true, false]);
    }

    #[test]
    fn the_default_output_of_a_test_binary_goes_under_its_target_directory() {
        // Test binaries run from target/debug/deps, under the target directory.
        let out = default_out_dir("some-tool");
        assert_eq!(out.file_name().unwrap(), "some-tool");
        assert!(
            is_cargo_target_dir(out.parent().unwrap()),
            "{}",
            out.display()
        );
    }

    #[test]
    fn an_output_directory_that_cannot_be_made_says_which_and_what_to_do() {
        let file =
            std::env::temp_dir().join(format!("lock-cli-support-file-{}", std::process::id()));
        std::fs::write(&file, "").unwrap();
        let error = create_out_dir(Some(&file.join("below")), "some-tool").unwrap_err();
        std::fs::remove_file(&file).unwrap();
        let message = error.to_string();
        assert!(
            message.contains("below") && message.contains("--out"),
            "{message}"
        );
    }

    #[test]
    fn the_load_is_three_figures_or_unknown() {
        let load = load_average();
        assert!(load == "unknown" || load.split(", ").count() == 3, "{load}");
    }
}
