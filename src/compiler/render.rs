//! The worker-facing Markdown rendering of a Context Package. Deterministic: the same
//! package always renders to the same text. The canonical identity is the package bytes.

use std::fmt::Write;

use ledger_schema::package::ContextPackage;

/// Renders `p` as Markdown.
pub fn markdown(p: &ContextPackage) -> String {
    let mut s = String::new();
    let id = &p.identity;
    let _ = writeln!(s, "# Context package (schema {})\n", p.schema_version);
    let _ = writeln!(s, "- goal: {} revision {}", id.goal_id, id.goal_revision);
    let _ = writeln!(s, "- workflow: {} version {}", id.workflow_id, id.workflow_version);
    let _ = writeln!(s, "- phase: {:?}", id.phase);
    let _ = writeln!(s, "- attempt: {}", id.attempt_id);
    if let (Some(g), Some(d)) = (id.candidate_generation_id, id.candidate_base_digest) {
        let _ = writeln!(s, "- candidate generation: {g} (base {d})");
    }
    if let Some(plan) = id.plan {
        let _ = writeln!(s, "- acceptance-critical verification plan: {} {}", plan.id, plan.digest);
    }
    let _ = writeln!(s, "- policy: {} {}", p.policy_bundle.id, p.policy_bundle.digest);
    let _ = writeln!(s, "- execution profile: {} {}", p.execution_profile.id, p.execution_profile.digest);
    let _ = writeln!(s, "\n## Phase objective\n\n{}\n", paragraph(&p.phase_objective));
    list(&mut s, "Capabilities", &p.capability_grant.capabilities);
    list(&mut s, "Invariants (non-negotiable)", &p.invariants);
    let _ = writeln!(s, "## Goal\n\n{}\n", paragraph(&p.goal.objective));
    list(&mut s, "Success criteria", &p.goal.success_criteria);
    list(&mut s, "Scope", &p.goal.scope);
    list(&mut s, "Non-goals", &p.goal.non_goals);
    list(&mut s, "Preservation constraints", &p.goal.preservation_constraints);
    let blockers: Vec<String> =
        p.blockers.iter().map(|b| format!("{} ({})", b.description, b.blocker_id)).collect();
    list(&mut s, "Open blockers", &blockers);
    let decisions: Vec<String> = p
        .selected_decisions
        .iter()
        .map(|d| format!("{} — {} ({})", d.question, d.answer, d.decision_id))
        .collect();
    list(&mut s, "Human decisions", &decisions);
    let facts: Vec<String> =
        p.selected_facts.iter().map(|f| format!("{} ({} r{})", f.statement, f.fact_id, f.revision)).collect();
    list(&mut s, "Confirmed facts", &facts);
    let scenarios: Vec<String> = p
        .business_scenarios
        .iter()
        .map(|x| format!("{}: {} ({})", x.title, x.description, x.scenario_id))
        .collect();
    list(&mut s, "Scenarios", &scenarios);
    let obligations: Vec<String> = p
        .verification_obligations
        .iter()
        .map(|o| {
            format!(
                "{} (obligation {}, check {} {})",
                o.description, o.obligation_id, o.check_spec_id, o.check_spec_digest
            )
        })
        .collect();
    list(&mut s, "Verification obligations", &obligations);
    for c in &p.relevant_code {
        // A fence the source's own code blocks cannot close (a Markdown file's ``` lines
        // would otherwise end it and be read as package structure).
        let fence = fence_for(&c.content);
        let _ = writeln!(
            s,
            "## Source {} at {} ({})\n\n{fence}\n{}\n{fence}\n",
            code_span(&c.path),
            name_span(&c.revision),
            c.digest,
            c.content
        );
    }
    if let Some(r) = &p.repair_context {
        let _ = writeln!(s, "## Repair context (authoritative)\n");
        let _ = writeln!(
            s,
            "- decision {} ({}) rejected generation {} v{} ({})",
            r.acceptance_decision_id,
            r.acceptance_decision_digest,
            r.rejected_candidate_generation_id,
            r.rejected_candidate_version,
            r.rejected_candidate_digest
        );
        let _ = writeln!(
            s,
            "- repair generation {} sequence {} starts from {}",
            r.repair_candidate_generation_id, r.repair_candidate_sequence, r.repair_candidate_base_digest
        );
        let _ = writeln!(
            s,
            "- evidence set {}; input manifest {}; repair {}",
            r.evidence_set_digest, r.input_manifest_digest, r.acceptance_repair_digest
        );
        for f in &r.failed_evidence {
            let _ = writeln!(
                s,
                "- failed: evidence {} ({:?}) obligation {} check {}",
                f.evidence_id, f.result_status, f.verification_obligation_id, f.check_specification_id
            );
        }
        let _ = writeln!(s);
        list(&mut s, "Constraints to preserve", &r.constraints_to_preserve);
    }
    if let Some(f) = &p.prior_attempt_feedback {
        let _ = writeln!(s, "## Prior attempt feedback (non-authoritative, {})\n", f.feedback_digest);
        for it in &f.items {
            let item = format!("[{:?}] {} (sources: {})", it.kind, it.content, it.source_refs.join(", "));
            let _ = writeln!(s, "- {}", item_lines(&item));
        }
        let _ = writeln!(s);
    }
    let kinds: Vec<String> =
        p.response_contract.allowed_result_kinds.iter().map(|k| format!("{k:?}")).collect();
    let _ = writeln!(
        s,
        "## Response contract\n\n- result kinds: {}\n- worker event schema: {}\n- max event bytes: {}",
        kinds.join(", "),
        p.response_contract.worker_event_schema,
        p.response_contract.max_event_bytes
    );
    s
}

