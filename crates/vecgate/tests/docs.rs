//! The documentation checked against itself and the code: every relative
//! link and anchor of README.md and docs/ resolves, every include names a
//! file, every page is in the book's table of contents, every task page of
//! the guide opens with a configuration, no user doc cites an issue number,
//! a dated run or a commit, and the reference pages are what `vecgate
//! gen-reference` writes from the code.

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

fn root() -> PathBuf {
    let r = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::canonicalize(&r).unwrap_or(r)
}

/// One Markdown file: its headings' anchors, links (with their line) and
/// includes, as mdBook and GitHub read them.
struct Page {
    anchors: BTreeSet<String>,
    links: Vec<(usize, String)>,
    includes: Vec<(usize, String)>,
    /// (heading level, line) and the first fenced code block's language
    /// and line, for the guide's "opens with a configuration" rule.
    first_h2_line: Option<usize>,
    first_code: Option<(usize, String)>,
}

/// The anchor mdBook and GitHub give a heading: lowercase, alphanumerics,
/// `-` and `_` kept, whitespace to `-`, everything else dropped.
fn slug(text: &str) -> String {
    text.chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_ascii_lowercase())
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

fn parse(text: &str) -> Page {
    let mut page = Page {
        anchors: BTreeSet::new(),
        links: Vec::new(),
        includes: Vec::new(),
        first_h2_line: None,
        first_code: None,
    };
    let mut heading: Option<String> = None;
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let opts = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
    for (ev, range) in Parser::new_ext(text, opts).into_offset_iter() {
        match ev {
            Event::Start(Tag::Heading { level, .. }) => {
                if level == HeadingLevel::H2 && page.first_h2_line.is_none() {
                    page.first_h2_line = Some(line_of(text, range.start));
                }
                heading = Some(String::new());
            }
            Event::End(TagEnd::Heading(_)) => {
                let h = heading.take().unwrap_or_default();
                let base = slug(&h);
                let n = seen.entry(base.clone()).or_insert(0);
                let anchor = if *n == 0 {
                    base.clone()
                } else {
                    format!("{base}-{n}")
                };
                *n += 1;
                page.anchors.insert(anchor);
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                page.links
                    .push((line_of(text, range.start), dest_url.to_string()));
            }
            Event::Start(Tag::CodeBlock(kind)) if page.first_code.is_none() => {
                let lang = match kind {
                    pulldown_cmark::CodeBlockKind::Fenced(l) => l.to_string(),
                    pulldown_cmark::CodeBlockKind::Indented => String::new(),
                };
                page.first_code = Some((line_of(text, range.start), lang));
            }
            _ => {}
        }
    }
    for (i, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("{{#include ") {
            let tail = &rest[at + "{{#include ".len()..];
            let Some(end) = tail.find("}}") else { break };
            let target = tail[..end].split(':').next().unwrap_or("").trim();
            page.includes.push((i + 1, target.to_string()));
            rest = &tail[end..];
        }
    }
    page
}

/// `base` joined with a relative `rel`, `..` resolved lexically.
fn join(base: &Path, rel: &str) -> PathBuf {
    let mut out = base.to_path_buf();
    for c in Path::new(rel).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// Every problem with the relative links, anchors and includes of `files`
/// (paths under `root`), as `file:line: message`.
fn check_links(root: &Path, files: &[PathBuf]) -> Vec<String> {
    let mut pages: BTreeMap<PathBuf, Page> = BTreeMap::new();
    let mut problems = Vec::new();
    let load = |p: &Path, pages: &mut BTreeMap<PathBuf, Page>| -> bool {
        if pages.contains_key(p) {
            return true;
        }
        match std::fs::read_to_string(p) {
            Ok(t) => {
                pages.insert(p.to_path_buf(), parse(&t));
                true
            }
            Err(_) => false,
        }
    };
    for f in files {
        load(f, &mut pages);
    }
    for f in files {
        let Some(page) = pages.get(f) else {
            problems.push(format!("{}: cannot be read", f.display()));
            continue;
        };
        let name = f.strip_prefix(root).unwrap_or(f).display().to_string();
        let dir = f.parent().unwrap_or(root).to_path_buf();
        let links = page.links.clone();
        let includes = page.includes.clone();
        for (line, inc) in includes {
            if !join(&dir, &inc).is_file() {
                problems.push(format!("{name}:{line}: include of a missing file {inc}"));
            }
        }
        for (line, url) in links {
            if url.contains("://") || url.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match url.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (url.as_str(), None),
            };
            let target = if path.is_empty() {
                f.clone()
            } else {
                join(&dir, path)
            };
            if !target.exists() {
                problems.push(format!("{name}:{line}: link to a missing file {url}"));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            if target.extension().and_then(|e| e.to_str()) != Some("md") {
                continue;
            }
            if !load(&target, &mut pages) {
                problems.push(format!("{name}:{line}: {url}: cannot read its target"));
                continue;
            }
            if !pages[&target].anchors.contains(anchor) {
                problems.push(format!("{name}:{line}: link to a missing anchor {url}"));
            }
        }
    }
    problems
}

fn md_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            md_files(&p, out);
        } else if p.extension().and_then(|e| e.to_str()) == Some("md") {
            out.push(p);
        }
    }
}

