//! [`PluginFunctions`]: safe calls into a loaded plugin's function table, following the buffer
//! protocol of [`ubershuffle_plugin_api::abi`].

// Calling foreign functions and reading the buffers they lend us. Each `unsafe` block says
// what makes it sound; all of them rest on the table coming from a library whose ABI version
// was checked (see `library.rs`) and which is never unloaded.
#![allow(unsafe_code)]

use std::fmt;

use ubershuffle_plugin_api::abi::{ByteBuffer, PluginTable, Status};

/// The longest message from a plugin kept in an error (longer ones are cut).
const MAX_MESSAGE_CHARS: usize = 2000;

/// A plugin's function table, valid for the rest of the process.
#[derive(Clone, Copy)]
pub(crate) struct PluginFunctions {
    table: &'static PluginTable,
}

/// A call the plugin answered with a status other than `Ok`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CallFailure {
    /// The status, or `None` for a code this ABI does not define.
    pub status: Option<Status>,
    /// The plugin's message on one line.
    pub message: String,
}

impl fmt::Display for CallFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.status {
            // The plugin's panic message already reads "panicked at FILE:LINE:COL: ...".
            Some(Status::Panicked) => write!(f, "{}", self.message),
            Some(Status::BadRequest) => write!(f, "it refused the request: {}", self.message),
            Some(Status::PlanFailed | Status::Ok) => write!(f, "{}", self.message),
            None => write!(f, "it returned a status code this host does not know: {}", self.message),
        }
    }
}

impl PluginFunctions {
    /// Wraps a table that a plugin of the right ABI version returned and that stays valid for
    /// the process (its library is never unloaded).
    pub(crate) fn new(table: &'static PluginTable) -> Self {
        PluginFunctions { table }
    }

    /// How many schemes the plugin exports.
    pub(crate) fn scheme_count(self) -> Result<u32, CallFailure> {
        let mut count = 0u32;
        // SAFETY: `count` and the out-buffer are valid for writes during the call.
        self.call(|out| unsafe { (self.table.scheme_count)(&mut count, out) })?;
        Ok(count)
    }

    /// Scheme `index`'s name.
    pub(crate) fn scheme_name(self, index: u32) -> Result<String, CallFailure> {
        // SAFETY: the out-buffer is valid for writes during the call.
        text(self.call(|out| unsafe { (self.table.scheme_name)(index, out) })?, "scheme name")
    }

    /// Scheme `index`'s description.
    pub(crate) fn scheme_description(self, index: u32) -> Result<String, CallFailure> {
        // SAFETY: the out-buffer is valid for writes during the call.
        text(self.call(|out| unsafe { (self.table.scheme_description)(index, out) })?, "description")
    }

    /// Plans `instance` (wire bytes) with scheme `index` and `seed`; returns the plan's bytes.
    pub(crate) fn plan(self, index: u32, instance: &[u8], seed: u64) -> Result<Vec<u8>, CallFailure> {
        // SAFETY: `instance` is readable for its length and the out-buffer writable, for the call.
        self.call(|out| unsafe { (self.table.plan)(index, instance.as_ptr(), instance.len(), seed, out) })
    }

    /// Runs `f` with a fresh out-buffer, copies what the plugin wrote there, gives the buffer
    /// back to the plugin, and turns the status into a result.
    fn call(self, f: impl FnOnce(*mut ByteBuffer) -> i32) -> Result<Vec<u8>, CallFailure> {
        let mut out = ByteBuffer::EMPTY;
        let code = f(&mut out);
        let bytes = self.take(out);
        match Status::from_code(code) {
            Some(Status::Ok) => Ok(bytes),
            status => Err(CallFailure { status, message: one_line(&bytes) }),
        }
    }

    /// Copies a buffer the plugin lent and frees it through the plugin.
    fn take(self, buffer: ByteBuffer) -> Vec<u8> {
        if buffer.ptr.is_null() {
            return Vec::new();
        }
        // SAFETY: by the ABI, a non-null buffer is `len` initialised bytes the plugin allocated
        // and lends us until we hand it to `free_buffer`, which we do next, once.
        let bytes = unsafe { std::slice::from_raw_parts(buffer.ptr, buffer.len) }.to_vec();
        // SAFETY: the buffer is the plugin's own, returned exactly once.
        unsafe { (self.table.free_buffer)(buffer) };
        bytes
    }
}

/// The plugin's bytes as text, or a failure saying they are not UTF-8.
fn text(bytes: Vec<u8>, what: &str) -> Result<String, CallFailure> {
    String::from_utf8(bytes).map_err(|_| CallFailure {
        status: Some(Status::Ok),
        message: format!("it returned a {what} that is not UTF-8"),
    })
}

/// A plugin's message as one line of at most [`MAX_MESSAGE_CHARS`] characters.
fn one_line(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes).replace(['\n', '\r'], " ");
    match text.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None if text.is_empty() => "(no message)".to_string(),
        None => text,
    }
}
