//! Bodies of the fuzz targets, shared by the cargo-fuzz targets (fuzz/fuzz_targets/, nightly)
//! and cli/tests/fuzz_stable.rs (stable: the same bodies over a seeded random corpus). The
//! including crate provides `crate::npy` (cli/src/npy.rs).

use ndarray::{Array1, Array2, Array3};
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The dimension sets the command line asks the reader for.
const NDIMS: [&[usize]; 4] = [&[1, 2], &[2], &[2, 3], &[2, 3, 4]];

/// The .npy reader on arbitrary bytes, as f32 and f64 with every dimension set the command
/// line uses: it returns an array or a `File`/`Shape` error; it never panics, never aborts
/// on a lying header (an array never has more elements than the bytes can hold), and a
/// returned array has the number of dimensions asked for.
pub fn npy_read(data: &[u8]) {
    for ndims in NDIMS {
        check::<f64>(data, ndims);
        check::<f32>(data, ndims);
    }
}

fn check<T: logot::Real>(data: &[u8], ndims: &[usize]) {
    match crate::npy::read_from::<T, _>(Cursor::new(data), "fuzz.npy", "--fuzz", ndims) {
        Ok(a) => {
            assert!(
                ndims.contains(&a.ndim()),
                "{}-D accepted for {ndims:?}",
                a.ndim()
            );
            assert!(
                a.len() <= data.len() / 4,
                "{} elements from {} bytes",
                a.len(),
                data.len()
            );
        }
        Err(logot::Error::File { path, .. }) => assert_eq!(path, "fuzz.npy"),
        Err(logot::Error::Shape { arg, .. }) => assert_eq!(arg, "--fuzz"),
        Err(e) => panic!("unexpected error kind: {e:?}"),
    }
}

/// Valid .npy files of the dtypes, orders and shapes the reader accepts (the seed corpus).
pub fn npy_seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut push = |descr: &str, fortran: bool, shape: &str, data: Vec<u8>| {
        out.push(npy_file(1, descr, fortran, shape, &data));
        out.push(npy_file(2, descr, fortran, shape, &data));
    };
    let f64s = |v: &[f64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    push("<f8", false, "(4,)", f64s(&[0.25; 4]));
    push("<f4", false, "(4,)", f32s(&[0.25; 4]));
    push(
        "<f8",
        false,
        "(2, 3)",
        f64s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
    );
    push("<f8", true, "(2, 3)", f64s(&[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]));
    push("<f4", false, "(2, 2, 2)", f32s(&[0.5; 8]));
    push("<f8", false, "(1, 1, 1, 1)", f64s(&[7.0]));
    push("<f8", false, "()", f64s(&[1.0]));
    push("<f8", false, "(0, 3)", vec![]);
    push("|i1", false, "(4,)", vec![1; 4]);
    push("<c16", false, "(1,)", vec![0; 16]);
    out
}

