//! Giving memory back after a burst.
//!
//! glibc's allocator keeps what a program frees for its own reuse: after a
//! burst (64 diagnoses at once, each with its logs), the freed pages in the
//! middle of its heaps stay resident, and a daemon that peaked once keeps
//! the peak's size for good. `malloc_trim(0)` hands every whole free page of
//! every arena back to the kernel; live allocations are not touched.
//!
//! This is the workspace's only `unsafe` code: one call that takes no
//! pointer. Every other crate forbids `unsafe`.

/// Returns the allocator's free pages to the system; whether any were
/// returned. It walks and locks each arena in turn, so call it after work,
/// on a thread that may block for a few milliseconds, not on every free.
/// Elsewhere than glibc it does nothing and returns `false`: musl and the
/// other systems' allocators have no such call.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn release_free_memory() -> bool {
    // SAFETY: `malloc_trim` takes no pointer and reads none of ours; glibc
    // holds each arena's own lock while it trims it, as any allocation does.
    unsafe { libc::malloc_trim(0) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release_free_memory() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A freed burst below a live allocation is what glibc cannot return by
    /// itself; after the call the process's resident size is smaller.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn a_freed_burst_is_given_back() {
        fn rss_kib() -> u64 {
            let status = std::fs::read_to_string("/proc/self/status").expect("status");
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .expect("VmRSS")
        }
        // 64 MiB in blocks below the mmap threshold (so on the heap), each
        // written so its pages are resident, with a small live block after
        // each: freed, the big ones cannot merge into the heap's top, which
        // is all glibc gives back by itself.
        let mut burst = Vec::new();
        let mut kept = Vec::new();
        for _ in 0..1024 {
            burst.push(vec![1u8; 64 * 1024]);
            kept.push(vec![2u8; 32]);
        }
        drop(burst);
        let before = rss_kib();
        assert!(release_free_memory(), "nothing was returned");
        let after = rss_kib();
        assert!(
            after + 16 * 1024 < before,
            "resident {before} KiB before, {after} KiB after"
        );
        assert!(kept.iter().all(|k| k[0] == 2));
    }
}
