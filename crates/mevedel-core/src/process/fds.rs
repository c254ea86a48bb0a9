//! Descriptors this process gains from others: Emacs makes the event
//! channel's descriptor without close-on-exec, so every child (ours and
//! Emacs's own) would inherit it (hazard 2 of the module notes).

use std::collections::BTreeSet;

/// Descriptors open in this process right now.
fn open_fds() -> BTreeSet<i32> {
    let listed: BTreeSet<i32> = std::fs::read_dir("/proc/self/fd")
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    // The listing's own descriptor is closed by now; drop it.
    // SAFETY: F_GETFD only queries a descriptor number.
    listed
        .into_iter()
        .filter(|&fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } != -1)
        .collect()
}

/// Run OPEN, which opens descriptors whose numbers it does not tell,
/// and mark every descriptor it added close-on-exec.
pub fn close_on_exec_after<T>(open: impl FnOnce() -> T) -> T {
    let before = open_fds();
    let result = open();
    for fd in open_fds().difference(&before) {
        // SAFETY: sets a flag on a descriptor that now belongs to us.
        unsafe { libc::fcntl(*fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_descriptors_become_close_on_exec() {
        let file = close_on_exec_after(|| {
            // SAFETY: opens a file; the descriptor is closed below.
            unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY) }
        });
        assert!(file >= 0);
        // SAFETY: queries then closes the descriptor opened above.
        let flags = unsafe { libc::fcntl(file, libc::F_GETFD) };
        unsafe { libc::close(file) };
        assert_eq!(flags & libc::FD_CLOEXEC, libc::FD_CLOEXEC);
    }
}