fn list(s: &mut String, title: &str, items: &[String]) {
    if items.is_empty() {
        return;
    }
    let _ = writeln!(s, "### {title}\n");
    for it in items {
        let _ = writeln!(s, "- {}", item_lines(it));
    }
    let _ = writeln!(s);
}

/// A backtick fence longer than any backtick run in `content` (at least three), so the
/// content's own code blocks (a skill's, a project source's) cannot close it.
pub(in crate::compiler) fn fence_for(content: &str) -> String {
    let longest = content.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

/// `text` as one inline code span that nothing in it can end: delimited by a backtick run
/// longer than any in it, padded with a space where it begins or ends with a backtick
/// (outside review 20: a source path holding backticks closed the span and wrote a forged
/// revision and digest into its heading).
pub(in crate::compiler) fn code_span(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let tick = "`".repeat(longest + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') { " " } else { "" };
    format!("{tick}{pad}{text}{pad}{tick}")
}

/// A name (a source revision) as it is when it holds only letters, digits and `.` `_` `-`
/// `/` `:` `@` `+` (a commit id, a tag), else as a [`code_span`], so no punctuation in it can
/// pass for the heading's own.
pub(in crate::compiler) fn name_span(text: &str) -> String {
    if !text.is_empty()
        && text.chars().all(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | ':' | '@' | '+'))
    {
        text.to_owned()
    } else {
        code_span(text)
    }
}

/// A list item's text as Markdown that stays one item: its later lines are indented into
/// it, and none of them opens a block of the package's own ([`block_safe`]; the first line
/// follows the item's own `- `).
pub(in crate::compiler) fn item_lines(item: &str) -> String {
    block_safe(item, "  ", false, false, Escapes::INLINE)
}

/// [`item_lines`], and with `inline` none of its text hides from a Markdown viewer
/// ([`block_safe`]; compiler/5).
/// What compilers 5 on escape in ledger text beyond compiler/5's inline escapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::compiler) struct Escapes {
    /// Compiler/7: every `$` (a viewer's math).
    pub math: bool,
    /// Compiler/8: a self-linking run as cmark-gfm reads it (`ftp://` too; only ASCII white
    /// space ends it).
    pub gfm_links: bool,
}

