#!/usr/bin/env python3
"""Independent check of the golden Context Packages, with another CBOR and BLAKE3
implementation, written from docs/format.md and ledger-schema/ledger.cddl alone (no Rust code
is consulted or run).

lifecycle-packages.json (compiler/1) and lifecycle-packages-v2.json (compiler/2): each
package decodes and cbor2's canonical encoder gives the identical bytes; packageDigest is
derive_key("context package", raw bytes); schemaVersion is the package's.

lifecycle-packages-v2.json also carries each manifest: it is canonical; manifestDigest is
the "context manifest" record digest; it names compiler/2, the package digest, the
capability grant, response contract and feedback digests of the package, and the package
identity; every entry's renderedDigest is the "rendered entry" digest of the package part
the entries table of docs/format.md names (every package list item matched exactly once);
a confirmed Fact's sourceDigest is the "source" digest of its statement; and every
omission rule or reason that names a phase, input class or Fact status uses the wire name
(the CDDL's enumerations), never a Rust Debug name. The Markdown names the phase by its
wire name. Finally the claim that compiler/2 changed names only: its packages of the
reference lifecycle are compiler/1's, byte for byte.
lifecycle-packages-v3.json (compiler/3) adds a task selection; lifecycle-packages-v4.json
(compiler/4) adds a goal that recorded one project path twice: every other package is
compiler/3's byte for byte, each path is delivered once, and every
`freshness.sourceSuperseded` omission names a delivered record of the path and is not
delivered itself. lifecycle-packages-v5.json (compiler/5): the same packages as compiler/4 but
for the manifests' compilerVersion, and compiler/4's Markdown with backslashes inserted.
lifecycle-packages-v6.json (compiler/6): compiler/5's packages, and compiler/5's Markdown with
each repair item's digests shown (feedback source digests; failed records' record digest,
eligibility and check-specification digest), read from the package bytes.
lifecycle-packages-v7.json (compiler/7): compiler/6's, its Markdown escaping every `$`.
lifecycle-packages-v8.json (compiler/8): compiler/7's packages plus a labelled case; an omitted
confirmed fact named with its revision; every decision and scenario line splits at the
compiler's bold labels into exactly the package's texts, facts and blockers lead with their ids.
Run: pip install cbor2 blake3 && python3 replay-tests/golden/crosscheck.py"""
import json, os, re, sys
import blake3, cbor2

here = os.path.dirname(os.path.abspath(__file__))
cddl = open(os.path.join(here, "..", "..", "ledger-schema", "ledger.cddl")).read()


def choices(rule):
    """The text choices of a CDDL rule `name = ("A" / "B" / ...)`."""
    m = re.search(r"^" + re.escape(rule) + r"\s*=\s*\(([^)]*)\)", cddl, re.M)
    assert m, f"ledger.cddl has no rule {rule}"
    return re.findall(r'"([A-Z_]+)"', m.group(1))


PHASES = choices("phase-name")
CLASSES = choices("input-class")
FACT_STATUSES = ["PROPOSED", "CONFIRMED", "INVALIDATED"]  # docs/format.md: fact status
assert len(PHASES) == 5 and len(CLASSES) == 7, (PHASES, CLASSES)


def raw_digest(context, data):
    return blake3.blake3(data, derive_key_context="closure-ledger v1 " + context).digest()


def digest(context, value):
    return raw_digest(context, cbor2.dumps(value, canonical=True))


def b3(d):
    return "b3:" + d.hex()


failures = []
counts = {}


def check(name, what, ok, detail=""):
    counts[what] = counts.get(what, 0) + 1
    if not ok:
        failures.append(f"{name}: {what} {detail}".rstrip())


def canonical(name, what, raw):
    value = cbor2.loads(raw)
    check(name, what + " is canonical", cbor2.dumps(value, canonical=True) == raw)
    return value


