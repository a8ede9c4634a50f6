//! README's command-line examples run as written: every shell block marked
//! `<!-- runs as: sh, in an empty folder -->` (the TCP cluster) runs under bash in a fresh
//! folder with this build's `ubershuffle` first on the `PATH` (its port 7000 replaced by a free
//! one, the one change), and the plugin of "Adding a scheme" is `examples/plugins/my-scheme`
//! verbatim, which the workspace builds and `ubershuffle plan --plugin` loads here.

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly, which is what it should do

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use ubershuffle_plugin_host::workspace_plugins::{self, MY_SCHEME};

const SHELL_MARK: &str = "<!-- runs as: sh, in an empty folder -->\n```sh\n";
const PORT: &str = "127.0.0.1:7000";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).unwrap()
}

/// The fenced blocks that follow `opening` (which ends with the fence line), in order.
fn blocks_after<'a>(text: &'a str, opening: &str) -> Vec<&'a str> {
    text.match_indices(opening)
        .map(|(at, _)| {
            let body = &text[at + opening.len()..];
            &body[..body.find("```").unwrap()]
        })
        .collect()
}

fn free_port() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

#[test]
fn the_shell_examples_run_as_written() {
    let text = readme();
    let blocks = blocks_after(&text, SHELL_MARK);
    assert!(!blocks.is_empty(), "README has no block marked {SHELL_MARK:?}");
    let bin = Path::new(env!("CARGO_BIN_EXE_ubershuffle")).parent().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    for (k, block) in blocks.iter().enumerate() {
        let folder = std::env::temp_dir().join(format!("readme-sh-{}-{k}", std::process::id()));
        std::fs::create_dir_all(&folder).unwrap();
        let script = block.replace(PORT, &free_port());
        let out = Command::new("bash")
            .args(["-euo", "pipefail", "-c", &script])
            .current_dir(&folder)
            .env("PATH", &path)
            .output()
            .unwrap();
        std::fs::remove_dir_all(&folder).unwrap();
        assert!(out.status.success(), "{block}\nfailed:\n{}", String::from_utf8_lossy(&out.stderr));
    }
}

#[test]
fn the_plugin_example_is_the_example_crate_and_loads() {
    let crate_dir = root().join("examples/plugins/my-scheme");
    let source = std::fs::read_to_string(crate_dir.join("src/lib.rs")).unwrap();
    let text = readme();
    assert!(
        blocks_after(&text, "```rust\n").contains(&source.as_str()),
        "README's plugin code is not examples/plugins/my-scheme/src/lib.rs verbatim"
    );
    let manifest = std::fs::read_to_string(crate_dir.join("Cargo.toml")).unwrap();
    let toml = blocks_after(&text, "```toml\n");
    let lib = toml.iter().flat_map(|b| b.lines()).find(|l| l.starts_with("crate-type")).unwrap();
    assert!(manifest.contains(lib), "README's [lib] line is not the example crate's: {lib}");

    let library = workspace_plugins::built(MY_SCHEME).unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(env!("CARGO_BIN_EXE_ubershuffle"))
        .args([
            "plan",
            "--plugin",
            library.to_str().unwrap(),
            "-n",
            "20",
            "-q",
            "100000",
            "-a",
            "0.4",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["scheme"], "my-scheme", "{v}");
    assert_eq!(v["verified"], true, "{v}");
    assert_eq!(v["transmissions"], v["uncoded_transmissions"], "{v}");
}
