//! Policy Bundles and Execution Profiles.

use ledger_schema::Event;
use ledger_schema::events::{ExecutionProfileInstalled, InputClosure, PolicyBundle, PolicyBundleInstalled};

use super::command::{InstallPolicy, InstallProfile};
use super::state::{PolicyState, ProfileState, State};
use super::{
    MAX_EVENT_BYTES, MAX_FEEDBACK_ITEM_BYTES, MAX_FEEDBACK_ITEMS, Rule, RuleViolation, ensure, fresh, list,
    required_text,
};

pub fn decide_policy(c: &InstallPolicy) -> Event {
    Event::PolicyBundleInstalled(PolicyBundleInstalled {
        policy_id: c.policy_id,
        digest: c.bundle.digest(),
        bundle: c.bundle.clone(),
    })
}

pub fn decide_profile(c: &InstallProfile) -> Event {
    Event::ExecutionProfileInstalled(ExecutionProfileInstalled {
        profile_id: c.profile_id,
        digest: c.profile.digest(),
        profile: c.profile.clone(),
    })
}

/// The least `maxEventBytes` under which every kind of Worker event can be admitted in its
/// smallest form — a one-byte text (a compaction event: empty), no items — at any observed
/// time (the widest `observedAtMs`, 20 digits: outside review 88, a truthful 13-digit
/// clock opened a compaction it could not close at 79–80), in canonical JSON bytes, as
/// `maxEventBytes` counts them: the largest is COMPACTION_COMPLETED's (a compaction that
/// could open but never close would hold back every result: outside review 86), above
/// COMPLETION_REQUEST's (outside review 84).
pub fn least_max_event_bytes() -> u32 {
    use ledger_schema::events::{WorkerEventKind as K, WorkerPayload};
    let least = |kind| {
        let text = if matches!(kind, K::CompactionStarted | K::CompactionCompleted) { "" } else { "x" };
        super::worker::canonical_json_len(&WorkerPayload {
            kind,
            text: text.to_owned(),
            items: Vec::new(),
            observed_at_ms: u64::MAX,
        })
    };
    let kinds = [
        K::Progress,
        K::ToolActivity,
        K::CompactionStarted,
        K::CompactionCompleted,
        K::Proposals,
        K::CompletionRequest,
    ];
    let bytes = kinds.into_iter().map(least).max().unwrap_or(0);
    u32::try_from(bytes).unwrap_or(u32::MAX)
}

