//! The fuzz targets' bodies (fuzz/src/bodies.rs) on stable, over a seeded random corpus:
//! mutations of valid .npy files through the command line's reader (compiled here from
//! cli/src/npy.rs), and fuzzed files and flags through the `logot` binary. The
//! default run is short; `LOGOT_FUZZ_CASES=N` (reader) and `LOGOT_FUZZ_CLI_CASES=N` (binary) scale it (scripts/fuzz does, when nightly or
//! cargo-fuzz is missing). The coverage-guided version is `cargo +nightly fuzz run …`.

#[allow(dead_code)]
#[path = "../src/npy.rs"]
mod npy;

#[allow(dead_code)]
#[path = "../../fuzz/src/bodies.rs"]
mod bodies;

mod common;

use bodies::{npy_read, npy_seeds, CliWorkspace, Mutator};

fn cases(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn seed() -> u64 {
    std::env::var("LOGOT_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed)
}

#[test]
fn npy_reader_survives_mutated_files() {
    let seeds = npy_seeds();
    for s in &seeds {
        npy_read(s);
    }
    let mut m = Mutator(seed());
    let n = cases("LOGOT_FUZZ_CASES", 20_000);
    for _ in 0..n {
        let s = &seeds[m.below(seeds.len())];
        let input = m.mutate(s);
        npy_read(&input);
    }
    println!("npy_read: {n} mutated inputs, seed {}", seed());
}

#[test]
fn command_line_survives_fuzzed_files_and_flags() {
    let dir = common::cli::dir("fuzz_stable");
    let ws = CliWorkspace::new(env!("CARGO_BIN_EXE_logot").into(), dir);
    let seeds = npy_seeds();
    let mut m = Mutator(seed() ^ 0xc11);
    let n = cases("LOGOT_FUZZ_CLI_CASES", 150);
    for _ in 0..n {
        let mut data = vec![m.next() as u8, m.next() as u8, m.next() as u8];
        let pick = m.below(seeds.len());
        let file = m.mutate(&seeds[pick]);
        data.extend_from_slice(&file);
        data.push(0xFF);
        for _ in 0..3 {
            let v = [
                "0", "-1", "nan", "inf", "1e-300", "1e300", "cuda", "x", "", "3", "1000000",
            ][m.below(11)];
            data.extend_from_slice(v.as_bytes());
            data.push(0);
        }
        ws.run(&data);
    }
    println!("cli_args: {n} runs, seed {}", seed());
}

/// Write the seed corpora for cargo-fuzz into `LOGOT_FUZZ_SEEDS_DIR/<target>/` (used by
/// scripts/fuzz).
#[test]
#[ignore = "writes the cargo-fuzz seed corpus; run by scripts/fuzz"]
fn write_seed_corpus() {
    let Ok(root) = std::env::var("LOGOT_FUZZ_SEEDS_DIR") else {
        return;
    };
    let root = std::path::PathBuf::from(root);
    for (k, s) in npy_seeds().iter().enumerate() {
        let d = root.join("npy_read");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(format!("seed{k}")), s).unwrap();
        let d = root.join("cli_args");
        std::fs::create_dir_all(&d).unwrap();
        for t in 0..8u8 {
            let mut data = vec![t, k as u8, 0];
            data.extend_from_slice(s);
            std::fs::write(d.join(format!("seed{k}_{t}")), data).unwrap();
        }
    }
}
