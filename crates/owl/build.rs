//! The commit `owl --version` names: `git rev-parse` of the checkout being built, or "unknown"
//! outside one (a packaged source). Rebuilt when HEAD or the branch it points to moves.
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=OWL_COMMIT={commit}");
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        let branch = git(&["symbolic-ref", "-q", "HEAD"]);
        // only files that exist: a missing one would rerun this script on every build
        let files = ["HEAD".to_string(), "packed-refs".to_string()]
            .into_iter()
            .chain(branch)
            .map(|f| format!("{dir}/{f}"))
            .filter(|p| std::path::Path::new(p).exists());
        for p in files {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
