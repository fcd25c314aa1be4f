//! The README's architecture table against the workspace's real dependency graph, as
//! `cargo metadata` reads it from the manifests: a crate added, a dependency added or
//! dropped, and the table must say so in the same change.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

type Graph = BTreeMap<String, Vec<String>>;

/// Each workspace crate and the workspace crates among its normal dependencies, sorted.
fn manifests() -> Graph {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(&root)
        .output()
        .expect("cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    let names: Vec<&str> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    packages
        .iter()
        .map(|p| {
            let mut deps: Vec<String> = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                // `kind` is null for [dependencies], "dev" or "build" otherwise.
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().unwrap())
                .filter(|d| names.contains(d))
                .map(str::to_string)
                .collect();
            deps.sort();
            deps.dedup();
            (p["name"].as_str().unwrap().to_string(), deps)
        })
        .collect()
}

/// The rows of the README's "Architecture" table: crate → its "depends on" column.
fn readme_table(readme: &str) -> Graph {
    let section = readme
        .split("\n## Architecture\n")
        .nth(1)
        .expect("the README has an Architecture section");
    let section = section.split("\n## ").next().unwrap();
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|row| {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let name = cells[1].trim_matches('`').to_string();
            let mut deps: Vec<String> = cells[2]
                .split(',')
                .map(|d| d.trim().trim_matches('`').to_string())
                .filter(|d| !d.is_empty() && d != "—")
                .collect();
            deps.sort();
            (name, deps)
        })
        .collect()
}

#[test]
fn the_readmes_crate_graph_is_the_manifests() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap();
    let table = readme_table(&readme);
    let real = manifests();
    assert!(real.len() >= 7, "{real:?}");
    assert_eq!(
        table, real,
        "the README's Architecture table (left) is not the workspace's dependency graph (right): update the table"
    );
}

/// The parser reads what it should: a row with no dependencies, one with several, and
/// nothing outside the section.
#[test]
fn the_table_is_read_from_its_section_only() {
    let readme = "## Other\n| `x` | `y` | no |\n\n## Architecture\n\ntext\n\n\
                  | crate | depends on | its job |\n|---|---|---|\n\
                  | `a` | — | leaf |\n| `b` | `c`, `a` | two |\n\n## Next\n| `z` | — | no |\n";
    let t = readme_table(readme);
    assert_eq!(t.len(), 2, "{t:?}");
    assert_eq!(t["a"], Vec::<String>::new());
    assert_eq!(t["b"], vec!["a".to_string(), "c".to_string()]);
}