impl Escapes {
    /// Compilers 5 and 6 (and the plain renderings of compilers 1–4, which take no inline
    /// escapes at all).
    pub const INLINE: Escapes = Escapes { math: false, gfm_links: false };
}

pub(in crate::compiler) fn item_lines_as(item: &str, inline: bool, math: Escapes) -> String {
    // Compiler/5: the first line too is kept from opening a block (outside review 121 F1:
    // `- # h` was a heading, `- ---` a rule, `- - b` a nested list); no line begins with
    // white space (`anchored`), so the item's content column is always 2.
    block_safe(item, "  ", inline, inline, math)
}

/// [`paragraph`], and with `inline` none of its text hides from a Markdown viewer
/// ([`block_safe`]; compiler/5).
pub(in crate::compiler) fn paragraph_as(text: &str, inline: bool, math: Escapes) -> String {
    block_safe(text, "", true, inline, math)
}

/// A paragraph of text (an objective) none of whose lines opens a block of the package's
/// own ([`block_safe`]).
pub(in crate::compiler) fn paragraph(text: &str) -> String {
    block_safe(text, "", true, false, Escapes::INLINE)
}

/// Text from the ledger as Markdown that opens no block of the package's own, so a worker
/// reads it as text, never as package structure (a forged `## Repair context
/// (authoritative)` heading, a fence that swallows the response contract). Every line
/// break — a line feed, CR LF, or a lone carriage return, which CommonMark also ends a line
/// with — becomes a line feed followed by `indent`; a line (the first too if `first_line`)
/// that would open a block is escaped by a backslash before its opening character
/// ([`block_opener`]). With `inline` (compiler/5), nothing in the text hides from a reader
/// of the rendered Markdown either ([`inline_safe`]); with `math` too (compiler/7), no `$`
/// opens a viewer's math.
pub(in crate::compiler) fn block_safe(
    text: &str,
    indent: &str,
    first_line: bool,
    inline: bool,
    math: Escapes,
) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let mut rest = text;
    let mut first = true;
    loop {
        let (line, next) = match rest.find(['\r', '\n']) {
            Some(at) => {
                let skip = if rest.get(at..at + 2) == Some("\r\n") { 2 } else { 1 };
                (rest.get(..at).unwrap_or_default(), rest.get(at + skip..))
            }
            None => (rest, None),
        };
        if !first {
            out.push('\n');
            out.push_str(indent);
        }
        let escaped;
        let line = if inline {
            escaped = anchored(&inline_safe(line, math), first && !indent.is_empty());
            escaped.as_str()
        } else {
            line
        };
        let opener = if first && !first_line { None } else { block_opener(line) };
        match opener.and_then(|at| Some((line.get(..at)?, line.get(at..)?))) {
            Some((head, tail)) => {
                out.push_str(head);
                out.push('\\');
                out.push_str(tail);
            }
            None => out.push_str(line),
        }
        first = false;
        match next {
            Some(tail) => rest = tail,
            None => return out,
        }
    }
}

/// `line` (compiler/5) beginning with no white space a viewer reads as indentation: its
/// first space or tab is written as a character reference (`&#32;`, `&#9;`), which shows
/// as that character, and an item's empty first line as `&#32;`. So every line of ledger
/// text starts at its item's content column or the paragraph's margin — none is an
/// indented code block, none moves the item's content column, none falls out of its item
/// (outside review 123: a tab, a blank or space-only first line, a space-only last line
/// before the compiler's suffix each did).
fn anchored(line: &str, item_first_line: bool) -> String {
    match line.chars().next() {
        Some(' ') => format!("&#32;{}", line.get(1..).unwrap_or_default()),
        Some('\t') => format!("&#9;{}", line.get(1..).unwrap_or_default()),
        None if item_first_line => "&#32;".to_owned(),
        _ => line.to_owned(),
    }
}

