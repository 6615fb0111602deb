//! The command line's names in messages: an argument the library names (`mu`, `cost`,
//! `max_iters`, …) is reported as the flag that sets it (`--mu`, `--cost`, `--iters`), and
//! numbers are printed short.

use logot::Error;

/// The library's argument names and the flags that set them.
const FLAGS: &[(&str, &str)] = &[
    ("mu", "--mu"),
    ("nu", "--nu"),
    ("cost", "--cost"),
    ("x", "--x"),
    ("y", "--y"),
    ("a", "--a"),
    ("eps", "--eps"),
    ("tol", "--tol"),
    ("max_iters", "--iters"),
    ("iters", "--iters"),
    ("check_every", "--check-every"),
    ("cg.max_iters", "--cg-iters"),
    ("cg.tol", "--cg-tol"),
    ("histograms", "--inputs"),
    ("inputs", "--inputs"),
    ("weights", "--weights"),
    ("out", "--out"),
    ("grad", "--grad"),
    ("steps", "--steps"),
    ("polish_steps", "--polish-steps"),
    ("convention", "--convention"),
    ("eps_scaling", "--eps-scaling"),
    ("eps_scaling.start", "--eps-scaling"),
    ("eps_scaling.factor", "--eps-scaling"),
    ("relaxation.rho_mu", "--reg-m-mu"),
    ("relaxation.rho_nu", "--reg-m-nu"),
    ("devices", "--devices"),
];

/// The library's hints that name Rust items, and what a command-line user does instead.
const HINTS: &[(&str, &str)] = &[(
    "relax the marginals (BarycenterProblem::relaxed)",
    "relax the marginals with --reg-m RHO",
)];

/// `e` with the argument it names written as its flag (`mu` → `--mu`; `mu/nu` →
/// `--mu/--nu`; a name followed by an index or a note keeps it: `cost[2]` → `--cost[2]`),
/// and a hint that names a Rust item naming the flag instead. Names that are flags
/// already, or that no flag sets, are kept.
pub fn cli_names(e: Error) -> Error {
    let e = match e {
        Error::Parameter { arg, value, reason } => Error::Parameter {
            arg,
            value,
            reason: HINTS
                .iter()
                .fold(reason, |r, (rust, cli)| r.replace(rust, cli)),
        },
        e => e,
    };
    e.rename_arg(|arg| arg.split('/').map(flag_of).collect::<Vec<_>>().join("/"))
}

fn flag_of(name: &str) -> String {
    if name.starts_with('-') {
        return name.to_string();
    }
    let end = name
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .unwrap_or(name.len());
    match FLAGS.iter().find(|(lib, _)| *lib == &name[..end]) {
        Some((_, flag)) => format!("{flag}{}", &name[end..]),
        None => name.to_string(),
    }
}

/// `arg` with its leading name (letters, digits, `_`) written as the flag a command's
/// `names` (library name, flag) give it, what follows kept (`x_s[2]` → `--x[2]`); a name
/// not in `names` is kept.
pub fn flag_in(arg: &str, names: &[(&str, &str)]) -> String {
    let end = arg
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(arg.len());
    match names.iter().find(|(lib, _)| *lib == &arg[..end]) {
        Some((_, flag)) => format!("{flag}{}", &arg[end..]),
        None => arg.to_string(),
    }
}

/// A library error in a command's names: the argument through [`flag_in`] with `names`, and
/// in a shape error's detail, each text of `compared` (library text, command text) replaced.
pub fn command_error(e: Error, names: &[(&str, &str)], compared: &[(&str, &str)]) -> Error {
    match e.rename_arg(|s| flag_in(&s, names)) {
        Error::Shape { arg, detail } => Error::Shape {
            arg,
            detail: compared
                .iter()
                .fold(detail, |d, (lib, cli)| d.replace(lib, cli)),
        },
        e => e,
    }
}

