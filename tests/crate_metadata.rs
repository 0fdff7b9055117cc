//! Every crate of the workspace is ready for crates.io: publishable, with the metadata its page
//! shows and that crates.io checks when it takes the crate (which `cargo package` does not), and a
//! README of its own whose examples run as doc tests.
//!
//! Read from `cargo metadata`, so a crate added to the workspace is checked too. That the packages
//! build their file lists is `cargo package --workspace --no-verify` in `scripts/test`.

use std::{path::PathBuf, process::Command};

use serde::Deserialize;

/// The repository every crate names.
const REPOSITORY: &str = "https://github.com/giantswarm/muster-rs";

/// The category slugs crates.io accepts (its `src/boot/categories.toml`, read 2026-12-02).
const CATEGORIES: &[&str] = &[
    "algorithms",
    "api-bindings",
    "asynchronous",
    "authentication",
    "caching",
    "command-line-interface",
    "command-line-utilities",
    "compression",
    "computer-vision",
    "concurrency",
    "config",
    "cryptography",
    "cryptography::cryptocurrencies",
    "data-structures",
    "database",
    "database-implementations",
    "date-and-time",
    "development-tools",
    "development-tools::build-utils",
    "development-tools::cargo-plugins",
    "development-tools::debugging",
    "development-tools::ffi",
    "development-tools::procedural-macro-helpers",
    "development-tools::profiling",
    "development-tools::testing",
    "email",
    "embedded",
    "emulators",
    "encoding",
    "external-ffi-bindings",
    "filesystem",
    "game-development",
    "game-engines",
    "games",
    "graphics",
    "gui",
    "hardware-support",
    "internationalization",
    "localization",
    "mathematics",
    "memory-management",
    "multimedia",
    "multimedia::audio",
    "multimedia::encoding",
    "multimedia::images",
    "multimedia::video",
    "network-programming",
    "no-std",
    "os",
    "os::linux-apis",
    "os::macos-apis",
    "os::unix-apis",
    "os::windows-apis",
    "parser-implementations",
    "parsing",
    "rendering",
    "rendering::data-formats",
    "rendering::engine",
    "rendering::graphics-api",
    "rust-patterns",
    "science",
    "science::robotics",
    "simulation",
    "template-engine",
    "text-editors",
    "text-processing",
    "value-formatting",
    "visualization",
    "wasm",
    "web-programming",
    "web-programming::http-client",
    "web-programming::http-server",
    "web-programming::websocket",
];

/// The part of `cargo metadata --no-deps` this test reads.
#[derive(Debug, Deserialize)]
struct Metadata {
    packages: Vec<Package>,
}

/// One workspace member, as `cargo metadata` describes it.
#[derive(Debug, Deserialize)]
struct Package {
    name: String,
    description: Option<String>,
    license: Option<String>,
    repository: Option<String>,
    documentation: Option<String>,
    /// The README, relative to the manifest.
    readme: Option<PathBuf>,
    keywords: Vec<String>,
    categories: Vec<String>,
    /// `null` when the package may go to any registry; `[]` for `publish = false`.
    publish: Option<Vec<String>>,
    manifest_path: PathBuf,
    targets: Vec<Target>,
}

/// A build target of a package.
#[derive(Debug, Deserialize)]
struct Target {
    kind: Vec<String>,
    src_path: PathBuf,
}

fn workspace_packages() -> Vec<Package> {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let output = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--manifest-path",
            manifest,
        ])
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Metadata = serde_json::from_slice(&output.stdout).expect("cargo metadata's JSON");
    assert!(
        metadata.packages.len() >= 7,
        "the facade and its six crates, at least: {:?}",
        metadata.packages.iter().map(|p| &p.name).collect::<Vec<_>>()
    );
    metadata.packages
}