fn check_bundle(b: &PolicyBundle) -> Result<(), RuleViolation> {
    // No smaller than the smallest result (outside review 84: a policy under which no
    // result event could ever be admitted was installed, and its workflows ran).
    let least = least_max_event_bytes();
    ensure!(
        b.max_event_bytes >= least,
        Rule::PolicyBounds,
        "maxEventBytes {} is not within {least}..={MAX_EVENT_BYTES} (below {least} some kind of Worker event — the smallest COMPACTION_COMPLETED — could never be admitted)",
        b.max_event_bytes
    );
    // The reason above is the lower bound's; the upper one is the ledger's own (outside
    // review 95 F3: an over-large value was told about the lower bound).
    ensure!(
        b.max_event_bytes <= MAX_EVENT_BYTES,
        Rule::PolicyBounds,
        "maxEventBytes {} is not within {least}..={MAX_EVENT_BYTES} (over {MAX_EVENT_BYTES}, the largest Worker payload the ledger records)",
        b.max_event_bytes
    );
    let f = &b.feedback;
    ensure!(
        (1..=MAX_FEEDBACK_ITEMS).contains(&f.max_items),
        Rule::PolicyBounds,
        "feedback maxItems {} is not within 1..={MAX_FEEDBACK_ITEMS}",
        f.max_items
    );
    ensure!(
        (1..=MAX_FEEDBACK_ITEM_BYTES).contains(&f.max_item_bytes),
        Rule::PolicyBounds,
        "feedback maxItemBytes {} is not within 1..={MAX_FEEDBACK_ITEM_BYTES}",
        f.max_item_bytes
    );
    ensure!(f.max_total_bytes >= 1, Rule::PolicyBounds, "feedback maxTotalBytes is 0");
    ensure!(
        b.budgets.windows(2).all(|w| matches!(w, [a, b] if a.class < b.class)),
        Rule::PolicyBounds,
        "budgets must be sorted by class, one per class"
    );
    ensure!(
        b.phases.windows(2).all(|w| matches!(w, [a, b] if a.phase < b.phase)),
        Rule::PolicyBounds,
        "phase policies must be sorted by phase, one per phase"
    );
    for p in &b.phases {
        list("phase capabilities", &p.capabilities)?;
        required_text("phase objective", &p.objective)?;
        // IDENTITY, PHASE and GOAL are always required (the compiler takes them whatever the
        // phase says): listed as optional, the stored policy would say what it does not
        // mean (outside review 128 F4).
        use ledger_schema::types::InputClass;
        let always = [InputClass::Identity, InputClass::Phase, InputClass::Goal];
        if let Some(class) = p.optional.iter().find(|c| always.contains(c)) {
            return Err(super::violation(
                Rule::PolicyBounds,
                format!(
                    "phase {} lists {} as optional: IDENTITY, PHASE and GOAL are always required (list them as required, or leave them out)",
                    super::wire(&p.phase),
                    super::wire(class)
                ),
            ));
        }
        // Each input class once: required or optional, not both, not twice.
        let mut seen = std::collections::BTreeSet::new();
        if let Some(twice) = p.required.iter().chain(&p.optional).find(|c| !seen.insert(**c)) {
            return Err(super::violation(
                Rule::PolicyBounds,
                format!(
                    "phase {} lists the input class {} twice (required and optional are disjoint sets)",
                    super::wire(&p.phase),
                    super::wire(twice)
                ),
            ));
        }
    }
    list("invariants", &b.invariants)
}

pub fn apply_policy(state: &mut State, e: &PolicyBundleInstalled) -> Result<(), RuleViolation> {
    fresh(&state.policies, e.policy_id, "policy")?;
    check_bundle(&e.bundle)?;
    let digest = e.bundle.digest();
    ensure!(
        e.digest == digest,
        Rule::AuthorityDigest,
        "policy digest {} is not the content's {digest}",
        e.digest
    );
    state.policies.insert(e.policy_id, PolicyState { digest, bundle: e.bundle.clone() });
    Ok(())
}

/// An input closure's own form, in a profile or a claim: each list a set sorted by name (at
/// most `MAX_ITEMS`), each name one line of deliverable text.
pub(crate) fn check_closure(what: &str, c: &InputClosure) -> Result<(), RuleViolation> {
    for (list, items) in [("instructionSources", &c.instruction_sources), ("tools", &c.tools)] {
        ensure!(
            items.len() <= super::MAX_ITEMS,
            Rule::OutOfBounds,
            "{what} {list} holds {} items, over {}",
            items.len(),
            super::MAX_ITEMS
        );
        ensure!(
            items.windows(2).all(|w| matches!(w, [a, b] if a.name < b.name)),
            Rule::InputClosure,
            "{what} {list} must be sorted by name, each name once"
        );
        for item in items {
            required_text(list, &item.name)?;
            ensure!(
                !item.name.contains(['\n', '\r']),
                Rule::InputClosure,
                "{what} {list} name {:?} is not one line",
                item.name
            );
        }
    }
    Ok(())
}