/// A .npy file: magic, version, header dict padded to a multiple of 64 bytes, data.
pub fn npy_file(version: u8, descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
    let mut header = format!(
        "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}",
        if fortran { "True" } else { "False" }
    );
    let pre = if version == 1 { 10 } else { 12 };
    while (pre + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY".to_vec();
    out.extend_from_slice(&[version, 0]);
    if version == 1 {
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// A scratch folder of valid inputs for every command, and the `logot` binary to drive.
pub struct CliWorkspace {
    bin: PathBuf,
    dir: PathBuf,
}

/// The command templates: `{F}` is the fuzzed file, other names are valid files.
const TEMPLATES: [&[&str]; 8] = [
    &[
        "wasserstein",
        "--mu",
        "mu",
        "--nu",
        "nu",
        "--cost",
        "c",
        "--eps",
        "0.1",
    ],
    &[
        "coupling", "--mu", "mu", "--nu", "nu", "--x", "x", "--y", "y", "--eps", "0.1", "--out",
        "OUT",
    ],
    &[
        "wasserstein",
        "--mu",
        "mu",
        "--nu",
        "nu",
        "--cost",
        "c",
        "--eps",
        "0.1",
        "--grad-mu",
        "OUT",
    ],
    &[
        "barycenter",
        "--inputs",
        "h",
        "--weights",
        "w",
        "--cost",
        "c44",
        "--eps",
        "0.1",
        "--out",
        "OUT",
    ],
    &[
        "barycenter",
        "--inputs",
        "img",
        "--weights",
        "w",
        "--grid",
        "--eps",
        "0.1",
        "--out",
        "OUT",
    ],
    &[
        "bistochastic",
        "--x",
        "sq",
        "--out",
        "OUT",
        "--grad",
        "sq",
        "--out-grad",
        "OUT2",
    ],
    &[
        "svd3", "--a", "a", "--out-u", "OUT", "--out-s", "OUT2", "--out-vh", "OUT3",
    ],
    &["newton-schulz", "--x", "sq", "--out", "OUT"],
];

/// Whether `template[k]` names an input file (the value of a flag, not a number or an
/// output).
fn is_input(template: &[&str], k: usize) -> bool {
    let a = template[k];
    k > 0
        && template[k - 1].starts_with("--")
        && !a.starts_with("--")
        && !a.starts_with("OUT")
        && a.parse::<f64>().is_err()
}

/// Extra arguments the fuzzer picks from (then given fuzzed values).
const FLAGS: [&str; 12] = [
    "--eps",
    "--iters",
    "--tol",
    "--f32",
    "--f64",
    "--backend",
    "--metric",
    "--cg-iters",
    "--cg-tol",
    "--check-every",
    "--steps",
    "--eps-scaling",
];

/// Longest a single run may take before it is stopped (a fuzzed `--iters 10^9` is slow,
/// not wrong).
const RUN_LIMIT: Duration = Duration::from_secs(20);

impl CliWorkspace {
    /// Write the valid inputs under `dir`.
    pub fn new(bin: PathBuf, dir: PathBuf) -> Self {
        use ndarray_npy::write_npy;
        std::fs::create_dir_all(&dir).unwrap();
        let p = |n: &str| dir.join(format!("{n}.npy"));
        let x: Vec<f64> = (0..4).map(|i| i as f64 / 3.0).collect();
        write_npy(p("mu"), &Array1::from_elem(4, 0.25)).unwrap();
        write_npy(p("nu"), &Array1::from_elem(3, 1.0 / 3.0)).unwrap();
        write_npy(
            p("c"),
            &Array2::from_shape_fn((4, 3), |(i, j)| (x[i] - j as f64 / 2.0).powi(2)),
        )
        .unwrap();
        write_npy(
            p("c44"),
            &Array2::from_shape_fn((4, 4), |(i, j)| (x[i] - x[j]).powi(2)),
        )
        .unwrap();
        write_npy(
            p("x"),
            &Array2::from_shape_fn((4, 2), |(i, k)| x[i] * (k + 1) as f64),
        )
        .unwrap();
        write_npy(
            p("y"),
            &Array2::from_shape_fn((3, 2), |(j, k)| j as f64 - k as f64),
        )
        .unwrap();
        write_npy(p("h"), &Array2::from_elem((2, 4), 0.25)).unwrap();
        write_npy(p("w"), &Array1::from(vec![0.5, 0.5])).unwrap();
        write_npy(p("img"), &Array3::from_elem((2, 3, 3), 1.0 / 9.0)).unwrap();
        write_npy(
            p("sq"),
            &Array2::from_shape_fn((3, 3), |(i, j)| (i * j) as f64 * 0.2),
        )
        .unwrap();
        write_npy(
            p("a"),
            &Array2::from_shape_fn((5, 3), |(i, j)| ((i + 2 * j) % 4) as f64),
        )
        .unwrap();
        CliWorkspace { bin, dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_string_lossy().into_owned()
    }

    /// One run: `data[0]` picks a command, `data[1]` the file argument that gets the fuzzed
    /// file, `data[2]` how many extra flags; after that the fuzzed file's bytes up to the
    /// first 0xFF, then the extra flags' values separated by 0x00. The run must exit with
    /// status 0 or 2, with no "panicked" on stderr and a message when it fails.
    pub fn run(&self, data: &[u8]) {
        if data.len() < 3 {
            return;
        }
        let template = TEMPLATES[data[0] as usize % TEMPLATES.len()];
        let files: Vec<usize> = (0..template.len())
            .filter(|&k| is_input(template, k))
            .collect();
        let slot = files[data[1] as usize % files.len()];
        let rest = &data[3..];
        let (file, tail) = match rest.iter().position(|&b| b == 0xFF) {
            Some(k) => (&rest[..k], &rest[k + 1..]),
            None => (rest, &[][..]),
        };
        let fuzzed = self.path("fuzzed.npy");
        std::fs::write(&fuzzed, file).unwrap();
        let mut args: Vec<String> = template
            .iter()
            .enumerate()
            .map(|(k, a)| {
                if k == slot {
                    fuzzed.clone()
                } else if a.starts_with("OUT") {
                    self.path(&format!("{}.npy", a.to_lowercase()))
                } else if is_input(template, k) {
                    self.path(&format!("{a}.npy"))
                } else {
                    a.to_string()
                }
            })
            .collect();
        let values: Vec<String> = tail
            .split(|&b| b == 0)
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect();
        for k in 0..(data[2] as usize % 4) {
            let flag = FLAGS[(data[2] as usize / 4 + 5 * k) % FLAGS.len()];
            args.push(flag.into());
            if let Some(v) = values.get(k) {
                args.push(v.clone());
            }
        }
        self.check(&args);
    }

    /// Run the binary on `args` and check the outcome.
    pub fn check(&self, args: &[String]) {
        let mut child = Command::new(&self.bin)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.bin.display()));
        let start = Instant::now();
        loop {
            match child.try_wait().unwrap() {
                Some(_) => break,
                None if start.elapsed() > RUN_LIMIT => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return;
                }
                None => std::thread::sleep(Duration::from_millis(2)),
            }
        }
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
        match out.status.code() {
            Some(0) => {}
            Some(2) => assert!(
                !err.trim().is_empty(),
                "{args:?}: status 2 without a message"
            ),
            other => panic!("{args:?}: exit status {other:?} (a signal or an abort?): {err}"),
        }
    }

    /// The scratch folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// A seeded mutator for the stable fallback: bit flips, byte overwrites with interesting
/// values, truncation, insertion, and rewriting the digits of a .npy header's shape.
pub struct Mutator(pub u64);

impl Mutator {
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 17
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// A mutated copy of `seed` (1 to 4 mutations).
    pub fn mutate(&mut self, seed: &[u8]) -> Vec<u8> {
        let mut v = seed.to_vec();
        for _ in 0..1 + self.below(4) {
            match self.below(7) {
                0 if !v.is_empty() => {
                    let k = self.below(v.len());
                    v[k] ^= 1 << self.below(8);
                }
                1 if !v.is_empty() => {
                    let k = self.below(v.len());
                    v[k] =
                        [0, 0xFF, 0x7F, 0x80, b'(', b')', b',', b'\'', b'9', b' '][self.below(10)];
                }
                2 => {
                    let keep = self.below(v.len() + 1);
                    v.truncate(keep);
                }
                3 => {
                    let k = self.below(v.len() + 1);
                    let n = 1 + self.below(8);
                    for _ in 0..n {
                        let b = self.next() as u8;
                        v.insert(k, b);
                    }
                }
                4 => {
                    // A shape digit becomes a long number (lying headers).
                    let digits: Vec<usize> = (0..v.len().min(128))
                        .filter(|&k| v[k].is_ascii_digit())
                        .collect();
                    if !digits.is_empty() {
                        let k = digits[self.below(digits.len())];
                        let big = [
                            "1000000000000",
                            "4294967296",
                            "18446744073709551615",
                            "99999999999999999999",
                            "0",
                        ][self.below(5)];
                        v.splice(k..k + 1, big.bytes());
                    }
                }
                5 if v.len() > 9 => {
                    // The header length field.
                    v[8] = self.next() as u8;
                    v[9] = self.next() as u8;
                }
                _ => {
                    let extra = self.below(64);
                    for _ in 0..extra {
                        let b = self.next() as u8;
                        v.push(b);
                    }
                }
            }
        }
        v
    }
}
