//! What the integration tests that launch confined children share.

// Test code, helpers included.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The helper binary, built once for this run into the target directory
/// this test binary was built in (`cargo build -p mevedel-sandbox`, same
/// profile; a no-op when the workspace build made it).
pub fn helper() -> &'static Path {
    static HELPER: OnceLock<PathBuf> = OnceLock::new();
    HELPER.get_or_init(|| {
        let exe = std::env::current_exe().expect("test binary path");
        // target/PROFILE/deps/TEST-HASH
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target profile directory");
        let mut build = Command::new(env!("CARGO"));
        build
            .args(["build", "--quiet", "-p", "mevedel-sandbox"])
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            build.arg("--release");
        }
        if let Some(target) = profile_dir.parent() {
            build.env("CARGO_TARGET_DIR", target);
        }
        let status = build.status().expect("run cargo build for the helper");
        assert!(
            status.success(),
            "building mevedel-sandbox failed: {status}"
        );
        let helper = profile_dir.join("mevedel-sandbox");
        assert!(helper.is_file(), "no helper at {}", helper.display());
        helper
    })
}