/// The surfaces seed 000 disables for the bounded profile ("Candidate-local config,
/// hooks, plugins, MCP, apps, skills, subagents, dynamic tools, and Web Search are disabled
/// for the bounded profile"), read from a bound tool's or instruction source's name: the name
/// after NFKC, lower-cased, each letter read as the ASCII it is confusable with, split into
/// words at every other character — a word `hook(s)`, `plugin(s)`, `mcp`, `mcps` or one
/// beginning `mcp`, `app(s)`, `skill(s)`, `subagent(s)` or `dynamic`; `web` beside a word
/// beginning `search` (or one word beginning `websearch`); `sub` before `agent(s)`, `plug`
/// before `in(s)`, `model context protocol`; and for an instruction source also `config` or
/// `settings` (outside review 93: `mcp__server__tool`, ` mcp:x`, `ｍｃｐ:x`, `hooks:x`,
/// `search_web` and instruction sources were not read). The name is read twice — as
/// written, and split at camelCase and letter–digit boundaries (`mcpServer`, `MCPClient`,
/// `WebSearchTool`, `mcp2server`: outside review 108) — and refused if either reading holds
/// such a word (outside review 109: the split alone let `SubAgents`, `MCPs` and `SKILLs`
/// through).
pub(crate) fn disabled_surface(name: &str, source: bool) -> Option<&'static str> {
    use unicode_normalization::UnicodeNormalization;
    use unicode_normalization::char::is_combining_mark;
    // An instruction source is read by its file name and by the provider directories on its
    // path — not by every directory: a nested `AGENTS.md` under `src/config/` or a React
    // `src/hooks/` is project guidance, not a disabled surface (outside review 110).
    let name = if source {
        let parts: Vec<&str> = name.split(['/', '\\']).collect();
        let file = parts.last().copied().unwrap_or(name);
        // A directory's name read as a word is (NFKC, soft hyphens dropped, each letter's
        // skeleton, lower-cased: `.ｃｌａｕｄｅ`, `.cIaude`; outside review 111).
        let key = |p: &str| -> String {
            p.nfkc()
                .filter(|c| *c != '\u{AD}')
                .flat_map(|c| {
                    let mut one = [0u8; 4];
                    unicode_security::skeleton(c.encode_utf8(&mut one)).collect::<Vec<char>>()
                })
                .flat_map(char::to_lowercase)
                .collect()
        };
        // Guidance files (`AGENTS.md`, `CLAUDE.md` and their override/local forms) and
        // Claude Code's `rules/` are project memory wherever they sit; anything else in a
        // provider's directory is its configuration (outside review 111: `.claude/CLAUDE.md`
        // and `~/.codex/AGENTS.md` were refused).
        let is = |p: &str, names: &[&str]| names.iter().any(|n| key(n) == key(p));
        let guidance = is(file, &["AGENTS.md", "CLAUDE.md", "AGENTS.override.md", "CLAUDE.local.md"])
            || parts.windows(2).any(|w| matches!(w, [d, r] if is(d, &[".claude"]) && is(r, &["rules"])));
        let mut dirs = parts.iter().take(parts.len().saturating_sub(1));
        if !guidance && dirs.any(|d| is(d, &[".codex", ".claude", ".agents", ".mcp"])) {
            return Some("candidate-local config");
        }
        file
    } else {
        name
    };
    // Accents and soft hyphens are not letters of the word (outside review 110: `mc\u{AD}p`,
    // a soft hyphen inside, and `hoók` passed).
    let chars: Vec<char> =
        name.nfd().filter(|c| !is_combining_mark(*c) && *c != '\u{AD}').collect::<String>().nfkc().collect();
    let mut split = String::with_capacity(name.len());
    for (i, &c) in chars.iter().enumerate() {
        let before = i.checked_sub(1).and_then(|b| chars.get(b));
        let after = chars.get(i + 1);
        // A word begins at an upper-case letter after a lower-case letter or a digit
        // (`useMcp`), at the last of a run of capitals before a lower-case letter
        // (`MCPClient`), and where letters and digits meet (`mcp2server`).
        // (Not before a plural's lone `s`: `MCPs`, `myCONFIGs`.)
        let plural = after == Some(&'s') && !chars.get(i + 2).is_some_and(|n| n.is_lowercase());
        let starts = (c.is_uppercase()
            && (before.is_some_and(|b| b.is_lowercase() || b.is_numeric())
                || (before.is_some_and(|b| b.is_uppercase())
                    && after.is_some_and(|a| a.is_lowercase())
                    && !plural)))
            || before.is_some_and(|b| {
                b.is_alphabetic() != c.is_alphabetic() && b.is_alphanumeric() && c.is_alphanumeric()
            });
        if starts {
            split.push(' ');
        }
        split.push(c);
    }
    let as_written: String = chars.iter().collect();
    surface_in(&as_written, source).or_else(|| surface_in(&split, source))
}