/// What crates.io would refuse, or what its page would lack, in one package's metadata.
fn metadata_problems(package: &Package) -> Vec<String> {
    let mut problems = Vec::new();
    if package.publish.as_ref().is_some_and(Vec::is_empty) {
        problems.push("publish = false".to_owned());
    }
    if package.description.as_deref().is_none_or(|d| d.trim().is_empty()) {
        problems.push("no description".to_owned());
    }
    if package.license.is_none() {
        problems.push("no license".to_owned());
    }
    if package.repository.as_deref() != Some(REPOSITORY) {
        problems.push(format!("repository {:?}, not {REPOSITORY}", package.repository));
    }
    let docs = format!("https://docs.rs/{}", package.name);
    if package.documentation.as_deref() != Some(docs.as_str()) {
        problems.push(format!("documentation {:?}, not {docs}", package.documentation));
    }
    if !(1..=5).contains(&package.keywords.len()) {
        problems.push(format!("{} keywords (crates.io takes 1 to 5)", package.keywords.len()));
    }
    for keyword in &package.keywords {
        if !valid_keyword(keyword) {
            problems.push(format!(
                "keyword {keyword:?}: crates.io takes at most 20 ASCII letters, digits, '_', '-' or '+', starting with a letter"
            ));
        }
    }
    if !(1..=5).contains(&package.categories.len()) {
        problems.push(format!(
            "{} categories (crates.io takes 1 to 5)",
            package.categories.len()
        ));
    }
    for category in &package.categories {
        if !CATEGORIES.contains(&category.as_str()) {
            problems.push(format!("category {category:?} is not a crates.io category slug"));
        }
    }
    problems
}

fn valid_keyword(keyword: &str) -> bool {
    keyword.len() <= 20
        && keyword.starts_with(|c: char| c.is_ascii_alphabetic())
        && keyword
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '+'))
}

#[test]
fn every_crate_is_publishable_with_the_metadata_crates_io_checks() {
    let problems: Vec<String> = workspace_packages()
        .iter()
        .flat_map(|p| {
            metadata_problems(p)
                .into_iter()
                .map(move |problem| format!("{}: {problem}", p.name))
        })
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_crate_has_a_readme_of_its_own_whose_examples_run_as_doc_tests() {
    for package in workspace_packages() {
        let dir = package.manifest_path.parent().expect("a manifest's directory");
        let readme = package
            .readme
            .as_ref()
            .map(|path| dir.join(path))
            .unwrap_or_else(|| panic!("{}: no readme", package.name));
        assert_eq!(
            readme,
            dir.join("README.md"),
            "{}: the README is the crate's own README.md",
            package.name
        );
        let text = std::fs::read_to_string(&readme).unwrap_or_else(|e| panic!("{}: {readme:?}: {e}", package.name));
        assert!(
            text.starts_with(&format!("# {}", package.name)) || package.name == "muster",
            "{}: its README opens with the crate's name",
            package.name
        );
        let lib = package
            .targets
            .iter()
            .find(|t| t.kind.iter().any(|k| k == "lib"))
            .unwrap_or_else(|| panic!("{}: no library", package.name));
        let lib_rs = std::fs::read_to_string(&lib.src_path).expect("the library's root file");
        assert!(
            lib_rs.contains("#[cfg(doctest)]") && lib_rs.contains(r#"include_str!("../README.md")"#),
            "{}: {:?} compiles its README's examples as doc tests (#[cfg(doctest)] and include_str!(\"../README.md\"))",
            package.name,
            lib.src_path
        );
    }
}

#[test]
fn a_keyword_is_refused_as_crates_io_refuses_it() {
    assert!(valid_keyword("mcp"));
    assert!(valid_keyword("token-exchange"));
    assert!(valid_keyword("c++"));
    assert!(!valid_keyword("model-context-protocol"), "22 characters");
    assert!(!valid_keyword("-mcp"), "not starting with a letter");
    assert!(!valid_keyword("mcp gateway"), "a space");
    assert!(!valid_keyword(""));
}
