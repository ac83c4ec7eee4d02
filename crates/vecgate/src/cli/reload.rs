//! `vecgate reload`: a whole configuration file applied live, its plan
//! printed.

use super::{finish, json, print_or_json, resolve, typed, Target};
use std::process::ExitCode;
use vecgate_control::model::ReloadPlan;

/// `vecgate reload --config F [--dry-run]`: F is validated here first
/// (every error printed as `F:LINE: message`, as `vecgate check` does,
/// and nothing sent), then sent whole to the gateway (`POST /config`),
/// which plans and applies the difference or refuses it whole. The plan
/// is printed like `terraform plan`: `+` added, `-` removed, `~` changed.
pub fn reload(t: &Target, dry_run: bool) -> ExitCode {
    let Some(path) = &t.config else {
        eprintln!("vecgate reload: --config FILE is required (the file to apply)");
        return ExitCode::from(2);
    };
    let text = match std::fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("vecgate reload: cannot read {}: {e}", path.display());
            return ExitCode::from(2);
        }
    };
    if let Err(diags) = vecgate_config::parse(&text) {
        for d in &diags {
            eprintln!("{}:{}: {}", path.display(), d.line, d.message);
        }
        eprintln!(
            "{}: {} error(s), nothing reloaded",
            path.display(),
            diags.len()
        );
        return ExitCode::from(1);
    }
    finish((|| {
        let c = resolve(t)?;
        let q = if dry_run {
            "/config?dry_run=true"
        } else {
            "/config"
        };
        let r = c.ok(c.request_typed("POST", q, Some(&text), "application/toml")?)?;
        let v = json(&r)?;
        let plan: ReloadPlan = typed(&v)?;
        print_or_json(t, &v, |_| plan_text(&plan, dry_run));
        Ok(())
    })())
}

/// The plan as `terraform plan` prints it, one object per line.
fn plan_text(plan: &ReloadPlan, dry_run: bool) -> String {
    let mut out = String::new();
    let (mut add, mut change, mut remove, mut restart) = (0, 0, 0, 0);
    for c in &plan.changes {
        match c.op.as_str() {
            "+" => add += 1,
            "-" => remove += 1,
            _ => change += 1,
        }
        out.push_str(&format!("{} {} {}", c.op, c.object, c.name));
        if !c.detail.is_empty() {
            out.push_str(&format!(": {}", c.detail));
        }
        if let Some(r) = &c.restart {
            restart += 1;
            out.push_str(&format!(" (needs a restart: {r})"));
        }
        out.push('\n');
    }
    for d in &plan.done {
        out.push_str(&format!("  {d}\n"));
    }
    if plan.changes.is_empty() {
        out.push_str("No changes: the running configuration is the file's.\n");
    } else if dry_run {
        out.push_str(&format!(
            "Plan: {add} to add, {change} to change, {remove} to remove (dry run, nothing applied).\n"
        ));
        if restart > 0 {
            out.push_str(&format!(
                "{restart} change(s) need a restart: `vecgate reload` refuses this file.\n"
            ));
        }
    } else {
        out.push_str(&format!(
            "Applied: {add} added, {change} changed, {remove} removed.\n"
        ));
    }
    out
}