/// [`disabled_surface`] over one reading of a name: lower-cased, each non-ASCII letter
/// then read as the ASCII its UTS 39 skeleton gives — and again with every letter read so
/// before lower-casing (`pIugin`: a capital I reads as `l`; outside review 110).
fn surface_in(name: &str, source: bool) -> Option<&'static str> {
    let skeleton = |c: char| {
        let mut one = [0u8; 4];
        unicode_security::skeleton(c.encode_utf8(&mut one)).collect::<String>()
    };
    let mut lowered = String::new();
    let mut skeletal = String::new();
    for c in name.chars() {
        for l in c.to_lowercase() {
            if l.is_ascii() || !l.is_alphabetic() {
                lowered.push(l);
            } else {
                lowered.extend(skeleton(l).chars().flat_map(char::to_lowercase));
            }
        }
        if c.is_alphabetic() {
            skeletal.extend(skeleton(c).chars().flat_map(char::to_lowercase));
        } else {
            skeletal.extend(c.to_lowercase());
        }
    }
    words_hold_surface(&lowered, source).or_else(|| words_hold_surface(&skeletal, source))
}

/// The surface one word names, if any ([`disabled_surface`]).
fn surface_word(w: &str, source: bool) -> Option<&'static str> {
    Some(match w {
        "hook" | "hooks" => "hooks",
        "plugin" | "plugins" => "plugins",
        _ if w.contains("mcp") || w.contains("modelcontextprotocol") => "MCP",
        "app" | "apps" => "apps",
        "skill" | "skills" => "skills",
        "subagent" | "subagents" => "subagents",
        "dynamic" => "dynamic tools",
        _ if w.starts_with("websearch") || w == "searchweb" || w.starts_with("webfetch") => "Web Search",
        "config" | "configs" | "settings" if source => "candidate-local config",
        // A tool's name only (an instruction source's file name is read above): an agent
        // started from the tool, a plugin by its word's beginning, slash commands, browser
        // automation (outside review 113 F4: `multi_agent`, `run_codex`, `pluginloader`,
        // `SlashCommand`, `playwright` passed). `agent(s)`, `codex` and `claude` are read in
        // context ([`words_hold_surface`]: not `user_agent`, not `AGENTS.md`).
        _ if source => return None,
        "multiagent" | "multiagents" | "subtask" | "subtasks" => "subagents",
        _ if w.starts_with("plugin") => "plugins",
        "slashcommand" | "slashcommands" => "skills",
        "websearcher" | "webbrowser" | "crawler" | "scraper" | "firecrawl" | "tavily" | "kagi"
        | "searxng" | "serper" | "serpapi" | "stagehand" | "browserbase" => "Web Search",
        "a2a" | "clink" => "subagents",
        "toolsearch" => "dynamic tools",
        // Claude Code's hook events, as tool names.
        "pretooluse" | "posttooluse" | "userpromptsubmit" | "sessionstart" | "sessionend"
        | "subagentstop" | "precompact" => "hooks",
        _ => return None,
    })
}

