//! The README reads clean on a code host and its examples stay tested: its Rust blocks are
//! complete programs without rustdoc's hidden lines (src/lib.rs runs them as doctests), the
//! one fenced `rust ignore` (it needs the `cuda` feature) is, line for line, the tested copy
//! in docs/readme-doctests.md without its hidden lines, and following the README's commands
//! in order never overwrites one of its input files.

use std::collections::BTreeSet;

/// The fenced code blocks of a Markdown text: (info string, body).
fn blocks(markdown: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in markdown.lines() {
        let fence = line.trim_start().starts_with("```");
        match (&mut current, fence) {
            (None, true) => {
                let info = line.trim_start().trim_start_matches('`').trim().to_string();
                current = Some((info, String::new()));
            }
            (Some(_), true) => out.extend(current.take()),
            (Some((_, body)), false) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, false) => {}
        }
    }
    assert!(current.is_none(), "an unclosed code fence");
    out
}

fn is_rust(info: &str) -> bool {
    info.split([',', ' ']).next() == Some("rust")
}

/// rustdoc hides a line that is `#` or starts with `# ` (after indentation).
fn is_hidden(line: &str) -> bool {
    let t = line.trim_start();
    t == "#" || t.starts_with("# ")
}

fn read(path: &str) -> String {
    let full = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

#[test]
fn readme_rust_blocks_are_complete_programs_without_hidden_lines() {
    let readme = read("README.md");
    let rust: Vec<_> = blocks(&readme)
        .into_iter()
        .filter(|(info, _)| is_rust(info))
        .collect();
    assert!(rust.len() >= 6, "found {} Rust blocks", rust.len());
    for (info, body) in &rust {
        if let Some(line) = body.lines().find(|l| is_hidden(l)) {
            panic!("a README ```{info} block has the hidden line {line:?}:\n{body}");
        }
        assert!(
            body.contains("fn main()"),
            "a README ```{info} block is not a complete program:\n{body}"
        );
    }
}

#[test]
fn readme_blocks_fenced_ignore_are_the_tested_copies() {
    let readme = read("README.md");
    let copies: Vec<String> = blocks(&read("docs/readme-doctests.md"))
        .into_iter()
        .filter(|(info, _)| is_rust(info))
        .map(|(info, body)| {
            assert!(
                !info.contains("ignore"),
                "the tested copies must be compiled: ```{info}"
            );
            body.lines()
                .filter(|l| !is_hidden(l))
                .map(|l| format!("{l}\n"))
                .collect()
        })
        .collect();
    let ignored: Vec<String> = blocks(&readme)
        .into_iter()
        .filter(|(info, _)| is_rust(info) && info.contains("ignore"))
        .map(|(_, body)| body)
        .collect();
    assert!(
        !ignored.is_empty(),
        "the README's GPU example is fenced `rust ignore`"
    );
    for body in &ignored {
        assert!(
            copies.contains(body),
            "this README block has no tested copy in docs/readme-doctests.md (edit both):\n{body}"
        );
    }
}

#[test]
fn readme_commands_never_write_over_an_input() {
    // Flags naming files the command writes: --out, --out-*, and the gradients --grad-*
    // (`--grad G.npy` of bistochastic is an input: the upstream gradient).
    let readme = read("README.md");
    let (mut inputs, mut outputs) = (BTreeSet::new(), BTreeSet::new());
    for (info, body) in blocks(&readme) {
        if info != "sh" {
            continue;
        }
        for line in body
            .lines()
            .filter(|l| l.trim_start().starts_with("logot "))
        {
            let words: Vec<&str> = line
                .split_whitespace()
                .map(|w| w.trim_matches(|c| c == '[' || c == ']'))
                .collect();
            for pair in words.windows(2) {
                let (flag, value) = (pair[0], pair[1]);
                if !flag.starts_with("--") || !value.ends_with(".npy") {
                    continue;
                }
                if flag.starts_with("--out") || flag.starts_with("--grad-") {
                    outputs.insert(value.to_string());
                } else {
                    inputs.insert(value.to_string());
                }
            }
        }
    }
    assert!(inputs.contains("X.npy") && outputs.contains("P.npy"));
    let clash: Vec<_> = inputs.intersection(&outputs).collect();
    assert!(
        clash.is_empty(),
        "README commands write files other commands read: {clash:?}"
    );
    assert!(
        !readme.contains("target/release/logot"),
        "run the installed `logot` (the target directory moves with CARGO_TARGET_DIR)"
    );
}
