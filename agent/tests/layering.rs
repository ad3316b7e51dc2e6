//! The agent's folders import only the folders listed after them in the
//! crate's documentation (`src/lib.rs`): no import runs upward, so none
//! circles. A `crate::<folder>` path in a file of another folder is an
//! import; one naming a folder listed before its own fails this test.

use std::path::{Path, PathBuf};

/// The folders in the order `src/lib.rs` lists them (`//! - `name`: ...`).
fn layers(lib: &str) -> Vec<String> {
    lib.lines()
        .filter_map(|line| line.strip_prefix("//! - `"))
        .filter_map(|rest| rest.split_once('`').map(|(name, _)| name.to_owned()))
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The folder (or top-level module) `path` belongs to.
fn layer_of(src: &Path, path: &Path) -> String {
    let first = path.strip_prefix(src).unwrap().components().next().unwrap();
    first.as_os_str().to_str().unwrap().trim_end_matches(".rs").to_owned()
}

/// The folders `text` imports through `crate::` (and `$crate::`) paths.
fn imports<'a>(text: &'a str, layers: &'a [String]) -> impl Iterator<Item = (usize, &'a str)> + 'a {
    text.lines().enumerate().flat_map(move |(number, line)| {
        line.match_indices("crate::").filter_map(move |(at, _)| {
            let name: String = line[at + 7..].chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
            layers.iter().find(|layer| **layer == name).map(|layer| (number + 1, layer.as_str()))
        })
    })
}

#[test]
fn no_folder_imports_one_listed_before_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let layers = layers(&lib);
    assert!(layers.len() >= 5, "src/lib.rs lists its folders as `//! - `name`: ...`: found {layers:?}");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut upward = Vec::new();
    let mut unlisted = Vec::new();
    for file in files.iter().filter(|f| f.file_name().is_some_and(|n| n != "lib.rs")) {
        let own = layer_of(&src, file);
        let Some(rank) = layers.iter().position(|layer| *layer == own) else {
            unlisted.push(file.display().to_string());
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for (line, layer) in imports(&text, &layers) {
            if layers.iter().position(|l| l == layer).is_some_and(|r| r < rank) {
                upward.push(format!("{}:{line}: {own} imports {layer}", file.display()));
            }
        }
    }
    assert!(unlisted.is_empty(), "files outside the folders src/lib.rs lists: {unlisted:?}");
    assert!(upward.is_empty(), "imports running upward:\n{}", upward.join("\n"));
}

#[test]
fn an_upward_import_is_found() {
    let layers = ["ffi", "session", "log"].map(str::to_owned);
    let found: Vec<_> = imports("use crate::log;\nuse crate::session::start;\n", &layers).collect();
    assert_eq!(found, [(1, "log"), (2, "session")]);
}