/// The surface a folded name's words hold, if any ([`disabled_surface`]).
fn words_hold_surface(folded: &str, source: bool) -> Option<&'static str> {
    // Digits between words do not separate them (`web2search`).
    let words: Vec<&str> = folded
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty() && !w.chars().all(|c| c.is_ascii_digit()))
        .collect();
    // Letters spelled apart are one word (`M C P`, `h.o.o.k.s`; outside review 111).
    let mut joined: Vec<String> = Vec::new();
    let mut run = String::new();
    for w in &words {
        if w.len() == 1 {
            run.push_str(w);
        } else if !run.is_empty() {
            joined.push(std::mem::take(&mut run));
        }
    }
    if !run.is_empty() {
        joined.push(run);
    }
    if let Some(found) = joined.iter().filter(|w| w.len() > 1).find_map(|w| surface_word(w, source)) {
        return Some(found);
    }
    let word = |w: &str| surface_word(w, source);
    // Claude Code's subagent tools are named `Task` and `Agent`.
    let whole =
        (!source && matches!(words.as_slice(), ["task"] | ["agent"] | ["agents"])).then_some("subagents");
    // In a tool's name, `agent(s)`, `codex` or `claude` is an agent the tool starts — but
    // not a user agent, nor a guidance file (`read_agents_md`, `claude_md`).
    let agent = (!source)
        .then(|| {
            words.iter().enumerate().find_map(|(i, w)| {
                let before = i.checked_sub(1).and_then(|b| words.get(b)).copied();
                let after = words.get(i + 1).copied();
                (matches!(*w, "agent" | "agents" | "codex" | "claude")
                    && !matches!(before, Some("user" | "ssh" | "gpg"))
                    // (`rnd`: `md` through its skeleton, which reads `m` as `rn`.)
                    && !matches!(after, Some("md" | "rnd" | "local" | "override")))
                .then_some("subagents")
            })
        })
        .flatten();
    let whole = whole.or(agent).or_else(|| (!source).then(|| tool_surface(&words)).flatten());
    whole
        .or_else(|| words.iter().find_map(|w| word(w)))
        .or_else(|| {
            words.windows(2).find_map(|p| match p {
                ["web", s] | [s, "web"] if s.starts_with("search") => Some("Web Search"),
                // (Search engines, fetching, workers, delegation and tool registration:
                // `tool_surface`, in any order.)
                // Browsing and fetching the web (outside review 120 F4).
                ["browse" | "surf" | "crawl", "web" | "internet"]
                | ["web", "browse" | "get" | "lookup" | "page" | "pages" | "scrape"]
                | ["read" | "open" | "scrape" | "visit" | "crawl" | "download", "url" | "urls" | "webpage"]
                | ["http", "get" | "request"]
                    if !source =>
                {
                    Some("Web Search")
                }
                ["new", "task"] | [_, "subagent"] if !source => Some("subagents"),
                ["sub", "agent" | "agents"]
                | ["spawn" | "dispatch" | "resume" | "close" | "send" | "message", "agent" | "agents"]
                | ["delegate", "task"] => Some("subagents"),
                ["sub", "task" | "tasks"] if !source => Some("subagents"),
                ["slash", "command" | "commands"] if !source => Some("skills"),
                ["plug", "in" | "ins"] => Some("plugins"),
                _ => None,
            })
        })
        .or_else(|| {
            words.windows(3).find_map(|t| match t {
                ["model", "context", "protocol"] => Some("MCP"),
                [s, "the", "web"] if s.starts_with("search") => Some("Web Search"),
                _ => None,
            })
        })
}

