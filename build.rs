//! Links the reference gateway and the other examples with packed relative relocations
//! (`-z pack-relative-relocs`, DT_RELR) where the C library supports them.
//!
//! The gateway is a position-independent executable: every pointer in its read-only data (vtables,
//! string slices in statics) is fixed up by the dynamic loader at start, and with the classic
//! encoding each fix-up is a 24-byte record in `.rela.dyn`: about 50,000 of them, 1.2 MB that the
//! loader reads through, so 1.2 MB of the idle gateway's resident set. DT_RELR packs them into
//! 15 KB. The binary stays position-independent (address-space layout randomisation is kept).
//!
//! The loader must understand DT_RELR: glibc 2.36 and later (the linker then records that the
//! binary needs `GLIBC_ABI_DT_RELR`, so an older glibc refuses to start it instead of crashing).
//! So the flag is passed only for a native glibc build on a machine whose glibc is 2.36 or newer
//! (`getconf GNU_LIBC_VERSION`); anywhere else, and with `MUSTER_NO_RELR` set, the examples link
//! as before. The library crates are not affected: an embedder's binary is linked with the
//! embedder's flags.

// A build script speaks to cargo on stdout.
#![allow(clippy::print_stdout)]

use std::{env, process::Command};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=MUSTER_NO_RELR");
    if packs_relative_relocations() {
        println!("cargo:rustc-link-arg-examples=-Wl,-z,pack-relative-relocs");
    }
}

fn packs_relative_relocations() -> bool {
    let var = |name: &str| env::var(name).unwrap_or_default();
    let native = var("TARGET") == var("HOST");
    let glibc = var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu";
    native && glibc && env::var_os("MUSTER_NO_RELR").is_none() && glibc_version().is_some_and(|v| v >= (2, 36))
}

/// The build machine's glibc, from `getconf GNU_LIBC_VERSION` ("glibc 2.36").
fn glibc_version() -> Option<(u32, u32)> {
    let out = Command::new("getconf").arg("GNU_LIBC_VERSION").output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let version = text.trim().strip_prefix("glibc ")?;
    let mut parts = version.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts
        .next()?
        .trim_end_matches(|c: char| !c.is_ascii_digit())
        .parse()
        .ok()?;
    Some((major, minor))
}