/// A number as `{}` prints it when that is short, else in scientific notation (`1e308`,
/// not 309 digits).
pub fn number(x: f64) -> String {
    let a = x.abs();
    if a == 0.0 || (1e-4..1e15).contains(&a) || !a.is_finite() {
        x.to_string()
    } else {
        format!("{x:e}")
    }
}

/// `msg` with every number of more than 24 digits (a `{}`-printed `1e308` has 309) in
/// scientific notation: the library's messages print some values with `{}`. Integers up
/// to `u64::MAX` (20 digits) are kept.
pub fn short_numbers(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        // A full stop after a number ends the sentence, not the number.
        let body = run.trim_end_matches('.');
        let digits = body.chars().filter(char::is_ascii_digit).count();
        match body.parse::<f64>() {
            Ok(x) if digits > 24 => {
                out.push_str(&number(x));
                out.push_str(&run[body.len()..]);
            }
            _ => out.push_str(run),
        }
        run.clear();
    };
    for c in msg.chars() {
        if c.is_ascii_digit() || (c == '.' && !run.is_empty()) {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_names_become_flags() {
        let rename = |arg: &str| match cli_names(Error::shape(arg, "detail")) {
            Error::Shape { arg, .. } => arg,
            e => panic!("{e:?}"),
        };
        assert_eq!(rename("mu"), "--mu");
        assert_eq!(rename("cost[2]"), "--cost[2]");
        assert_eq!(rename("mu/nu"), "--mu/--nu");
        assert_eq!(rename("max_iters"), "--iters");
        assert_eq!(rename("cg.max_iters"), "--cg-iters");
        assert_eq!(rename("--x"), "--x");
        assert_eq!(rename("something_else"), "something_else");
        let hint = Error::parameter(
            "histograms",
            "input 1 has mass 2",
            "relax the marginals (BarycenterProblem::relaxed) for inputs of different masses",
        );
        assert_eq!(
            cli_names(hint).to_string(),
            "--inputs = input 1 has mass 2: relax the marginals with --reg-m RHO for inputs \
             of different masses"
        );
    }

    #[test]
    fn a_command_names_its_own_flags() {
        let names = [("x_s", "--x"), ("x_t", "--y")];
        assert_eq!(flag_in("x_s", &names), "--x");
        assert_eq!(flag_in("x_t[3]", &names), "--y[3]");
        assert_eq!(flag_in("x", &names), "x");
        let e = Error::shape("x_t", "points have 2 coordinates but those of x_s have 3");
        match command_error(e, &names, &[("x_s", "--x")]) {
            Error::Shape { arg, detail } => {
                assert_eq!(arg, "--y");
                assert_eq!(detail, "points have 2 coordinates but those of --x have 3");
            }
            e => panic!("{e:?}"),
        }
        let e = Error::parameter("x_s", 1.0, "why x_s");
        assert_eq!(
            command_error(e, &names, &[("x_s", "--x")]).to_string(),
            "--x = 1: why x_s"
        );
    }

    #[test]
    fn numbers_print_short() {
        assert_eq!(number(0.5), "0.5");
        assert_eq!(number(1e308), "1e308");
        assert_eq!(number(-1e300), "-1e300");
        assert_eq!(number(1e-300), "1e-300");
        assert_eq!(number(f64::NEG_INFINITY), "-inf");
        assert_eq!(number(123456.0), "123456");
        assert_eq!(number(1.2345678901234), "1.2345678901234");
    }

    #[test]
    fn long_numbers_in_messages_print_short() {
        let long = format!("eps = {} may be too small, eps = {}.", 1e308, -1e300);
        assert_eq!(
            short_numbers(&long),
            "eps = 1e308 may be too small, eps = -1e300."
        );
        let kept = "mu: negative mass -0.1 at index (0, 1); 18446744073709551615 runs, v1.2.";
        assert_eq!(short_numbers(kept), kept);
        assert_eq!(short_numbers(&format!("{}", 1e-300)), "1e-300");
    }
}