/// The surface a tool's name holds by its words together, in any order (outside reviews
/// 120 F3/F4 and 126 F3/F4: `website_fetch`, `worker_fork`, `perplexity_ask`, `ToolSearch`,
/// `session_start`, `fetch`, `brave_local_search` passed while their twins were refused) —
/// and not where a word shows the tool is ordinary (126 F7: `run_playwright_tests`,
/// `spawn_worker_thread`, `search_google_drive`, `delegate_permissions`).
fn tool_surface(words: &[&str]) -> Option<&'static str> {
    // (A word is also read with `rn` as `m`: the skeleton reading spells `m` so.)
    let has =
        |set: &[&str]| words.iter().any(|w| set.contains(w) || set.contains(&w.replace("rn", "m").as_str()));
    let starts = |prefix: &str| words.iter().any(|w| w.starts_with(prefix));
    let seq = |run: &[&str]| words.windows(run.len()).any(|w| w == run);
    const ENGINES: [&str; 18] = [
        "google",
        "internet",
        "bing",
        "online",
        "duckduckgo",
        "ddg",
        "brave",
        "tavily",
        "perplexity",
        "exa",
        "serp",
        "serpapi",
        "serper",
        "kagi",
        "searxng",
        "jina",
        "linkup",
        "yandex",
    ];
    const WEB: [&str; 13] = [
        "url", "urls", "webpage", "website", "web", "http", "https", "html", "markdown", "page", "json",
        "txt", "baidu",
    ];
    if has(&["test", "tests", "compat"]) && has(&["playwright", "puppeteer", "browser"]) {
        return None;
    }
    let web = (has(&ENGINES) && starts("search") && !has(&["drive", "docs", "sheets", "calendar"]))
        || (has(&["perplexity"]) && has(&["ask", "research", "reason"]))
        || (has(&["fetch"]) && (words.len() == 1 || has(&WEB)))
        || has(&["playwright", "puppeteer"])
        || words.iter().enumerate().any(|(i, w)| {
            *w == "browser"
                && !matches!(i.checked_sub(1).and_then(|b| words.get(b)), Some(&("file" | "files")))
        })
        || seq(&["navigate", "page"])
        || seq(&["new", "page"])
        || (has(&["chrome"]) && has(&["navigate", "web"]));
    let workers = has(&["worker", "workers"])
        && has(&["spawn", "fork", "launch", "start", "create", "run", "new"])
        && !has(&["pool", "thread", "threads", "process"]);
    let delegation = (has(&["delegate"]) && !has(&["permission", "permissions"]))
        || (has(&["handoff"]) && !has(&["notes", "note", "doc", "docs"]))
        || (has(&["ask"]) && has(&["gemini", "gpt", "llm", "model", "openai", "grok", "o3", "deepseek"]))
        || (has(&["consult"]) && has(&["llm", "model"]))
        || (has(&["chat"]) && has(&["completion", "completions"]));
    let hooks = seq(&["pre", "tool", "use"])
        || seq(&["post", "tool", "use"])
        || seq(&["user", "prompt", "submit"])
        || seq(&["session", "start"])
        || seq(&["session", "end"])
        || seq(&["pre", "compact"])
        || seq(&["subagent", "stop"]);
    let dynamic = has(&["tool", "tools"])
        && has(&["register", "define", "create", "add", "load", "enable", "install", "search"]);
    if web {
        Some("Web Search")
    } else if workers || delegation {
        Some("subagents")
    } else if hooks {
        Some("hooks")
    } else if dynamic {
        Some("dynamic tools")
    } else {
        None
    }
}