def packages(path, version):
    golden = json.load(open(os.path.join(here, path)))
    check(path, "compilerVersion", golden["compilerVersion"] == version, golden["compilerVersion"])
    out = []
    for a in golden["attempts"]:
        name = f"{path} {a['attemptId']}"
        raw = bytes.fromhex(a["packageHex"])
        pkg = canonical(name, "package", raw)
        check(name, "packageDigest", b3(raw_digest("context package", raw)) == a["packageDigest"])
        check(name, "schemaVersion", pkg["schemaVersion"] == a["schemaVersion"])
        check(name, "phase", pkg["identity"]["phase"] == a["phase"])
        out.append((name, a, raw, pkg))
    return out


def parts(pkg):
    """Each manifest entry kind's rendered preimages, in package order (docs/format.md)."""
    ident, repair = pkg["identity"], pkg.get("repairContext")
    p = {
        "identity": [ident],
        "policy": [pkg["policyBundle"]],
        "profile": [pkg["executionProfile"]],
        "invariant": list(pkg["invariants"]),
        "phase": [[pkg["phaseObjective"], pkg["capabilityGrant"], pkg["responseContract"]]],
        "goal": [pkg["goal"]],
        "candidate": [[ident["candidateGenerationId"], ident["candidateBaseDigest"]]]
        if "candidateGenerationId" in ident else [],
        "blocker": list(pkg["blockers"]),
        "humanDecision": list(pkg["selectedDecisions"]),
        "fact": list(pkg["selectedFacts"]),
        "scenario": list(pkg["businessScenarios"]),
        "obligation": list(pkg["verificationObligations"]),
        "projectSource": list(pkg["relevantCode"]),
        "failedEvidence": list(repair["failedEvidence"]) if repair else [],
        "repairDecision": [repair] if repair else [],
        "priorAttemptFeedback": [pkg["priorAttemptFeedback"]] if "priorAttemptFeedback" in pkg else [],
        "taskSelection": [pkg["selectedSkills"]] if pkg.get("selectedSkills") else [],
    }
    return p


WIRE_RULES = [
    re.compile(r"phase\.(" + "|".join(PHASES) + r")\.excludes\.(" + "|".join(CLASSES) + r")"),
    re.compile(r"budget\.(" + "|".join(CLASSES) + r")"),
    re.compile(r"authority\.factNotConfirmed"),
    re.compile(r"freshness\.sourceSuperseded"),
    re.compile(r"feedback\.(blank|maxItemBytes|maxItems|maxTotalBytes)"),
]


