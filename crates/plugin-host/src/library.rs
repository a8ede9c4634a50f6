//! [`PluginLibrary`]: loading a plugin from a path the user names, checking its ABI version,
//! and listing its schemes.

// Opening a dynamic library and looking up its entry points. Each `unsafe` block says what
// makes it sound.
#![allow(unsafe_code)]

use std::path::Path;
use std::sync::Arc;

use libloading::Library;
use ubershuffle_plugin_api::abi::{ABI_VERSION, ABI_VERSION_SYMBOL, ENTRY_SYMBOL, PluginTable};

use crate::table::PluginFunctions;
use crate::{PluginError, PluginPlanner};

/// The most schemes one plugin may export (a sanity bound on what it reports).
const MAX_SCHEMES: u32 = 10_000;

/// One scheme a plugin exports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemeInfo {
    /// Its name, as `--scheme` takes it.
    pub name: String,
    /// One line saying what it does.
    pub description: String,
}

/// A loaded plugin library: its path, its function table and the schemes it exports.
///
/// The library stays loaded for the rest of the process, whatever happens to this value:
/// unloading Rust code that may have registered thread-local destructors or a panic hook is not
/// sound, and planners built from it keep calling into it.
#[derive(Clone)]
pub struct PluginLibrary {
    path: Arc<Path>,
    functions: PluginFunctions,
    schemes: Vec<SchemeInfo>,
}

impl std::fmt::Debug for PluginLibrary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginLibrary").field("path", &self.path).field("schemes", &self.schemes).finish()
    }
}

impl PluginLibrary {
    /// Loads the plugin at `path`, checks that it speaks this host's ABI version, and lists its
    /// schemes.
    ///
    /// Loading runs the library's initialisation code, so call this only with a path the user
    /// named. A bare file name is taken relative to the current directory, never searched for
    /// in the system's library paths.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, PluginError> {
        let given = path.as_ref();
        let path: Arc<Path> = given.into();
        // An absolute path: the loader then opens exactly this file and searches nowhere else.
        let absolute = std::fs::canonicalize(given)
            .map_err(|error| PluginError::Open { path: given.to_path_buf(), error })?;
        let library = open(&absolute).map_err(|e| PluginError::NotALibrary {
            path: given.to_path_buf(),
            reason: loader_message(&e),
        })?;
        let functions = PluginFunctions::new(entry_table(library, given)?);
        let schemes = list_schemes(functions, given)?;
        Ok(PluginLibrary { path, functions, schemes })
    }

    /// The path the plugin was loaded from, as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schemes it exports, in its order.
    pub fn schemes(&self) -> &[SchemeInfo] {
        &self.schemes
    }

    /// Its scheme names, in its order.
    pub fn scheme_names(&self) -> Vec<&str> {
        self.schemes.iter().map(|s| s.name.as_str()).collect()
    }

    /// The scheme called `name`, or, when `name` is `None`, the plugin's only scheme.
    pub fn planner(&self, name: Option<&str>) -> Result<PluginPlanner, PluginError> {
        let index = match name {
            Some(name) => self.schemes.iter().position(|s| s.name == name).ok_or_else(|| {
                PluginError::UnknownScheme {
                    path: self.path.to_path_buf(),
                    scheme: name.to_string(),
                    known: self.scheme_names().iter().map(|n| n.to_string()).collect(),
                }
            })?,
            None if self.schemes.len() == 1 => 0,
            None => {
                return Err(PluginError::SchemeRequired {
                    path: self.path.to_path_buf(),
                    known: self.scheme_names().iter().map(|n| n.to_string()).collect(),
                });
            }
        };
        Ok(self.planner_at(index))
    }

    /// Every scheme it exports, as planners.
    pub fn planners(&self) -> Vec<PluginPlanner> {
        (0..self.schemes.len()).map(|i| self.planner_at(i)).collect()
    }

    fn planner_at(&self, index: usize) -> PluginPlanner {
        let info = &self.schemes[index];
        // `list_schemes` numbered them from a u32 count.
        PluginPlanner::new(self.path.clone(), self.functions, index as u32, info.clone())
    }
}

