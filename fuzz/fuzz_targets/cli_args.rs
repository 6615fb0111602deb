//! The `logot` binary (LOGOT_BIN, default ../target/release/logot) on a fuzzed .npy file in
//! one file argument and fuzzed extra arguments: exit status 0 or 2, never a panic, an
//! abort or a signal.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

static WORKSPACE: OnceLock<logot_fuzz::bodies::CliWorkspace> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let ws = WORKSPACE.get_or_init(|| {
        let bin = std::env::var("LOGOT_BIN").unwrap_or_else(|_| "../target/release/logot".into());
        let dir = std::env::temp_dir().join(format!("logot-fuzz-{}", std::process::id()));
        logot_fuzz::bodies::CliWorkspace::new(bin.into(), dir)
    });
    ws.run(data);
});