pub fn apply_profile(state: &mut State, e: &ExecutionProfileInstalled) -> Result<(), RuleViolation> {
    fresh(&state.profiles, e.profile_id, "profile")?;
    required_text("profile name", &e.profile.name)?;
    if let Some(c) = &e.profile.input_closure {
        check_closure("the profile's input closure", c)?;
        // The bounded (protected) profile binds none of the surfaces the seed disables for
        // it (outside review 90: `hook:pre-commit`, `mcp:github` and `web_search` were
        // bound, and claims reporting them dispatched).
        let surfaces = c.tools.iter().map(|t| ("tool", t, false));
        let surfaces = surfaces.chain(c.instruction_sources.iter().map(|t| ("instruction source", t, true)));
        if e.profile.protected
            && let Some((kind, item, what)) =
                surfaces.clone().find_map(|(k, t, src)| disabled_surface(&t.name, src).map(|w| (k, t, w)))
        {
            return Err(super::violation(
                Rule::InputClosure,
                format!(
                    "a protected profile binds no {what} ({kind} {:?}): seed 000 disables them for the bounded profile",
                    item.name
                ),
            ));
        }
    }
    // Seed 000: "Automatic triggering remains UNKNOWN and unselected by the bounded M2
    // Execution Profile" — the acceptance-critical (protected) one (outside review 77).
    ensure!(
        !(e.profile.protected && e.profile.compaction == ledger_schema::types::CompactionMode::Automatic),
        Rule::CompactionMode,
        "a protected (acceptance-critical) profile cannot select AUTOMATIC compaction: its triggering is unproven (seed 000); choose MANUAL or DISABLED"
    );
    let digest = e.profile.digest();
    ensure!(
        e.digest == digest,
        Rule::AuthorityDigest,
        "profile digest {} is not the content's {digest}",
        e.digest
    );
    state.profiles.insert(e.profile_id, ProfileState { digest, profile: e.profile.clone() });
    Ok(())
}

#[cfg(test)]
mod surface_tests {
    use super::disabled_surface;