def check_manifest(name, a, pkg, version="closure-ledger-compiler/2"):
    raw = bytes.fromhex(a["manifestHex"])
    m = canonical(name, "manifest", raw)
    check(name, "manifestDigest", b3(digest("context manifest", m)) == a["manifestDigest"])
    check(name, "manifest compilerVersion", m["compilerVersion"] == version)
    sel = m.get("selectionReceipt")
    check(name, "selectionReceipt", (b3(sel) if sel else None) == a.get("selectionReceipt"))
    check(name, "selectedSkills only with a selection", bool(pkg.get("selectedSkills")) <= bool(sel))
    check(name, "manifest packageDigest", b3(m["packageDigest"]) == a["packageDigest"])
    check(name, "manifest schemaVersion", m["schemaVersion"] == pkg["schemaVersion"])
    ident = pkg["identity"]
    for mk, pk in [("goalId", "goalId"), ("goalRevision", "goalRevision"), ("workflowId", "workflowId"),
                   ("workflowVersion", "workflowVersion"), ("phase", "phase"), ("attemptId", "attemptId"),
                   ("generationId", "candidateGenerationId"), ("candidateDigest", "candidateBaseDigest"),
                   ("plan", "plan")]:
        check(name, "manifest identity", m.get(mk) == ident.get(pk), mk)
    check(name, "manifest policy", m["policy"] == pkg["policyBundle"])
    check(name, "manifest profile", m["profile"] == pkg["executionProfile"])
    check(name, "capabilityGrantDigest",
          m["capabilityGrantDigest"] == digest("capability grant", pkg["capabilityGrant"]))
    check(name, "responseContractDigest",
          m["responseContractDigest"] == digest("response contract", pkg["responseContract"]))
    fb = pkg.get("priorAttemptFeedback")
    check(name, "feedbackDigest", m.get("feedbackDigest") == (fb and fb["feedbackDigest"]))
    if fb:
        check(name, "feedback record digest",
              fb["feedbackDigest"] == digest("prior attempt feedback", fb["items"]))

    left = parts(pkg)
    for e in m["entries"]:
        queue = left.get(e["kind"])
        if not queue:
            check(name, "entry has a package part", False, e["kind"])
            continue
        value = queue.pop(0)
        check(name, "renderedDigest", e["renderedDigest"] == digest("rendered entry", value), e["kind"])
        if e["kind"] == "fact":
            check(name, "fact sourceDigest",
                  e["sourceDigest"] == raw_digest("source", value["statement"].encode()))
        if e["kind"] == "taskSelection":
            # compiler/3: one entry for the whole selection, bound to its receipt; each
            # resource's bytes re-hashed as the registry records them.
            check(name, "taskSelection sourceDigest", e.get("sourceDigest") == sel)
            check(name, "taskSelection sourceRef", e["sourceRef"] == "selection/" + b3(sel or b""))
            check(name, "taskSelection authority", e["authorityClass"] == "PROMPT_ADVISORY")
            for k in value:
                check(name, "selected skill digest",
                      k["digest"] == raw_digest("source resource", k["content"].encode()), k["path"])
    for kind, rest in left.items():
        check(name, "every package part has an entry", not rest, kind)

    for o in m["omissionDecisions"]:
        check(name, "omission rule is a wire-name rule",
              any(r.fullmatch(o["rule"]) for r in WIRE_RULES), o["rule"])
        if o["rule"] == "authority.factNotConfirmed":
            status = re.fullmatch(r"fact is ([A-Za-z_]+); only confirmed facts are authoritative", o["reason"])
            check(name, "fact status is a wire name", bool(status) and status.group(1) in FACT_STATUSES,
                  o["reason"])
    check(name, "markdown phase", f"\n- phase: {pkg['identity']['phase']}\n" in a["markdown"])
    return m


v1 = packages("lifecycle-packages.json", "closure-ledger-compiler/1")
v2 = packages("lifecycle-packages-v2.json", "closure-ledger-compiler/2")
rules = set()
for name, a, raw, pkg in v2:
    m = check_manifest(name, a, pkg)
    rules.update(o["rule"] for o in m["omissionDecisions"])
for want in ["phase.DISCOVERY.excludes.PROJECT_MATERIAL", "budget.BLOCKERS_DECISIONS", "authority.factNotConfirmed"]:
    check("v2", "golden exercises rule", want in rules, want)
check("v1/v2", "same lifecycle attempts", [a["attemptId"] for _, a, _, _ in v1]
      == [a["attemptId"] for _, a, _, _ in v2][:len(v1)])
for (name, _, raw1, _), (_, _, raw2, _) in zip(v1, v2):
    check(name, "compiler/2's package is compiler/1's", raw1 == raw2)

v3 = packages("lifecycle-packages-v3.json", "closure-ledger-compiler/3")
skills = 0
for (name, a, raw, pkg), (_, a2, raw2, _) in zip(v3, v2):
    check(name, "compiler/3 without a selection packages as compiler/2", raw == raw2)
for name, a, raw, pkg in v3:
    check_manifest(name, a, pkg, "closure-ledger-compiler/3")
    skills += len(pkg.get("selectedSkills", []))
check("v3", "golden carries a selection", skills > 0 and any("selectionReceipt" in a for _, a, _, _ in v3))

