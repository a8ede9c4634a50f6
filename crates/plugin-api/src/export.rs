//! The plugin's side of the ABI: the `extern "C"` functions of the [`PluginTable`] that
//! [`crate::export_planners!`] hands to the host, written once here and instantiated for the
//! plugin's planners.
//!
//! Each function runs its work under [`std::panic::catch_unwind`], so that no panic unwinds
//! across `extern "C"` (which would abort the host). While it runs, a panic hook installed in
//! the plugin keeps the panic's message and location, silently, for the error it returns.

// The FFI boundary: dereferencing the host's pointers and handing out owned buffers. Each
// `unsafe` block below states what makes it sound.
#![allow(unsafe_code)]

use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

use ubershuffle_core::{ShufflePlanner, seeded};

use crate::abi::{ABI_VERSION, ByteBuffer, PluginTable, Status};
use crate::wire::{decode_instance, encode_plan};

/// The planners a plugin exports, in the order the host numbers them.
/// [`crate::export_planners!`] implements it; a plugin author never needs to.
pub trait PlannerSet: 'static {
    /// The planners, built once on first use.
    fn planners() -> &'static [Box<dyn ShufflePlanner>];
}

/// The function table for the planners of `P`.
pub const fn table<P: PlannerSet>() -> PluginTable {
    PluginTable {
        abi_version: ABI_VERSION,
        scheme_count: scheme_count::<P>,
        scheme_name: scheme_name::<P>,
        scheme_description: scheme_description::<P>,
        plan: plan::<P>,
        free_buffer,
    }
}

/// A failed call: its status and one-line message.
type Failure = (Status, String);

unsafe extern "C" fn scheme_count<P: PlannerSet>(count: *mut u32, out: *mut ByteBuffer) -> i32 {
    // SAFETY: the host passes a valid pointer to a ByteBuffer it owns, or null (checked).
    let Some(out) = (unsafe { out.as_mut() }) else { return Status::BadRequest.code() };
    guarded(out, || {
        let n = u32::try_from(P::planners().len())
            .map_err(|_| (Status::BadRequest, "more than 2^32 schemes".to_string()))?;
        if count.is_null() {
            return Err((Status::BadRequest, "null count pointer".into()));
        }
        // SAFETY: the host passes a valid, aligned pointer to a u32 it owns (checked non-null).
        unsafe { count.write(n) };
        Ok(Vec::new())
    })
}

unsafe extern "C" fn scheme_name<P: PlannerSet>(scheme: u32, out: *mut ByteBuffer) -> i32 {
    // SAFETY: as in `scheme_count`.
    let Some(out) = (unsafe { out.as_mut() }) else { return Status::BadRequest.code() };
    guarded(out, || Ok(planner::<P>(scheme)?.name().as_bytes().to_vec()))
}

unsafe extern "C" fn scheme_description<P: PlannerSet>(scheme: u32, out: *mut ByteBuffer) -> i32 {
    // SAFETY: as in `scheme_count`.
    let Some(out) = (unsafe { out.as_mut() }) else { return Status::BadRequest.code() };
    guarded(out, || Ok(planner::<P>(scheme)?.description().as_bytes().to_vec()))
}

unsafe extern "C" fn plan<P: PlannerSet>(
    scheme: u32,
    instance: *const u8,
    instance_len: usize,
    seed: u64,
    out: *mut ByteBuffer,
) -> i32 {
    // SAFETY: as in `scheme_count`.
    let Some(out) = (unsafe { out.as_mut() }) else { return Status::BadRequest.code() };
    let bytes: &[u8] = if instance_len == 0 {
        &[]
    } else if instance.is_null() {
        return guarded(out, || Err((Status::BadRequest, "null instance pointer".into())));
    } else {
        // SAFETY: the host lends `instance_len` readable bytes at `instance` for this call.
        unsafe { std::slice::from_raw_parts(instance, instance_len) }
    };
    guarded(out, || {
        let planner = planner::<P>(scheme)?;
        let inst = decode_instance(bytes).map_err(|e| (Status::BadRequest, e.to_string()))?;
        let plan = planner.plan(&inst, &mut seeded(seed)).map_err(|e| (Status::PlanFailed, e.to_string()))?;
        encode_plan(&plan).map_err(|e| (Status::PlanFailed, e.to_string()))
    })
}

/// Frees a buffer written by one of the functions above.
///
/// # Safety
/// `buffer` must be one this plugin wrote into an `out` (or empty), freed at most once.
unsafe extern "C" fn free_buffer(buffer: ByteBuffer) {
    if !buffer.ptr.is_null() {
        // SAFETY: `buffer` came from `Box::<[u8]>::into_raw` in `into_buffer`, with this length,
        // and the caller frees it once.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(buffer.ptr, buffer.len)) });
    }
}

/// Hands `bytes` to the host; [`free_buffer`] takes them back.
fn into_buffer(bytes: Vec<u8>) -> ByteBuffer {
    let len = bytes.len();
    let ptr = Box::into_raw(bytes.into_boxed_slice()).cast::<u8>();
    ByteBuffer { ptr, len }
}

fn planner<P: PlannerSet>(scheme: u32) -> Result<&'static dyn ShufflePlanner, Failure> {
    let planners = P::planners();
    planners.get(scheme as usize).map(|p| p.as_ref()).ok_or_else(|| {
        (Status::BadRequest, format!("no scheme number {scheme}: the plugin has {}", planners.len()))
    })
}

