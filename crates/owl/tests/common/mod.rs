//! Helpers shared by the command-line test files: run `owl`, demand success or one clear error.

// Each test file compiles this module on its own and uses a part of it.
#![allow(dead_code)]

use std::process::{Command, Output};

/// Run the `owl` binary built for these tests.
pub fn owl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_owl"))
        .args(args)
        .output()
        .expect("run owl")
}

/// Run a command that must succeed; its standard output.
pub fn ok(args: &[&str]) -> String {
    let o = owl(args);
    assert!(
        o.status.success(),
        "owl {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Run a command that must fail: exit status 1, exactly one line on stderr, naming `want`.
pub fn fails(args: &[&str], want: &str) -> String {
    let o = owl(args);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(1), "owl {args:?}: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "one line expected: {err}"
    );
    assert!(err.starts_with("owl: error: "), "{err}");
    assert!(err.contains(want), "owl {args:?}: '{want}' not in: {err}");
    err
}