/// One line of ledger text with a backslash before what a CommonMark viewer would hide, or
/// show as something else than it is: every backtick (no code span forms, so no span's
/// end has to be found the way a viewer finds it: outside review 119 — a span across a
/// blank line, an indented line, an email autolink holding a backtick — each switched the
/// other escapes off), every `<` (raw HTML, comments, autolinks, email autolinks beginning
/// with a digit), every `*` and every `_` not inside a word (emphasis drops its markers:
/// `__init__` read as a bold `init`), every `|` and `~` (tables and strikethrough in the
/// GitHub dialect), an `&` that opens an entity or numeric character reference, a `[`
/// that begins the line as a link reference definition would ([`reference_definition`]),
/// `(` or `[` right after `]` (an inline link or image hides its destination and title,
/// and an image fetches it), and a backslash before ASCII punctuation or at the line's end
/// (a viewer would drop it) — outside reviews 113 F2 and 118. With `math` (compiler/7), also
/// every `$`: GitHub's viewer renders `$…$` and `$$…$$` as math, where `\phantom{…}` draws
/// its text as blank space (outside review 221 F2: a constraint's clause hidden that way).
fn inline_safe(line: &str, esc: Escapes) -> String {
    let math = esc.math;
    let lead = line.len() - line.trim_start_matches([' ', '\t']).len();
    let mut out = String::with_capacity(line.len() + 4);
    let mut prev: Option<char> = None;
    // Inside a run a GitHub-dialect viewer links by itself (`http://`, `https://`, `www.`
    // to the next white space), a backslash would become the link's last character and
    // leave the character after it live: there it is written as a character reference,
    // which every viewer shows as that character (outside review 125). Compiler/8 reads the
    // run as cmark-gfm does: `ftp://` opens one too, wherever it stands, and only ASCII white
    // space ends it (outside review 225 F1: a no-break space ended it here and not there, so
    // `\<!-- … -->` after it was a live comment in GitHub's view).
    let mut in_url = false;
    for (k, c) in line.char_indices() {
        let next = line.get(k + c.len_utf8()..).unwrap_or_default();
        let ends_run = if esc.gfm_links { c.is_ascii_whitespace() } else { c.is_whitespace() };
        if ends_run {
            in_url = false;
        } else if !in_url && (esc.gfm_links || !prev.is_some_and(|p| p.is_alphanumeric())) {
            let rest = line.get(k..).unwrap_or_default();
            let starts = |p: &str| rest.get(..p.len()).is_some_and(|r| r.eq_ignore_ascii_case(p));
            in_url = starts("http://")
                || starts("https://")
                || starts("www.")
                || (esc.gfm_links && starts("ftp://"));
        }
        // (ASCII only: viewers differ on which other letters and symbols are a word's,
        // and `ⓐ_x_ⓐ` was emphasis in one: outside review 124.)
        let word = |x: Option<char>| x.is_some_and(|c| c.is_ascii_alphanumeric());
        let hides = match c {
            '\\' => next.is_empty() || next.starts_with(|n: char| n.is_ascii_punctuation()),
            '`' | '<' | '*' | '|' | '~' => true,
            '$' => math,
            '&' => entity(next),
            // (A GitHub task-list box, `[ ]`/`[x]`, hides its text and shows a tick:
            // outside review 124.)
            '[' if k == lead => {
                reference_definition(next)
                    || prev == Some(']')
                    || [" ]", "x]", "X]"].iter().any(|b| next.starts_with(b))
            }
            '(' | '[' => prev == Some(']'),
            '_' => !(word(prev) && word(next.chars().next())),
            _ => false,
        };
        if hides && in_url {
            out.push_str(&format!("&#{};", u32::from(c)));
        } else {
            if hides {
                out.push('\\');
            }
            out.push(c);
        }
        prev = Some(c);
    }
    out
}

