//! Finding, or building on demand, the testkit's own server binaries for tests in other packages.
//!
//! Cargo builds a package's binaries only for that package's own tests, so a test elsewhere that
//! needs the fixture or conformance server asks for it here. This module never decides which
//! binaries exist: the public helpers in [`crate::fixture`] and [`crate::conformance`] name them.

use std::path::{Path, PathBuf};

/// The path of the testkit binary `name`, built when it is missing or older than `sources`.
///
/// The environment variable `env_override`, when set, names the binary and skips the search.
/// Otherwise the binary is looked for next to the running test executable
/// (`target/<profile>/deps/<test>` gives `target/<profile>/<name>`), and when it is absent or
/// stale `cargo build -p mcpgw-testkit --bin <name>` runs with the same profile and target
/// directory. `sources` are paths relative to this crate's manifest directory.
///
/// # Panics
///
/// When the binary can neither be found nor built: a test that needs a real server must fail
/// loudly rather than skip.
pub(crate) fn workspace_binary(name: &str, env_override: &str, sources: &[&str]) -> PathBuf {
    if let Some(path) = std::env::var_os(env_override) {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "{env_override} names `{}`, which is not a file",
            path.display()
        );
        return path;
    }
    let test_executable = std::env::current_exe()
        .unwrap_or_else(|error| panic!("cannot find the running test executable: {error}"));
    let executable_dir = test_executable.parent().unwrap_or_else(|| Path::new("."));
    let profile_dir = if executable_dir.ends_with("deps") {
        executable_dir.parent().unwrap_or(executable_dir)
    } else {
        executable_dir
    };
    let binary = profile_dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    if is_newer_than_sources(&binary, sources) {
        return binary;
    }

    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = std::process::Command::new(&cargo);
    command.args(["build", "--quiet", "-p", "mcpgw-testkit", "--bin", name]);
    match profile_dir.file_name().and_then(|name| name.to_str()) {
        Some("debug") | None => {}
        Some("release") => {
            command.arg("--release");
        }
        Some(profile) => {
            command.args(["--profile", profile]);
        }
    }
    if let Some(target_dir) = profile_dir.parent() {
        command.arg("--target-dir").arg(target_dir);
    }
    command.current_dir(env!("CARGO_MANIFEST_DIR"));
    let status = command.status().unwrap_or_else(|error| {
        panic!(
            "cannot run `{}` to build `{name}`: {error}",
            cargo.to_string_lossy()
        )
    });
    assert!(
        status.success(),
        "`cargo build -p mcpgw-testkit --bin {name}` failed ({status}); fix the build error above"
    );
    assert!(
        binary.is_file(),
        "cargo built `{name}` but it is not at `{}`; set {env_override} to its path",
        binary.display()
    );
    binary
}

/// Whether `binary` exists and is at least as new as the crate manifest and every one of
/// `sources`, so a change to a server is never tested against a stale build.
fn is_newer_than_sources(binary: &Path, sources: &[&str]) -> bool {
    let modified = |path: &Path| std::fs::metadata(path).and_then(|metadata| metadata.modified());
    let Ok(built_at) = modified(binary) else {
        return false;
    };
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::iter::once(&"Cargo.toml")
        .chain(sources)
        .all(|source| modified(&manifest_dir.join(source)).is_ok_and(|changed| changed <= built_at))
}
