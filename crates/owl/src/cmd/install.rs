//! `owl completions SHELL` and `owl manpages DIR`: what an installed tool brings beside its
//! binary, generated from the command line's own definition (so they never go stale).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use clap_complete::Shell;

#[derive(Args, Clone, Debug)]
#[command(after_help = "Examples:
  owl completions bash > ~/.local/share/bash-completion/completions/owl
  owl completions zsh > ~/.zfunc/_owl          # with fpath+=(~/.zfunc) before compinit
  owl completions fish > ~/.config/fish/completions/owl.fish")]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    pub shell: Shell,
}

#[derive(Args, Clone, Debug)]
#[command(after_help = "Examples:
  owl manpages /usr/local/share/man/man1 && man owl-compare
  owl manpages man && man -l man/owl.1")]
pub struct ManpagesArgs {
    /// Directory to write owl.1 and one owl-COMMAND.1 per command into (created if missing).
    pub dir: PathBuf,
}

/// The completion script of `cmd` for `shell`, on standard output.
pub fn completions(a: CompletionsArgs, mut cmd: clap::Command) -> Result<()> {
    let mut out = std::io::stdout().lock();
    clap_complete::generate(a.shell, &mut cmd, "owl", &mut out);
    Ok(())
}

/// `owl.1` and `owl-COMMAND.1` (and `owl-COMMAND-SUB.1`) for `cmd`, into `dir`; the files
/// written.
pub fn manpages(a: ManpagesArgs, cmd: clap::Command) -> Result<()> {
    std::fs::create_dir_all(&a.dir)
        .with_context(|| format!("{}: cannot create the directory", a.dir.display()))?;
    let mut written = 0;
    write_pages(&cmd, "owl", &a.dir, &mut written)?;
    eprintln!("owl: wrote {written} man pages to {}", a.dir.display());
    Ok(())
}

fn write_pages(
    cmd: &clap::Command,
    name: &str,
    dir: &std::path::Path,
    n: &mut usize,
) -> Result<()> {
    let cmd = cmd.clone().name(name.to_string());
    let path = dir.join(format!("{name}.1"));
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut buf)?;
    std::fs::write(&path, buf).with_context(|| format!("{}: cannot write", path.display()))?;
    *n += 1;
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        write_pages(sub, &format!("{name}-{}", sub.get_name()), dir, n)?;
    }
    Ok(())
}
