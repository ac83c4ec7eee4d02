//! Man pages and shell completions generated from the CLI's own clap
//! definitions, so they never drift from the verbs (`make deb` packages
//! them; hidden verbs `gen-man DIR`, `gen-completions DIR`).

use clap::Command;
use std::path::Path;
use std::process::ExitCode;

/// `vecgate.1` plus one page per visible verb (`vecgate-run.1`, …), like
/// git's, each naming the others in SEE ALSO through the main page.
pub fn man(cmd: Command, dir: &Path) -> ExitCode {
    report(write_man(cmd, dir))
}

/// bash (`vecgate`), zsh (`_vecgate`) and fish (`vecgate.fish`) completions.
pub fn completions(mut cmd: Command, dir: &Path) -> ExitCode {
    use clap_complete::{generate_to, Shell};
    report((|| {
        std::fs::create_dir_all(dir)?;
        for sh in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            generate_to(sh, &mut cmd, "vecgate", dir)?;
        }
        // clap_complete names the bash file vecgate.bash; bash-completion
        // looks completions up by the command's own name.
        std::fs::rename(dir.join("vecgate.bash"), dir.join("vecgate"))
    })())
}

fn write_man(cmd: Command, dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let cmd = cmd.name("vecgate");
    let page = |c: &Command, file: &str| -> std::io::Result<()> {
        let mut out = Vec::new();
        clap_mangen::Man::new(c.clone()).render(&mut out)?;
        std::fs::write(dir.join(file), out)
    };
    page(&cmd, "vecgate.1")?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("vecgate-{}", sub.get_name());
        let sub = sub
            .clone()
            .name(name.clone())
            .bin_name(format!("vecgate {}", sub.get_name()))
            .version(env!("CARGO_PKG_VERSION"));
        page(&sub, &format!("{name}.1"))?;
    }
    Ok(())
}

fn report(r: std::io::Result<()>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vecgate: {e}");
            ExitCode::FAILURE
        }
    }
}