v4 = packages("lifecycle-packages-v4.json", "closure-ledger-compiler/4")
# The v3 golden's repair child was derived over a decision without the profile binding
# (the form before 2026-12-05); the v4 golden's over the decision this build records. The
# repair context carries that decision's digests, so those three differ; all else is equal.
DECISION_DIGESTS = ("acceptanceDecisionDigest", "inputManifestDigest", "acceptanceRepairDigest")
for (name, a, raw, pkg), (_, a3, raw3, pkg3) in zip(v4, v3):
    if "repairContext" in pkg:
        other = {k: (dict(v, **{d: pkg["repairContext"][d] for d in DECISION_DIGESTS}) if k == "repairContext" else v)
                 for k, v in pkg3.items()}
        check(name, "compiler/4's repair package is compiler/3's but for the decision's digests",
              other == pkg and any(pkg["repairContext"][d] != pkg3["repairContext"][d] for d in DECISION_DIGESTS))
    else:
        check(name, "compiler/4 where no path repeats packages as compiler/3", raw == raw3)
superseded = 0
for name, a, raw, pkg in v4:
    m = check_manifest(name, a, pkg, "closure-ledger-compiler/4")
    paths = [c["path"] for c in pkg["relevantCode"]]
    check(name, "compiler/4 delivers each project path once", len(paths) == len(set(paths)), paths)
    delivered = {e["sourceRef"] for e in m["entries"] if e["kind"] == "projectSource"}
    for o in m["omissionDecisions"]:
        if o["rule"] == "freshness.sourceSuperseded":
            superseded += 1
            newer = re.fullmatch(r"superseded by a later record of its path: (source/[0-9A-Z]+)", o["reason"])
            check(name, "superseded by a delivered source", bool(newer) and newer.group(1) in delivered, o["reason"])
            check(name, "a superseded source is not delivered", o["sourceRef"] not in delivered, o["sourceRef"])
check("v4", "golden supersedes a source", len(v4) == len(v3) + 1 and superseded == 1)

v5 = packages("lifecycle-packages-v5.json", "closure-ledger-compiler/5")
golden4 = json.load(open(os.path.join(here, "lifecycle-packages-v4.json")))["attempts"]
golden5 = json.load(open(os.path.join(here, "lifecycle-packages-v5.json")))["attempts"]
for (name, a, raw, pkg), (_, _, raw4, _), g4, g5 in zip(v5, v4, golden4, golden5):
    check_manifest(name, a, pkg, "closure-ledger-compiler/5")
    check(name, "compiler/5 packages as compiler/4", raw == raw4)
    # Its Markdown is compiler/4's with a backslash before what a viewer would hide or
    # reshape (these cases' text holds no backslash of its own before those characters).
    unescaped = re.sub(r"\\(?=[`<*|~&\[(_\\])", "", g5["markdown"])
    check(name, "compiler/5 renders as compiler/4 but for inserted escapes", unescaped == g4["markdown"])
check("v5", "golden has compiler/4's cases", len(v5) == len(v4))

# compiler/6: compiler/5's packages; its Markdown shows every repair item's digests — each
# feedback item's source records with their digests, each failed Evidence record's record and
# check-specification digests and eligibility — read here from the package bytes.
v6 = packages("lifecycle-packages-v6.json", "closure-ledger-compiler/6")
golden6 = json.load(open(os.path.join(here, "lifecycle-packages-v6.json")))["attempts"]
for (name, a, raw, pkg), (_, _, raw5, _), g5, g6 in zip(v6, v5, golden5, golden6):
    check_manifest(name, a, pkg, "closure-ledger-compiler/6")
    check(name, "compiler/6 packages as compiler/5", raw == raw5)
    md5, md6 = g5["markdown"].splitlines(), g6["markdown"].splitlines()
    feedback = pkg.get("priorAttemptFeedback")
    cited = {}
    for item in (feedback or {}).get("items", []):
        refs = ", ".join(item["sourceRefs"])
        shown = ", ".join(f"{r} {b3(d)}" for r, d in zip(item["sourceRefs"], item["sourceDigests"]))
        cited[f"(sources: {refs})"] = f"(sources: {shown})"
    failed = iter((pkg.get("repairContext") or {}).get("failedEvidence", []))
    for old, new in zip(md5, md6):
        want = old
        if old.startswith("- failed: evidence"):
            # In failedEvidence order: result, record digest and eligibility, then the check's digest.
            f = next(failed)
            status = f"({f['resultStatus']})"
            want = want.replace(status, f"({f['resultStatus']}, record {b3(f['evidenceRecordDigest'])}, "
                                f"eligibility {f['evidenceEligibilityState']} v{f['evidenceEligibilityVersion']})", 1)
            want += f" ({b3(f['checkSpecificationDigest'])})"
        elif old.startswith("- ["):
            for k, v in cited.items():
                if old.endswith(k):
                    want = old[: -len(k)] + v
        check(name, "compiler/6 renders as compiler/5 but for repair digests", new == want, new)
    check(name, "every failed record is shown", next(failed, None) is None)
    check(name, "compiler/6 Markdown has compiler/5's lines", len(md5) == len(md6))
    if feedback:
        check(name, "compiler/6 shows a repair's digests", md5 != md6)