/// README.md, everything under docs/, and the READMEs inside crates/ and
/// examples/: what users read.
fn user_docs() -> Vec<PathBuf> {
    let root = root();
    let mut files = vec![root.join("README.md")];
    md_files(&root.join("docs"), &mut files);
    md_files(&root.join("examples"), &mut files);
    for entry in std::fs::read_dir(root.join("crates")).expect("crates/") {
        let crate_dir = entry.expect("crate dir").path();
        let mut f = Vec::new();
        md_files(&crate_dir, &mut f);
        files.extend(
            f.into_iter()
                .filter(|p| !p.components().any(|c| c.as_os_str() == "target")),
        );
    }
    files
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let problems = check_links(&root(), &user_docs());
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

/// The checker itself finds what it is for: a missing file, a missing
/// anchor, a missing include; and accepts a good link to a heading with
/// code and punctuation in it, and a repeated heading's second anchor.
#[test]
fn the_link_checker_finds_broken_links() {
    let dir = std::env::temp_dir().join(format!("vecgate-docs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(
        dir.join("sub/b.md"),
        "# B\n\n## The `[ha]` keys, step 2\n\n## Notes\n\n## Notes\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("a.md"),
        "# A\n\n[ok](sub/b.md#the-ha-keys-step-2) [ok2](sub/b.md#notes-1) [self](#a)\n\
         [gone](sub/c.md) [bad anchor](sub/b.md#nope)\n\n\
         ```toml\n{{#include sub/missing.toml}}\n```\n\n`[not a link](x.md)`\n",
    )
    .unwrap();
    let problems = check_links(&dir, &[dir.join("a.md")]);
    let _ = std::fs::remove_dir_all(&dir);
    let mut problems = problems;
    problems.sort();
    assert_eq!(
        problems,
        [
            "a.md:4: link to a missing anchor sub/b.md#nope",
            "a.md:4: link to a missing file sub/c.md",
            "a.md:7: include of a missing file sub/missing.toml",
        ]
    );
}

/// Every page under docs/ is in the book's table of contents, so adding a
/// page is one file plus one SUMMARY.md line, never only the file.
#[test]
fn every_page_is_in_the_summary() {
    let docs = root().join("docs");
    let summary = parse(&std::fs::read_to_string(docs.join("SUMMARY.md")).expect("SUMMARY.md"));
    let listed: BTreeSet<PathBuf> = summary.links.iter().map(|(_, l)| join(&docs, l)).collect();
    let mut files = Vec::new();
    md_files(&docs, &mut files);
    let missing: Vec<String> = files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n != "SUMMARY.md") && !listed.contains(*f))
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "pages not in docs/SUMMARY.md: {missing:#?}"
    );
}

/// Each task page of the guide opens with a configuration a reader can
/// copy: its first code block, before its first section, is TOML.
#[test]
fn guide_pages_open_with_a_configuration() {
    // Pages whose task has no configuration of its own.
    const EXEMPT: &[&str] = &["reload.md", "troubleshooting.md"];
    let mut files = Vec::new();
    md_files(&root().join("docs/guide"), &mut files);
    assert!(files.len() >= 10, "the guide has {} pages", files.len());
    let mut bad = Vec::new();
    for f in files {
        if EXEMPT.iter().any(|e| f.ends_with(e)) {
            continue;
        }
        let page = parse(&std::fs::read_to_string(&f).unwrap());
        let opens = match (&page.first_code, page.first_h2_line) {
            (Some((line, lang)), h2) => lang == "toml" && h2.is_none_or(|h| *line < h),
            (None, _) => false,
        };
        if !opens {
            bad.push(f.display().to_string());
        }
    }
    assert!(
        bad.is_empty(),
        "guide pages that do not open with a TOML configuration: {bad:#?}"
    );
}

