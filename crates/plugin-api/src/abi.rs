//! The C ABI between the `ubershuffle` host and a plugin library: the symbols the host looks
//! up, the table of functions the plugin hands back, and what every call means.
//!
//! Only these `#[repr(C)]` types, integers and byte buffers cross the boundary; no Rust type
//! layout does, so a plugin built with another compiler release still loads. Instances and plans
//! cross as bytes in the layouts of [`crate::wire`].
//!
//! # The protocol
//!
//! 1. The host looks up [`ABI_VERSION_SYMBOL`], an `extern "C" fn() -> u32`, and refuses the
//!    library unless it returns [`ABI_VERSION`]. This symbol keeps its name in every version,
//!    so a plugin built for another version gets a clear message, not a crash.
//! 2. The host looks up [`ENTRY_SYMBOL`] (`ubershuffle_plugin_v1`: the version is part of the
//!    name), an `extern "C" fn() -> *const PluginTable`, and checks the table's `abi_version`.
//! 3. Every function of the table but `free_buffer` returns a status code ([`Status::code`])
//!    and writes a [`ByteBuffer`] the plugin allocated into its `out`: the result on
//!    [`Status::Ok`], a UTF-8 one-line message otherwise. The host copies it and hands it back
//!    to [`PluginTable::free_buffer`] exactly once (whoever allocates frees).
//! 4. The plugin catches every panic before it reaches the boundary and reports
//!    [`Status::Panicked`] with the panic's message and location.
//!
//! The host never unloads a plugin: the table and its functions stay valid for the process.

/// The version of this ABI. A change to anything in this module is a new version, with a new
/// [`ENTRY_SYMBOL`].
pub const ABI_VERSION: u32 = 1;

/// `extern "C" fn() -> u32` returning the ABI version the plugin was built for. Its name never
/// changes, so the host can name the version of any plugin it refuses.
pub const ABI_VERSION_SYMBOL: &str = "ubershuffle_plugin_abi_version";

/// `extern "C" fn() -> *const PluginTable`, the entry point of version [`ABI_VERSION`].
pub const ENTRY_SYMBOL: &str = "ubershuffle_plugin_v1";

/// What a call returned, as the `i32` that crosses the boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// The call succeeded; `out` holds its result.
    Ok,
    /// The planner returned an error; `out` holds its message.
    PlanFailed,
    /// The request was malformed (no such scheme, bytes that are not an instance); `out` holds
    /// a message.
    BadRequest,
    /// The plugin panicked; `out` holds the panic's location and message.
    Panicked,
}

impl Status {
    /// The code that crosses the boundary.
    pub const fn code(self) -> i32 {
        match self {
            Status::Ok => 0,
            Status::PlanFailed => 1,
            Status::BadRequest => 2,
            Status::Panicked => 3,
        }
    }

    /// The status of `code`, or `None` for a code this version does not define.
    pub const fn from_code(code: i32) -> Option<Status> {
        match code {
            0 => Some(Status::Ok),
            1 => Some(Status::PlanFailed),
            2 => Some(Status::BadRequest),
            3 => Some(Status::Panicked),
            _ => None,
        }
    }
}

/// Bytes allocated by the plugin and lent to the host until it calls
/// [`PluginTable::free_buffer`]. `ptr` is null only when `len` is 0.
#[repr(C)]
#[derive(Debug)]
pub struct ByteBuffer {
    /// The first byte.
    pub ptr: *mut u8,
    /// How many bytes.
    pub len: usize,
}

impl ByteBuffer {
    /// The empty buffer the host passes in before a call.
    pub const EMPTY: ByteBuffer = ByteBuffer { ptr: std::ptr::null_mut(), len: 0 };
}

/// The functions a plugin exports, returned by its [`ENTRY_SYMBOL`]. Schemes are numbered
/// `0..count` in the order the plugin lists them.
#[repr(C)]
pub struct PluginTable {
    /// [`ABI_VERSION`] of the plugin. Stays the first field in every version.
    pub abi_version: u32,
    /// Writes the number of schemes the plugin exports into `*count` (and an empty buffer, or
    /// the message of a failure, into `*out`).
    pub scheme_count: unsafe extern "C" fn(count: *mut u32, out: *mut ByteBuffer) -> i32,
    /// Writes scheme `scheme`'s name (UTF-8) into `*out`.
    pub scheme_name: unsafe extern "C" fn(scheme: u32, out: *mut ByteBuffer) -> i32,
    /// Writes scheme `scheme`'s one-line description (UTF-8) into `*out`.
    pub scheme_description: unsafe extern "C" fn(scheme: u32, out: *mut ByteBuffer) -> i32,
    /// Plans the instance in `instance[..instance_len]` ([`crate::wire::encode_instance`]'s
    /// layout) with scheme `scheme`, its random choices drawn from
    /// `ubershuffle_core::rng::seeded(seed)`, and writes the plan
    /// ([`crate::wire::encode_plan`]'s layout) into `*out`.
    pub plan: unsafe extern "C" fn(
        scheme: u32,
        instance: *const u8,
        instance_len: usize,
        seed: u64,
        out: *mut ByteBuffer,
    ) -> i32,
    /// Frees a buffer this plugin wrote into an `out`.
    pub free_buffer: unsafe extern "C" fn(buffer: ByteBuffer),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_symbol_names_the_version() {
        assert_eq!(ENTRY_SYMBOL, format!("ubershuffle_plugin_v{ABI_VERSION}"));
    }

    #[test]
    fn status_codes_round_trip() {
        for status in [Status::Ok, Status::PlanFailed, Status::BadRequest, Status::Panicked] {
            assert_eq!(Status::from_code(status.code()), Some(status));
        }
        assert_eq!(Status::from_code(7), None);
    }
}
