//! This workspace's own plugin crates (the example and the test fixtures), built on demand for
//! its tests and tools. Not needed to host plugins.
//!
//! Tests cannot rely on `cargo test` having built a `cdylib`, so [`built`] runs
//! `cargo build` for all of them once per process into `target/plugins` (a target directory of
//! its own, so it never waits for the lock of the build that runs the tests), in the dev
//! profile, or in release when this crate itself was optimised (benchmarks). Cargo's own lock
//! serialises concurrent test processes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// A plugin crate of this workspace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkspacePlugin {
    /// Its cargo package name.
    pub package: &'static str,
    /// Its library's crate name (the file is `lib<library>.so` on Linux).
    pub library: &'static str,
}

/// The example plugin, `examples/plugins/pairwise-xor`.
pub const PAIRWISE_XOR: WorkspacePlugin =
    WorkspacePlugin { package: "pairwise-xor-plugin", library: "pairwise_xor" };

/// README's plugin example ("Adding a scheme"), `examples/plugins/my-scheme`.
pub const MY_SCHEME: WorkspacePlugin = WorkspacePlugin { package: "my-scheme-plugin", library: "my_scheme" };

/// Test fixture: schemes that panic, return undecodable or malformed plans, or refuse.
pub const MISBEHAVING: WorkspacePlugin =
    WorkspacePlugin { package: "fixture-misbehaving-plugin", library: "fixture_misbehaving_plugin" };

/// Test fixture: a plugin built for a future ABI version.
pub const FUTURE_ABI: WorkspacePlugin =
    WorkspacePlugin { package: "fixture-future-abi-plugin", library: "fixture_future_abi_plugin" };

/// Test fixture: a dynamic library that is not a plugin at all.
pub const NOT_A_PLUGIN: WorkspacePlugin =
    WorkspacePlugin { package: "fixture-not-a-plugin", library: "fixture_not_a_plugin" };

/// Every plugin crate of the workspace.
pub const ALL: [WorkspacePlugin; 5] = [PAIRWISE_XOR, MY_SCHEME, MISBEHAVING, FUTURE_ABI, NOT_A_PLUGIN];

/// The file name of library `library` on this platform (`libx.so`, `libx.dylib`, `x.dll`).
pub fn library_file_name(library: &str) -> String {
    format!("{}{library}{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX)
}

/// The workspace's root folder.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The path of `plugin`'s library, after building every plugin crate of the workspace (once
/// per process). The error is cargo's output, for a test to show.
pub fn built(plugin: WorkspacePlugin) -> Result<PathBuf, String> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let dir = BUILT.get_or_init(build_all).clone()?;
    Ok(dir.join(library_file_name(plugin.library)))
}

/// Builds every plugin crate; returns the folder the libraries are in.
fn build_all() -> Result<PathBuf, String> {
    let root = workspace_root();
    let target_dir = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir).join("plugins"),
        None => root.join("target/plugins"),
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(&cargo);
    command.current_dir(&root).args(["build", "--quiet", "--target-dir"]).arg(&target_dir);
    for plugin in ALL {
        command.args(["-p", plugin.package]);
    }
    let release = !cfg!(debug_assertions);
    if release {
        command.arg("--release");
    }
    let output = command.output().map_err(|e| format!("cannot run {}: {e}", cargo.to_string_lossy()))?;
    if !output.status.success() {
        return Err(format!(
            "building the workspace's plugins failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(target_dir.join(if release { "release" } else { "debug" }))
}