/// Words for users, not for the project's history: no issue numbers,
/// dated runs or commit hashes in what users read.
#[test]
fn user_docs_cite_no_issue_date_or_commit() {
    let mut bad = Vec::new();
    let mut files = user_docs();
    // The OpenAPI document, whose descriptions come from doc comments.
    files.push(root().join("docs/reference/openapi.json"));
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for (i, line) in text.lines().enumerate() {
            let lower = line.to_ascii_lowercase();
            let mut why = None;
            if let Some(at) = lower.find("issue ") {
                if lower[at + 6..].starts_with(|c: char| c.is_ascii_digit()) {
                    why = Some("an issue number");
                }
            }
            if has_date(line) {
                why = Some("a dated run");
            }
            if has_commit(line) {
                why = Some("a commit hash");
            }
            if let Some(why) = why {
                bad.push(format!("{}:{}: {why}: {line}", f.display(), i + 1));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// `YYYY-MM-DD` with a 20xx year.
fn has_date(line: &str) -> bool {
    let b = line.as_bytes();
    (0..b.len().saturating_sub(9)).any(|i| {
        let w = &b[i..i + 10];
        w[0] == b'2'
            && w[1] == b'0'
            && w[2..4].iter().all(u8::is_ascii_digit)
            && w[4] == b'-'
            && w[5..7].iter().all(u8::is_ascii_digit)
            && w[7] == b'-'
            && w[8..10].iter().all(u8::is_ascii_digit)
    })
}

/// A word of 7 to 40 lowercase hex digits with both a letter and a digit,
/// as a commit hash is written (`0x…` numbers and longer keys are not).
fn has_commit(line: &str) -> bool {
    line.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| {
        (7..=40).contains(&w.len())
            && w.chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
            && w.chars().any(|c| c.is_ascii_digit())
            && w.chars().any(|c| c.is_ascii_alphabetic())
    })
}

#[test]
fn the_history_checks_find_what_they_look_for() {
    assert!(has_date("the run of 2026-11-27 16:31 UTC"));
    assert!(!has_date("RFC 4303 §3.4.3, 1500-byte frames"));
    assert!(has_commit("release build of 57c4022"));
    assert!(has_commit("2bd4498 against 2617af2"));
    assert!(!has_commit("spi = 0x00001001, feedface, 1234567"));
}

/// The reference pages are what `vecgate gen-reference` writes from the
/// code now: a key, verb, metric or REST path added or removed in the
/// code without `make reference` fails here, and so does a key without a
/// meaning in the generator's table or a meaning for a key that is gone
/// (the generator refuses both).
#[test]
fn the_reference_is_what_the_code_generates() {
    let dir = std::env::temp_dir().join(format!("vecgate-reference-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vecgate"))
        .arg("gen-reference")
        .arg(&dir)
        .output()
        .expect("run vecgate gen-reference");
    assert!(
        out.status.success(),
        "vecgate gen-reference failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let committed = root().join("docs/reference");
    let mut stale = Vec::new();
    for name in [
        "config.md",
        "cli.md",
        "metrics.md",
        "api.md",
        "openapi.json",
    ] {
        let new = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        let old = std::fs::read_to_string(committed.join(name)).unwrap_or_default();
        if new != old {
            stale.push(name);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        stale.is_empty(),
        "docs/reference/{stale:?} differ from what the code generates: run `make reference` and commit"
    );
}

/// Every metric name the control crate registers is in the metrics
/// reference, and every name there is registered.
#[test]
fn the_metrics_reference_names_every_registered_metric() {
    let mut code = BTreeSet::new();
    let mut files = Vec::new();
    rs_files(&root().join("crates/control/src"), &mut files);
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        // Registrations, not the unit tests that read the output back.
        let text = text.split("#[cfg(test)]").next().unwrap_or("");
        for part in text.split('"').skip(1).step_by(2) {
            if part.starts_with("vecgate_")
                && part.len() > "vecgate_".len()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            {
                code.insert(part.to_string());
            }
        }
    }
    let page = std::fs::read_to_string(root().join("docs/reference/metrics.md")).unwrap();
    let documented: BTreeSet<String> = page
        .lines()
        .filter_map(|l| l.strip_prefix("| `vecgate_"))
        .filter_map(|l| l.split('`').next())
        .map(|n| {
            let n = format!("vecgate_{n}");
            n.strip_suffix("_total").map(str::to_string).unwrap_or(n)
        })
        .collect();
    let missing: Vec<_> = code.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&code).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "registered but not in the reference: {missing:?}; in the reference but not registered: {extra:?}"
    );
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for p in rd.filter_map(|e| e.ok().map(|e| e.path())) {
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().and_then(|e| e.to_str()) == Some("rs")
            && p.file_name().is_none_or(|n| n != "tests.rs")
        {
            out.push(p);
        }
    }
}

/// `make docs` works: mdBook (installed by `make deps`) builds the book,
/// includes and all, without the network.
#[test]
fn the_book_builds() {
    let out_dir = std::env::temp_dir().join(format!("vecgate-book-{}", std::process::id()));
    let out = std::process::Command::new("mdbook")
        .arg("build")
        .arg("--dest-dir")
        .arg(&out_dir)
        .arg(root())
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => panic!("mdbook: {e} (make deps installs it: scripts/install-deps.sh)"),
    };
    let index = out_dir.join("guide/first-gateway.html");
    let page = std::fs::read_to_string(&index).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&out_dir);
    assert!(
        out.status.success(),
        "mdbook build failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The example was included, not left as a directive.
    assert!(
        page.contains("veth-lan") && !page.contains("{{#include"),
        "{index:?}"
    );
}
