//! Link flags for the `keel` binary.
//!
//! On Linux with glibc 2.36 or newer, relative relocations are packed (`DT_RELR`): the
//! dynamic loader then reads a few kilobytes instead of the binary's 1.1 MB of `.rela.dyn`
//! in every process keel's binary starts (keel itself and its sandbox's spawner), which
//! keeps that megabyte out of each one's memory and shortens start-up. Older C libraries
//! cannot load such a binary, so the flag is used only when the C library the binary will
//! run with (this machine's, for a native build) knows it.
//!
//! In release builds for x86-64 Linux, whose default linker is LLD, the functions a headless
//! run executes are placed together, in the order `link/hot-symbols.txt` lists them
//! (`bench/hot-symbols` writes it from profiles). Spread over the whole 21 MB of code, they
//! drew about 13.6 MB of it into keel's memory (about 5.9 MB together): the kernel maps
//! each page fault's 64 KiB neighbourhood. A name the list has and the binary lacks (after a change of compiler or of a
//! dependency) is skipped, so a stale list costs memory, never correctness.

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
    let order = Path::new(&var("CARGO_MANIFEST_DIR")).join("link/hot-symbols.txt");
    println!("cargo:rerun-if-changed={}", order.display());
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    // The linker splits `-Wl,` arguments at commas.
    let usable = order.is_file() && !order.to_string_lossy().contains(',');
    if var("PROFILE") == "release" && links_with_lld(var) && usable {
        println!(
            "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}

/// Whether the binary is linked by the toolchain's own LLD: the default for x86-64 Linux
/// since Rust 1.90, unless a linker or linker flavour is chosen by configuration (GNU ld
/// does not know the ordering flag).
fn links_with_lld(var: impl Fn(&str) -> String) -> bool {
    let flags = var("CARGO_ENCODED_RUSTFLAGS");
    var("TARGET") == "x86_64-unknown-linux-gnu"
        && var("RUSTC_LINKER").is_empty()
        && !flags.contains("linker")
        && !flags.contains("link-self-contained")
        && !flags.contains("fuse-ld")
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