/// Opens the library at `absolute` and keeps it loaded for the rest of the process.
fn open(absolute: &Path) -> Result<&'static Library, libloading::Error> {
    // SAFETY: loading runs the library's initialisers; the user named this file as a plugin,
    // which is the trust the design asks for. Nothing else is assumed about it yet.
    let library = unsafe { Library::new(absolute) }?;
    // Never unloaded (see `PluginLibrary`): leaking the handle keeps every pointer into it valid.
    Ok(Box::leak(Box::new(library)))
}

/// The loader's error and its causes on one line (libloading keeps the system's own words,
/// such as `invalid ELF header`, in the cause).
fn loader_message(error: &libloading::Error) -> String {
    let mut message = error.to_string();
    let mut cause = std::error::Error::source(error);
    while let Some(e) = cause {
        message = format!("{message}: {e}");
        cause = e.source();
    }
    message.replace('\n', " ")
}

/// Checks the plugin's ABI version and returns its function table.
fn entry_table(library: &'static Library, path: &Path) -> Result<&'static PluginTable, PluginError> {
    let not_a_plugin = |symbol| PluginError::NotAPlugin { path: path.to_path_buf(), symbol };
    let mismatch =
        |found| PluginError::AbiMismatch { path: path.to_path_buf(), found, expected: ABI_VERSION };
    // SAFETY: every version of the ABI defines this symbol as `extern "C" fn() -> u32`.
    let version: extern "C" fn() -> u32 =
        *unsafe { library.get::<extern "C" fn() -> u32>(ABI_VERSION_SYMBOL) }
            .map_err(|_| not_a_plugin(ABI_VERSION_SYMBOL))?;
    let found = version();
    if found != ABI_VERSION {
        return Err(mismatch(found));
    }
    // SAFETY: a plugin of this ABI version defines the entry symbol with this type.
    let entry: extern "C" fn() -> *const PluginTable =
        *unsafe { library.get::<extern "C" fn() -> *const PluginTable>(ENTRY_SYMBOL) }
            .map_err(|_| not_a_plugin(ENTRY_SYMBOL))?;
    // SAFETY: the entry returns null or a pointer to a table that lives as long as the library,
    // which is never unloaded.
    let table = unsafe { entry().as_ref() }.ok_or_else(|| PluginError::Call {
        path: path.to_path_buf(),
        doing: "returning its function table".into(),
        message: "it returned a null table".into(),
    })?;
    if table.abi_version != ABI_VERSION {
        return Err(mismatch(table.abi_version));
    }
    Ok(table)
}

/// Every scheme's name and description, checked to be non-empty and distinct.
fn list_schemes(functions: PluginFunctions, path: &Path) -> Result<Vec<SchemeInfo>, PluginError> {
    let failed =
        |doing: String, message: String| PluginError::Call { path: path.to_path_buf(), doing, message };
    let count = functions.scheme_count().map_err(|e| failed("counting its schemes".into(), e.to_string()))?;
    if count == 0 {
        return Err(PluginError::NoSchemes { path: path.to_path_buf() });
    }
    if count > MAX_SCHEMES {
        return Err(failed("counting its schemes".into(), format!("it claims {count} schemes")));
    }
    let mut schemes: Vec<SchemeInfo> = Vec::new();
    for index in 0..count {
        let doing = || format!("describing its scheme number {index}");
        let name = functions.scheme_name(index).map_err(|e| failed(doing(), e.to_string()))?;
        let description = functions.scheme_description(index).map_err(|e| failed(doing(), e.to_string()))?;
        if name.is_empty() || name.chars().any(char::is_whitespace) {
            return Err(failed(doing(), format!("its name {name:?} is empty or has spaces")));
        }
        if schemes.iter().any(|s| s.name == name) {
            return Err(failed(doing(), format!("two schemes are called {name}")));
        }
        schemes.push(SchemeInfo { name, description });
    }
    Ok(schemes)
}
