//! [`PluginError`]: why a plugin could not be loaded or a scheme not found in it.

use std::path::PathBuf;

/// Why a plugin library could not be loaded, or a scheme could not be taken from it. Each
/// message is one line naming the plugin's path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PluginError {
    /// The path cannot be opened (missing file, no permission).
    #[error("cannot open plugin {}: {error}", path.display())]
    Open {
        /// The path as given.
        path: PathBuf,
        /// What the file system said.
        error: std::io::Error,
    },
    /// The file is not a dynamic library this system can load.
    #[error("cannot load plugin {}: not a dynamic library this system can load ({reason})", path.display())]
    NotALibrary {
        /// The path as given.
        path: PathBuf,
        /// What the system's loader said.
        reason: String,
    },
    /// The library is not an `ubershuffle` plugin: a symbol of the ABI is missing.
    #[error(
        "{} is not an ubershuffle plugin: it exports no `{symbol}` symbol \
         (plugins export their planners with ubershuffle_plugin_api::export_planners!)",
        path.display()
    )]
    NotAPlugin {
        /// The path as given.
        path: PathBuf,
        /// The symbol that is missing.
        symbol: &'static str,
    },
    /// The plugin was built for another version of the plugin ABI.
    #[error(
        "plugin {} was built for plugin ABI version {found}, but this program speaks version {expected}: \
         rebuild it against the plugin-api crate of this release",
        path.display()
    )]
    AbiMismatch {
        /// The path as given.
        path: PathBuf,
        /// The version the plugin reports.
        found: u32,
        /// The version of this host.
        expected: u32,
    },
    /// A call into the plugin failed (it panicked, or returned an error or malformed bytes).
    #[error("plugin {} failed while {doing}: {message}", path.display())]
    Call {
        /// The path as given.
        path: PathBuf,
        /// What the host asked for (`listing its schemes`, ...).
        doing: String,
        /// What went wrong, in one line.
        message: String,
    },
    /// The plugin exports no scheme at all.
    #[error("plugin {} exports no scheme", path.display())]
    NoSchemes {
        /// The path as given.
        path: PathBuf,
    },
    /// The plugin has no scheme by the name asked for.
    #[error("plugin {} has no scheme '{scheme}'; it exports: {}", path.display(), known.join(", "))]
    UnknownScheme {
        /// The path as given.
        path: PathBuf,
        /// The name asked for.
        scheme: String,
        /// The names it exports.
        known: Vec<String>,
    },
    /// The plugin exports several schemes and none was named.
    #[error("plugin {} exports several schemes ({}): name one with --scheme", path.display(), known.join(", "))]
    SchemeRequired {
        /// The path as given.
        path: PathBuf,
        /// The names it exports, in its order.
        known: Vec<String>,
    },
}
