//! The kernel's Landlock ABI. The launcher's probe reports it and passes
//! it on (`--landlock-abi`); the helper's `--probe` asks the same way.

/// Ask the kernel for its Landlock ABI without creating a ruleset.
pub fn landlock_abi() -> Result<u32, String> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute and size 0 this syscall only reports
    // the ABI version; it creates nothing and confines nothing.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if abi >= 1 {
        return u32::try_from(abi).map_err(|_| format!("unexpected Landlock ABI {abi}"));
    }
    let err = std::io::Error::last_os_error();
    Err(match err.raw_os_error() {
        Some(libc::ENOSYS) => "the kernel has no Landlock support (needs Linux 5.13+)".into(),
        Some(libc::EOPNOTSUPP) => {
            "Landlock is built in but disabled: add 'landlock' to the kernel's lsm= boot parameter"
                .into()
        }
        _ => format!("Landlock probe failed: {err}"),
    })
}