check("v6", "golden has compiler/5's cases", len(v6) == len(v5))

# compiler/7: compiler/6's packages; its Markdown is compiler/6's with a backslash before every
# `$` of ledger text (so no viewer renders it as math).
v7 = packages("lifecycle-packages-v7.json", "closure-ledger-compiler/7")
golden7 = json.load(open(os.path.join(here, "lifecycle-packages-v7.json")))["attempts"]
for (name, a, raw, pkg), (_, _, raw6, _), g6, g7 in zip(v7, v6, golden6, golden7):
    check_manifest(name, a, pkg, "closure-ledger-compiler/7")
    check(name, "compiler/7 packages as compiler/6", raw == raw6)
    check(name, "compiler/7 renders as compiler/6 but for $ escapes", g7["markdown"].replace("\\$", "$") == g6["markdown"])
check("v7", "golden has compiler/6's cases", len(v7) == len(v6))

# compiler/8: compiler/7's packages; its manifests name an omitted confirmed Fact with its
# revision; its Markdown leads each text item with the compiler's fields and writes each text
# after a bold label (or, alone, a colon). Read back here: every item line splits at the
# labels into exactly the package's texts, once the escapes are taken out.
def ulid(b):
    """An id's text form (docs/format.md, "Text forms"): its 128 bits in Crockford base32, 26
    characters."""
    n = int.from_bytes(b, "big")
    return "".join("0123456789ABCDEFGHJKMNPQRSTVWXYZ"[(n >> (5 * k)) & 31] for k in range(25, -1, -1))


def unescape(md):
    """A text as compiler/5 on writes it, back to the ledger's: character references of a
    line's first space or tab, the indentation of its later lines, and backslash escapes."""
    md = md.replace("\n  ", "\n")
    md = re.sub(r"^&#32;", " ", md, flags=re.M)
    md = re.sub(r"^&#9;", "\t", md, flags=re.M)
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", md)


def items(md, title):
    """The items of the Markdown list under `### title`, each with its indented lines."""
    m = re.search(r"^### " + re.escape(title) + r"\n\n((?:- .*\n(?:  .*\n)*)+)", md, re.M)
    if not m:
        return []
    return [("- " + it).rstrip("\n") for it in ("\n" + m.group(1)).split("\n- ")[1:]]


LABEL = re.compile(r"(?<!\\)\*\*(question|answer|title|description|content):\*\*")


def labelled(line, head, labels):
    """`line` split after `head` at its labels: the texts, or None when the labels differ."""
    if not line.startswith(head):
        return None
    parts = LABEL.split(line[len(head):])
    # ["", label, " text ", label, " text"]: each text after its label's space
    if parts[0] != "" or parts[1::2] != labels:
        return None
    texts = [t[1:] if t.startswith(" ") else None for t in parts[2::2]]
    texts = [t[:-1] if k + 1 < len(texts) and t is not None and t.endswith(" ") else t
             for k, t in enumerate(texts)]
    return None if None in texts else [unescape(t) for t in texts]


