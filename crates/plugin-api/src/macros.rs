//! [`export_planners!`]: the one line that turns a crate's planners into a plugin.

/// Exports planners from a `cdylib` as an `ubershuffle` plugin (ABI version
/// [`abi::ABI_VERSION`](crate::abi::ABI_VERSION)).
///
/// Takes one or more expressions, each a value implementing
/// [`ShufflePlanner`](crate::shuffle_core::ShufflePlanner); they are built once, on the host's
/// first call. The host lists the schemes in the order given here and selects one by its
/// `name()`. Use it once per crate, at the crate root:
///
/// ```ignore
/// ubershuffle_plugin_api::export_planners!(PairwiseXor, MyOtherScheme::with_rounds(3));
/// ```
///
/// It defines the two symbols the host looks up, `ubershuffle_plugin_abi_version` and
/// `ubershuffle_plugin_v1`, and nothing else that is public.
#[macro_export]
macro_rules! export_planners {
    ($($planner:expr),+ $(,)?) => {
        #[doc(hidden)]
        pub struct __UbershufflePluginPlanners;

        impl $crate::PlannerSet for __UbershufflePluginPlanners {
            fn planners() -> &'static [::std::boxed::Box<dyn $crate::shuffle_core::ShufflePlanner>] {
                static PLANNERS: ::std::sync::OnceLock<
                    ::std::vec::Vec<::std::boxed::Box<dyn $crate::shuffle_core::ShufflePlanner>>,
                > = ::std::sync::OnceLock::new();
                PLANNERS.get_or_init(|| {
                    ::std::vec![$(
                        ::std::boxed::Box::new($planner)
                            as ::std::boxed::Box<dyn $crate::shuffle_core::ShufflePlanner>
                    ),+]
                })
            }
        }

        /// The plugin ABI version this library was built for (see `ubershuffle_plugin_api::abi`).
        // `no_mangle` exports the symbol under the name the host looks up; the name belongs to
        // this ABI, so it clashes with nothing else.
        #[allow(unsafe_code)]
        #[unsafe(no_mangle)]
        pub extern "C" fn ubershuffle_plugin_abi_version() -> u32 {
            $crate::abi::ABI_VERSION
        }

        /// The plugin's function table (see `ubershuffle_plugin_api::abi::PluginTable`).
        // As above; the name carries the ABI version (`ubershuffle_plugin_api::abi::ENTRY_SYMBOL`).
        #[allow(unsafe_code)]
        #[unsafe(no_mangle)]
        pub extern "C" fn ubershuffle_plugin_v1() -> *const $crate::abi::PluginTable {
            static TABLE: $crate::abi::PluginTable =
                $crate::export::table::<__UbershufflePluginPlanners>();
            &TABLE
        }
    };
}
