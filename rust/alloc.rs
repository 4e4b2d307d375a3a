//! The allocator: mimalloc as the global allocator (feature `mimalloc`), tuned for batches of
//! large, short-lived column buffers.
//!
//! Output columns are large, short-lived buffers (a batch lives until Spark has copied it
//! into the JVM); mimalloc keeps freed pages for the next batch where the system allocator
//! returns them to the OS and faults them in again (measured: page faults were a quarter of
//! decode time).

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Tunes mimalloc for batches of large, short-lived column buffers:
/// - freed pages are kept for a second before going back to the OS (the default, 10 ms, is
///   shorter than decoding one batch), so the next batch reuses warm pages instead of
///   faulting in zeroed ones;
/// - segments are committed as they are used, not eagerly: with transparent huge pages,
///   eager commits zeroed whole segments up front, and the first batches of a process ran
///   up to 8 times slower than the rest.
#[cfg(feature = "mimalloc")]
pub(crate) fn tune_allocator() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // Indexes in mimalloc 2's `mi_option_e` (libmimalloc-sys names no constants for them).
    const MI_OPTION_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 3;
    const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    ONCE.call_once(|| {
        // SAFETY: setting documented options; mimalloc reads options atomically, and both
        // apply to the segments it allocates from now on.
        unsafe {
            libmimalloc_sys::mi_option_set(MI_OPTION_EAGER_COMMIT, 0);
            libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 1000);
        }
    });
}

/// Without mimalloc (the fuzz targets), the system allocator needs no tuning.
#[cfg(not(feature = "mimalloc"))]
pub(crate) fn tune_allocator() {}