/// Runs `work` with panics caught, writes its bytes or its message into `out`, and returns the
/// status code.
fn guarded(out: &mut ByteBuffer, work: impl FnOnce() -> Result<Vec<u8>, Failure>) -> i32 {
    install_panic_capture();
    CAPTURED_PANIC.with(|c| *c.borrow_mut() = Some(None));
    let result = panic::catch_unwind(AssertUnwindSafe(work));
    let captured = CAPTURED_PANIC.with(|c| c.borrow_mut().take()).flatten();
    let (status, bytes) = match result {
        Ok(Ok(bytes)) => (Status::Ok, bytes),
        Ok(Err((status, message))) => (status, message.into_bytes()),
        Err(payload) => {
            let message = captured.unwrap_or_else(|| format!("panicked: {}", payload_text(payload.as_ref())));
            (Status::Panicked, message.into_bytes())
        }
    };
    *out = into_buffer(bytes);
    status.code()
}

thread_local! {
    /// `Some(_)` while this thread runs a plugin call; then `Some(Some(message))` once a panic
    /// was captured.
    static CAPTURED_PANIC: RefCell<Option<Option<String>>> = const { RefCell::new(None) };
}

/// Installs, once, a panic hook that keeps the message of a panic raised inside a plugin call
/// (instead of printing it) and defers to the previous hook for every other panic.
fn install_panic_capture() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            let kept = CAPTURED_PANIC
                .try_with(|c| match c.try_borrow_mut() {
                    Ok(mut slot) if slot.is_some() => {
                        *slot = Some(Some(info.to_string().replace('\n', " ")));
                        true
                    }
                    _ => false,
                })
                .unwrap_or(false);
            if !kept {
                previous(info);
            }
        }));
    });
}

fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-text payload".to_string()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use ubershuffle_core::{Part, Plan, PlanError, SeededRng, ShuffleInstance, verify};

    use crate::wire::{decode_plan, encode_instance};

    /// Unicasts every needed point (the uncoded scheme, written here: the plugin API builds
    /// against the core alone).
    struct UncodedPlanner;
    impl ShufflePlanner for UncodedPlanner {
        fn name(&self) -> &str {
            "uncoded"
        }
        fn description(&self) -> &str {
            "every needed point on its own"
        }
        fn plan(&self, inst: &ShuffleInstance, _: &mut SeededRng) -> Result<Plan, PlanError> {
            let mut plan = Plan::new();
            for w in 0..inst.workers() {
                inst.needs(w).into_iter().for_each(|p| plan.push(&[Part::new(p, w)]));
            }
            Ok(plan)
        }
    }

    struct Panicking;
    impl ShufflePlanner for Panicking {
        fn name(&self) -> &str {
            "panicking"
        }
        fn description(&self) -> &str {
            "always panics"
        }
        fn plan(&self, _: &ShuffleInstance, _: &mut SeededRng) -> Result<Plan, PlanError> {
            panic!("deliberately, for the test")
        }
    }

    struct Set;
    impl PlannerSet for Set {
        fn planners() -> &'static [Box<dyn ShufflePlanner>] {
            static PLANNERS: std::sync::OnceLock<Vec<Box<dyn ShufflePlanner>>> = std::sync::OnceLock::new();
            PLANNERS.get_or_init(|| vec![Box::new(UncodedPlanner), Box::new(Panicking)])
        }
    }

    /// Calls a table function that writes into `out` and takes the bytes back.
    fn call(f: impl FnOnce(*mut ByteBuffer) -> i32) -> (Option<Status>, Vec<u8>) {
        let mut out = ByteBuffer::EMPTY;
        let status = Status::from_code(f(&mut out));
        let bytes = if out.ptr.is_null() {
            Vec::new()
        } else {
            unsafe { std::slice::from_raw_parts(out.ptr, out.len) }.to_vec()
        };
        unsafe { free_buffer(out) };
        (status, bytes)
    }

    #[test]
    fn the_table_lists_plans_and_reports_errors() {
        let t = table::<Set>();
        let mut count = 0;
        assert_eq!(call(|out| unsafe { (t.scheme_count)(&mut count, out) }), (Some(Status::Ok), vec![]));
        assert_eq!(count, 2);
        assert_eq!(call(|out| unsafe { (t.scheme_name)(0, out) }), (Some(Status::Ok), b"uncoded".to_vec()));
        let (status, message) = call(|out| unsafe { (t.scheme_name)(5, out) });
        assert_eq!(status, Some(Status::BadRequest));
        assert!(String::from_utf8(message).unwrap().contains("no scheme number 5"));

        let inst = ShuffleInstance::paper_example();
        let request = encode_instance(&inst);
        let (status, bytes) = call(|out| unsafe { (t.plan)(0, request.as_ptr(), request.len(), 3, out) });
        assert_eq!(status, Some(Status::Ok));
        assert!(verify(&inst, &decode_plan(&bytes).unwrap()).unwrap().is_valid());

        let (status, message) = call(|out| unsafe { (t.plan)(0, request.as_ptr(), 10, 3, out) });
        assert_eq!(status, Some(Status::BadRequest));
        assert!(String::from_utf8(message).unwrap().contains("ends early"));
    }

    #[test]
    fn a_panic_becomes_a_status_with_its_message_and_location() {
        let t = table::<Set>();
        let request = encode_instance(&ShuffleInstance::paper_example());
        let (status, message) = call(|out| unsafe { (t.plan)(1, request.as_ptr(), request.len(), 3, out) });
        assert_eq!(status, Some(Status::Panicked));
        let message = String::from_utf8(message).unwrap();
        assert!(message.contains("deliberately, for the test"), "{message}");
        assert!(message.contains("export.rs"), "{message}");
        assert!(!message.contains('\n'));
    }
}