/// Whether a line that begins with `[` followed by `rest` may be a CommonMark link
/// reference definition (`[label]: destination "title"`, which renders as nothing): its
/// label's first unescaped `]` is followed by `:`, or the line holds no `]` (the label may
/// go on on the next line).
fn reference_definition(rest: &str) -> bool {
    let mut escaped = false;
    for (k, c) in rest.char_indices() {
        match c {
            '\\' => escaped = !escaped,
            ']' if !escaped => return rest.get(k + 1..).is_some_and(|after| after.starts_with(':')),
            _ => escaped = false,
        }
    }
    true
}

/// Whether `rest` (after a `&`) may complete an entity or numeric character reference in
/// some viewer: `#` and digits, `#x`/`#X` and hex digits, or letters and digits beginning
/// with a letter, then `;` — of any length: cmark-gfm decodes eight digits where the spec
/// stops at seven (outside review 124: `&#x0000202E;` was a right-to-left override there).
fn entity(rest: &str) -> bool {
    let Some(end) = rest.find(';') else { return false };
    let body = rest.get(..end).unwrap_or_default();
    if let Some(num) = body.strip_prefix('#') {
        return match num.strip_prefix(['x', 'X']) {
            Some(hex) => !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit()),
            None => !num.is_empty() && num.chars().all(|c| c.is_ascii_digit()),
        };
    }
    !body.is_empty()
        && body.starts_with(|c: char| c.is_ascii_alphabetic())
        && body.chars().all(|c| c.is_ascii_alphanumeric())
}

/// Where a backslash keeps `line` from opening a CommonMark block (the offset of the
/// character to escape), or `None` if it opens none: an ATX heading (`#`…`######` then a
/// space or the end), a fence (three backticks or tildes), a block quote (`>`), a bullet
/// (`-`, `+`, `*` then a space or the end), an ordered item (digits, then `.` or `)` then a
/// space or the end), a thematic break or setext underline (a line of `-`, `*`, `_` or `=`
/// and spaces), an HTML block (`<` then a letter, `/`, `!` or `?`) or a table row (`|`).
fn block_opener(line: &str) -> Option<usize> {
    let body = line.trim_start_matches([' ', '\t']);
    let lead = line.len() - body.len();
    let mut chars = body.chars();
    let c = chars.next()?;
    let after = |n: usize| body.get(n..).unwrap_or_default();
    let ends_word = |rest: &str| rest.is_empty() || rest.starts_with([' ', '\t']);
    let run = |ch: char| body.len() - body.trim_start_matches(ch).len();
    let rule_line = |ch: char| {
        body.chars().all(|x| x == ch || x == ' ' || x == '\t')
            && body.chars().filter(|&x| x == ch).count() >= 3
    };
    let opens = match c {
        '#' => run('#') <= 6 && ends_word(after(run('#'))),
        '`' | '~' => run(c) >= 3,
        '>' | '|' => true,
        '-' | '+' | '*' => ends_word(after(1)) || rule_line(c),
        '_' => rule_line('_'),
        '=' => body.trim_end_matches([' ', '\t']).chars().all(|x| x == '='),
        '<' => chars.next().is_some_and(|n| n.is_ascii_alphabetic() || matches!(n, '/' | '!' | '?')),
        '0'..='9' => {
            let digits = body.len() - body.trim_start_matches(|x: char| x.is_ascii_digit()).len();
            let rest = after(digits);
            if digits <= 9 && rest.starts_with(['.', ')']) && ends_word(after(digits + 1)) {
                return Some(lead + digits);
            }
            false
        }
        _ => false,
    };
    opens.then_some(lead)
}