v8 = packages("lifecycle-packages-v8.json", "closure-ledger-compiler/8")
golden8 = json.load(open(os.path.join(here, "lifecycle-packages-v8.json")))["attempts"]
fact_omitted = 0
for k, (name, a, raw, pkg) in enumerate(v8):
    m8 = check_manifest(name, a, pkg, "closure-ledger-compiler/8")
    if k < len(v7):
        _, a7, raw7, _ = v7[k]
        check(name, "compiler/8 packages as compiler/7", raw == raw7)
        m7 = cbor2.loads(bytes.fromhex(a7["manifestHex"]))
        for o7, o8 in zip(m7["omissionDecisions"], m8["omissionDecisions"]):
            if o7["sourceRef"].startswith("fact/") and "@" not in o7["sourceRef"]:
                check(name, "an omitted confirmed fact names its revision",
                      re.fullmatch(re.escape(o7["sourceRef"]) + r"@[1-9][0-9]*", o8["sourceRef"]), o8["sourceRef"])
                o7 = dict(o7, sourceRef=o8["sourceRef"])
            check(name, "compiler/8 omissions as compiler/7's", o7 == o8)
        m7.update(compilerVersion=m8["compilerVersion"], omissionDecisions=m8["omissionDecisions"])
        check(name, "compiler/8 manifest as compiler/7's", m7 == m8)
    md = a["markdown"]
    rendered = {
        "Human decisions": [(f"- {ulid(d['decisionId'])} ", ["question", "answer"], [d["question"], d["answer"]])
                            for d in pkg["selectedDecisions"]],
        "Scenarios": [(f"- {ulid(x['scenarioId'])} ", ["title", "description"], [x["title"], x["description"]])
                      for x in pkg["businessScenarios"]],
    }
    for title, want in rendered.items():
        got = items(md, title)
        check(name, "one Markdown item per " + title, len(got) == len(want), title)
        for line, (head, labels, texts) in zip(got, want):
            check(name, title + " split at the compiler's labels into the package's texts",
                  labelled(line, head, labels) == texts, line)
    for title, want in [
        ("Confirmed facts", [(f"- {ulid(f['factId'])} r{f['revision']}: ", f["statement"]) for f in pkg["selectedFacts"]]),
        ("Open blockers", [(f"- {ulid(b['blockerId'])}: ", b["description"]) for b in pkg["blockers"]]),
    ]:
        got = items(md, title)
        check(name, "one Markdown item per " + title, len(got) == len(want), title)
        for line, (head, text) in zip(got, want):
            check(name, title + " lead with the compiler's fields", line.startswith(head) and
                  unescape(line[len(head):]) == text, line)
    for c in pkg["relevantCode"]:
        check(name, "a source heading names its record",
              f" ({b3(c['digest'])}, source/{ulid(c['sourceId'])})\n\n" in md, c["path"])
    for o in m8["omissionDecisions"]:
        if o["rule"].startswith(("budget.", "phase.")) and o["sourceRef"].startswith("fact/"):
            fact_omitted += 1
            check(name, "an omitted confirmed fact names its revision", "@" in o["sourceRef"], o["sourceRef"])
check("v8", "golden has compiler/7's cases and the labelled one", len(v8) == len(v7) + 1)
check("v8", "golden leaves out a confirmed fact", fact_omitted == 1)

for f in failures:
    print("FAIL", f)
print(", ".join(f"{n} {w}" for w, n in sorted(counts.items())))
if failures:
    sys.exit(1)
print(f"ok: {len(v1)} compiler/1, {len(v2)} compiler/2, {len(v3)} compiler/3, {len(v4)} compiler/4, {len(v5)} compiler/5, {len(v6)} compiler/6, {len(v7)} compiler/7 and {len(v8)} compiler/8 golden "
      f"packages verified ({skills} selected skills, {superseded} superseded source)")