    /// The readings outside reviews 110 and 111 asked for, and names that must still pass
    /// (the spellings of reviews 90–109 are held end to end by
    /// `rules_attempt::a_protected_profile_binds_no_surface_the_seed_disables`): each
    /// `(name, as an instruction source, refused)`.
    #[test]
    fn surface_names_are_read_as_written_and_split() {
        let cases: &[(&str, bool, bool)] = &[
            // Ordinary tools pass.
            ("apply_patch", false, false),
            ("shell", false, false),
            ("happyPath", false, false),
            ("Mapper", false, false),
            ("webhookless", false, false),
            ("readConfigFile", false, false),
            ("Index", false, false),
            ("exec_command", false, false),
            // A soft hyphen or an accent inside, a capital I for l, Claude Code's and
            // Codex's subagent and fetch tools, MCP at a word's end, a digit between (110).
            ("mc\u{AD}p", false, true),
            ("plu\u{AD}gin", false, true),
            ("ho\u{AD}oks", false, true),
            ("hoo\u{301}k", false, true),
            ("pIugin", false, true),
            ("skiII", false, true),
            ("Task", false, true),
            ("Agent", false, true),
            ("spawn_agent", false, true),
            ("delegate_task", false, true),
            ("google_search", false, true),
            ("internet_search", false, true),
            ("search_the_web", false, true),
            ("searchweb", false, true),
            ("WebFetch", false, true),
            ("servermcp", false, true),
            ("fastmcp", false, true),
            ("modelcontextprotocol", false, true),
            ("web2search", false, true),
            // Letters spelled apart, more search and agent tools (111).
            ("M C P", false, true),
            ("M-C-P", false, true),
            ("h.o.o.k.s", false, true),
            ("s k i l l s", false, true),
            ("W E B S E A R C H", false, true),
            ("dispatch_agent", false, true),
            ("resume_agent", false, true),
            ("brave_search", false, true),
            ("tavily_search", false, true),
            // Agents and workers a tool starts, plugins by a word's beginning, slash
            // commands, browser automation, URL fetching (113 F4) — and the ordinary names
            // the first reading of them refused (116 F5).
            ("multi_agent", false, true),
            ("parallel_agents", false, true),
            ("agent_spawn", false, true),
            ("spawn_worker", false, true),
            ("worker_spawn", false, true),
            ("run_subtask", false, true),
            ("sub_task", false, true),
            ("run_codex", false, true),
            ("codex_exec", false, true),
            ("claude", false, true),
            ("pluginloader", false, true),
            ("SlashCommand", false, true),
            ("playwright", false, true),
            ("fetch_url", false, true),
            ("url_fetch", false, true),
            ("git_fetch", false, false),
            ("start_server", false, false),
            ("run_tests", false, false),
            ("user_agent", false, false),
            ("get_user_agent", false, false),
            ("read_agents_md", false, false),
            ("read_claude_md", false, false),
            ("file_extension", false, false),
            ("db_connector", false, false),
            ("file_browser", false, false),
            ("get_url", false, false),
            ("get_page", false, false),
            ("start_process", false, false),
            ("spawn_process", false, false),
            ("start_task", false, false),
            ("compute_perplexity", false, false),
            ("hookup", false, false),
            // Search engines in either order, browsing, workers and delegation, hook
            // events, tool registration (outside review 120 F3, F4) — and what still passes.
            ("search_internet", false, true),
            ("searchInternet", false, true),
            ("search_google", false, true),
            ("ddg_search", false, true),
            ("serper_search", false, true),
            ("browse_web", false, true),
            ("get_web_page", false, true),
            ("read_url", false, true),
            ("http_fetch", false, true),
            ("browser", false, true),
            ("browser_navigate", false, true),
            ("firecrawl_scrape", false, true),
            ("delegate", false, true),
            ("delegate_to_worker", false, true),
            ("start_worker", false, true),
            ("new_task", false, true),
            ("ask_gemini", false, true),
            ("handoff", false, true),
            ("PreToolUse", false, true),
            ("register_tool", false, true),
            ("ssh_agent", false, false),
            ("gpg_agent", false, false),
            ("code_search", false, false),
            ("file_search", false, false),
            ("webpack", false, false),
            ("websocket_test", false, false),
            ("search_webpack_config", false, false),
            // Either order, more engines and services, snake-case hook events, tool
            // loading; ordinary names beside those words (outside review 126).
            ("website_fetch", false, true),
            ("FetchWeb", false, true),
            ("fetch_http", false, true),
            ("fetch", false, true),
            ("fetch_markdown", false, true),
            ("worker_fork", false, true),
            ("perplexity_ask", false, true),
            ("kagi_search", false, true),
            ("brave_local_search", false, true),
            ("tavily-extract", false, true),
            ("navigate_page", false, true),
            ("ToolSearch", false, true),
            ("load_tools", false, true),
            ("session_start", false, true),
            ("post_tool_use", false, true),
            ("ask_grok", false, true),
            ("consult_llm", false, true),
            ("fetch_rules", false, false),
            ("run_playwright_tests", false, false),
            ("run_browser_tests", false, false),
            ("spawn_worker_thread", false, false),
            ("start_worker_pool", false, false),
            ("search_google_drive", false, false),
            ("delegate_permissions", false, false),
            ("handoff_notes", false, false),
            ("codebase_search", false, false),
            ("search_and_replace", false, false),
            // Instruction sources: configuration, in a provider directory however spelled.
            ("CONFIGs", true, true),
            ("myCONFIGs", true, true),
            (".claude/settings.json", true, true),
            (".codex/con\u{AD}fig.toml", true, true),
            ("skills/x/SKILL.md", true, true),
            (".claude/agents/reviewer.md", true, true),
            (".\u{FF43}\u{FF4C}\u{FF41}\u{FF55}\u{FF44}\u{FF45}/commands/review.md", true, true),
            (".cIaude/agents/reviewer.md", true, true),
            // Guidance files are project memory wherever they sit (111), and ordinary
            // directories are not surfaces (110).
            (".claude/CLAUDE.md", true, false),
            (".claude/rules/style.md", true, false),
            ("/home/u/.codex/AGENTS.md", true, false),
            ("skills/AGENTS.md", true, false),
            ("docs/skills/README.md", true, false),
            ("src/config/AGENTS.md", true, false),
            ("app/AGENTS.md", true, false),
            ("src/hooks/AGENTS.md", true, false),
            ("packages/plugins/AGENTS.md", true, false),
        ];
        for &(name, source, refused) in cases {
            assert_eq!(disabled_surface(name, source).is_some(), refused, "{name} (source: {source})");
        }
    }
}