#[cfg(test)]
mod item_tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic
    use super::*;

    /// Compiler/5's inline escapes: each `(text, rendered)` through `paragraph_as` with
    /// `inline` (the end-to-end view is `compiler::ledger_text_stays_visible_in_a_markdown_viewer`).
    #[test]
    fn inline_escapes_only_what_a_viewer_would_hide() {
        let cases = [
            ("a <!-- x --> b", r"a \<!-- x --> b"),
            ("<span hidden>x</span>", r"\<span hidden>x\</span>"),
            (r#"[n]: <https://x> "t""#, r#"\[n]: \<https://x> "t""#),
            ("[FAILED_CHECK] text", "[FAILED_CHECK] text"),
            ("[label\nspans]: /x", "\\[label\nspans]: /x"),
            // No code span forms: backticks show as typed (outside review 119).
            ("Vec<u8> and `Vec<u8>`", r"Vec\<u8> and \`Vec\<u8>\`"),
            ("<1`@e.co> <!-- h --> `", r"\<1\`@e.co> \<!-- h --> \`"),
            ("a `b\n\nc <!-- h -->`", "a \\`b\n\nc \\<!-- h -->\\`"),
            // A backslash before punctuation is shown as typed (outside review 118 F4).
            (r"already \<b> typed", r"already \\\<b> typed"),
            (r"x\*y and a\b", r"x\\\*y and a\b"),
            ("AT&T && a < b; &amp; &#65; &#x41; &nope", r"AT&T && a \< b; \&amp; \&#65; \&#x41; &nope"),
            // Links and images, emphasis, tables and strikethrough (118 F2, F3; 119).
            (r#"[shown](http://e "t") ![](x.png) [a][b]"#, r#"[shown]\(http://e "t") ![]\(x.png) [a]\[b]"#),
            ("*emph* __init__ snake_case", r"\*emph\* \_\_init\_\_ snake_case"),
            ("a | b ~~c~~", r"a \| b \~\~c\~\~"),
            // Eight-digit references, underscores beside non-ASCII, task-list boxes (124).
            ("1&#x0000202E;evil &#00000065;", r"1\&#x0000202E;evil \&#00000065;"),
            ("ⓐ_x_ⓐ é_x_é", r"ⓐ\_x\_ⓐ é\_x\_é"),
            ("[x] done? [ ] no", r"\[x] done? [ ] no"),
            // Inside a run a GitHub viewer links, character references (125).
            ("see http://x.y/<!-- h --> end", r"see http://x.y/&#60;!-- h --> end"),
            ("WWW.x.y/a*b_c_ x_y", r"WWW.x.y/a&#42;b_c&#95; x_y"),
            ("ahttp://x/<b>", r"ahttp://x/\<b>"),
        ];
        for (text, rendered) in cases {
            assert_eq!(paragraph_as(text, true, Escapes::INLINE), rendered, "{text:?}");
            assert_eq!(paragraph_as(text, false, Escapes::INLINE), paragraph(text), "{text:?}");
        }
        // Compiler/8 reads a self-linking run as cmark-gfm does: only ASCII white space ends
        // it, and `ftp://` opens one, wherever it stands (outside review 225 F1: a no-break
        // space ended it for compiler/7, whose `\<` then became the link's last character
        // in GitHub's view, and the comment after it was live).
        let gfm = Escapes { math: true, gfm_links: true };
        let math = Escapes { math: true, gfm_links: false };
        for (text, seven, eight) in [
            (
                "see https://x.y/p\u{a0}<!-- h --> end",
                "see https://x.y/p\u{a0}\\<!-- h --> end",
                "see https://x.y/p\u{a0}&#60;!-- h --> end",
            ),
            (
                "at https://x.y/p\u{3000}<b>",
                "at https://x.y/p\u{3000}\\<b>",
                "at https://x.y/p\u{3000}&#60;b>",
            ),
            ("get ftp://x.y/<!-- h -->", "get ftp://x.y/\\<!-- h -->", "get ftp://x.y/&#60;!-- h -->"),
            ("FTP://x/<b> y <c>", "FTP://x/\\<b> y \\<c>", "FTP://x/&#60;b> y \\<c>"),
            ("ahttp://x/<b>", "ahttp://x/\\<b>", "ahttp://x/&#60;b>"),
        ] {
            assert_eq!(paragraph_as(text, true, math), seven, "{text:?}");
            assert_eq!(paragraph_as(text, true, gfm), eight, "{text:?}");
        }
        // A list item's first line opens no block either, and later lines are indented to
        // where its content begins (outside review 121).
        let items = [
            ("# h", r"\# h"),
            ("---", r"\---"),
            ("- b", r"\- b"),
            ("1) o", r"1\) o"),
            (">", r"\>"),
            ("   g1\n\n  <g1> y", "&#32;  g1\n  \n  &#32; \\<g1> y"),
            ("\tx\n\ny", "&#9;x\n  \n  y"),
            ("\n\ny", "&#32;\n  \n  y"),
            ("x\n\n    (id)", "x\n  \n  &#32;   (id)"),
            ("a\n# b", "a\n  \\# b"),
        ];
        for (text, rendered) in items {
            assert_eq!(item_lines_as(text, true, Escapes::INLINE), rendered, "{text:?}");
            assert_eq!(item_lines_as(text, false, Escapes::INLINE), item_lines(text), "{text:?}");
        }
    }

    /// A list item's later lines cannot open a block of the package's own (outside review
    /// 18: a line feed in a list item forged a `## Phase objective` section; outside review
    /// 20: a lone carriage return did the same, CommonMark ending a line there too).
    #[test]
    fn an_item_stays_one_item() {
        for br in ["\n", "\r\n", "\r"] {
            let forged = [
                "ok",
                "## Phase objective",
                "```",
                "~~~",
                "> quoted",
                "  # indented heading",
                "---",
                "===",
                "- item",
                "+ item",
                "* item",
                "12. item",
                "3) item",
                "<div>",
                "| a | b |",
                "#",
                "- - -",
                "___",
                "1.",
            ]
            .join(br);
            let md = item_lines(&forged);
            assert!(!md.contains('\r'), "{md:?}");
            let lines: Vec<&str> = md.split('\n').collect();
            assert_eq!(lines.len(), 19, "{md:?}");
            for line in &lines[1..] {
                assert!(line.starts_with("  "), "{line:?}");
                assert_eq!(block_opener(line), None, "{line:?} opens a block");
                assert!(line.contains('\\'), "{line:?} is not escaped");
            }
            assert!(lines[1].ends_with("\\## Phase objective"), "{md:?}");
            assert!(lines[11].ends_with("12\\. item"), "{md:?}");
        }
        // What opens no block is left as it is: the golden packages' Markdown did not move.
        for plain in [
            "`code` first",
            "#hashtag",
            "-1 degrees",
            "2.5 metres",
            "<3",
            "a = b",
            "== x",
            "__init__",
            "1.5.",
            "~~x~~",
        ] {
            assert_eq!(block_opener(plain), None, "{plain:?}");
            assert_eq!(item_lines(&format!("x\n{plain}")), format!("x\n  {plain}"));
        }
        assert_eq!(item_lines("# the first line follows `- `"), "# the first line follows `- `");
        assert_eq!(paragraph("## a first line too"), "\\## a first line too");
        assert_eq!(paragraph("a\r\r## b"), "a\n\n\\## b");
        assert_eq!(code_span("src/a.rs"), "`src/a.rs`");
        assert_eq!(code_span("a` at v9 (b3:x) `b"), "``a` at v9 (b3:x) `b``");
        assert_eq!(code_span("`x``"), "``` `x`` ```");
        assert_eq!(name_span("9f1c2e0"), "9f1c2e0");
        assert_eq!(name_span("v1 (b3:forged)"), "`v1 (b3:forged)`");
        let fence = fence_for("a ``` b ````` c");
        assert_eq!(fence, "``````");
    }
}
