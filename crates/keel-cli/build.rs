//! Link flags for the `keel` binary.
//!
//! On Linux with glibc 2.36 or newer, relative relocations are packed (`DT_RELR`): the
//! dynamic loader then reads a few kilobytes instead of the binary's 1.1 MB of `.rela.dyn`
//! in every process keel's binary starts (keel itself and its sandbox's spawner), which
//! keeps that megabyte out of each one's memory and shortens start-up. Older C libraries
//! cannot load such a binary, so the flag is used only when the C library the binary will
//! run with (this machine's, for a native build) knows it.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let native = var("HOST") == var("TARGET");
    if var("CARGO_CFG_TARGET_OS") != "linux" || var("CARGO_CFG_TARGET_ENV") != "gnu" || !native {
        return;
    }
    if glibc_knows_relr() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// Whether this machine's glibc offers the `GLIBC_ABI_DT_RELR` version (2.36 and newer).
fn glibc_knows_relr() -> bool {
    const PLACES: &[&str] = &[
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib/aarch64-linux-gnu/libc.so.6",
        "/lib64/libc.so.6",
        "/usr/lib64/libc.so.6",
        "/usr/lib/libc.so.6",
        "/lib/libc.so.6",
    ];
    PLACES
        .iter()
        .map(Path::new)
        .find(|path| path.is_file())
        .and_then(|path| std::fs::read(path).ok())
        .is_some_and(|bytes| {
            let needle = b"GLIBC_ABI_DT_RELR";
            bytes.windows(needle.len()).any(|window| window == needle)
        })
}
