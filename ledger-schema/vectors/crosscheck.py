#!/usr/bin/env python3
"""Independent check of positive.json with another CBOR and BLAKE3 implementation,
written from docs/format.md alone (no Rust code is consulted or run).

For each vector: cbor2 decodes the bytes, cbor2's own canonical encoder re-encodes them and
must give the identical bytes; blake3's derive_key mode with the entry context must give the
frozen hash; each entry's `prev` must be the previous vector's hash. Then every record digest
the vector carries is recomputed from its documented context and preimage ("Record digests"
in docs/format.md), and every digest that names a record held by an earlier vector (policy
and profile bindings, Evidence references, a repair's copies of its decision's digests, a
manifest's goal entry, the manifest an attempt's later events name) must be that record's.
Digests of things the ledger does not hold (plan, package, feedback, check specs, candidate
and change-set bytes) are opaque: they are not checked.
Run: pip install cbor2 blake3 && python3 ledger-schema/vectors/crosscheck.py"""
import json, os, sys
import blake3, cbor2

here = os.path.dirname(os.path.abspath(__file__))
vectors = json.load(open(os.path.join(here, "positive.json")))
WORKER_EVENT_SCHEMA = "closure-ledger/worker-payload/v1"
ALLOWED = {"DISCOVERY": ["PROPOSALS"], "PLAN": ["PROPOSALS"], "IMPLEMENT": ["COMPLETION_REQUEST"],
           "EVIDENCE_BUILD": [], "FINAL_VERIFY": []}


def raw_digest(context, data):
    return blake3.blake3(data, derive_key_context="closure-ledger v1 " + context).digest()


def digest(context, value):
    """A record digest: derive_key(context, canonical CBOR of the preimage)."""
    return raw_digest(context, cbor2.dumps(value, canonical=True))


failures = []
counts = {}


def check(name, what, found, expected):
    counts[what] = counts.get(what, 0) + 1
    if found != expected:
        failures.append(f"{name}: {what}: vector has {found.hex() if found else found}, "
                        f"formula gives {expected.hex() if expected else expected}")


policies, profiles, goals, evidence, manifests, decisions = {}, {}, {}, {}, {}, {}
registries = {}
receipts = set()  # receiptDigests of the selections recorded so far


def binding(name, known, b, what):
    if b["id"] in known:
        check(name, what + " binding", b["digest"], known[b["id"]][0])


# The ignored-delivery reasons of docs/commands.md ("worker-event") and ledger.cddl: each
# has a frozen vector, and no vector carries another.
IGNORED_REASONS = {"STALE_ATTEMPT", "ATTEMPT_ENDED", "MANIFEST_MISMATCH", "WORKFLOW_VERSION_CHANGED",
                   "GOAL_REVISED", "CONTEXT_CHANGED", "STREAM_ENDED"}
ignored_seen = set()

prev = bytes(32)
for v in vectors:
    name = v["name"]
    raw = bytes.fromhex(v["hex"])
    value = cbor2.loads(raw)
    again = cbor2.dumps(value, canonical=True)
    assert again == raw, f"{name}: cbor2 canonical re-encoding differs"
    h = blake3.blake3(raw, derive_key_context="closure-ledger v1 entry").hexdigest()
    assert "b3:" + h == v["hash"], f"{name}: hash differs"
    assert value["prev"] == prev, f"{name}: prev link differs"
    assert value["v"] == 1 and value["seq"] == v["seq"]
    prev = bytes.fromhex(h)
    (kind, r), = value["event"].items()
    assert kind == v["kind"], name
    if kind == "workerDeliveryIgnored":
        assert r["reason"] in IGNORED_REASONS, f"{name}: unknown reason {r['reason']}"
        ignored_seen.add(r["reason"])

    if kind == "policyBundleInstalled":
        check(name, "policy bundle", r["digest"], digest("policy bundle", r["bundle"]))
        policies[r["policyId"]] = (r["digest"], r["bundle"])
    elif kind == "executionProfileInstalled":
        check(name, "execution profile", r["digest"], digest("execution profile", r["profile"]))
        profiles[r["profileId"]] = (r["digest"], r["profile"])
    elif kind == "goalCreated":
        goals[(r["goalId"], 1)] = r["content"]
    elif kind == "goalRevised":
        goals[(r["goalId"], r["revision"])] = r["content"]
    elif kind == "workflowStarted":
        binding(name, policies, r["policy"], "policy")
        binding(name, profiles, r["profile"], "profile")
    elif kind == "projectSourceRecorded":
        # over the content's UTF-8 bytes themselves, not a CBOR encoding
        check(name, "project source", r["digest"], raw_digest("source", r["content"].encode("utf-8")))
    elif kind == "attemptStarted":
        m = r["manifest"]
        check(name, "context manifest", r["manifestDigest"], digest("context manifest", m))
        if "selectionReceipt" in r or "selectionReceipt" in m:
            # compiler/3 (issue #15): the event and its manifest name the same receipt, of a
            # selection recorded earlier in the ledger.
            check(name, "selection receipt bound", r.get("selectionReceipt"), m.get("selectionReceipt"))
            if r.get("selectionReceipt") not in receipts:
                failures.append(f"{name}: selectionReceipt names no earlier selection's receipt")
        manifests[r["attemptId"]] = (r["manifestDigest"], m)
        binding(name, policies, m["policy"], "policy")
        binding(name, profiles, m["profile"], "profile")
        if m["policy"]["id"] in policies:
            bundle = policies[m["policy"]["id"]][1]
            phase_policy = [p for p in bundle["phases"] if p["phase"] == m["phase"]]
            if phase_policy:
                grant = {"phase": m["phase"], "capabilities": phase_policy[0]["capabilities"]}
                check(name, "capability grant", m["capabilityGrantDigest"], digest("capability grant", grant))
            contract = {"maxEventBytes": bundle["maxEventBytes"], "workerEventSchema": WORKER_EVENT_SCHEMA,
                        "allowedResultKinds": ALLOWED[m["phase"]]}
            check(name, "response contract", m["responseContractDigest"], digest("response contract", contract))
        for e in m["entries"]:
            if e["kind"] == "goal":
                content = goals.get((m["goalId"], e["sourceRevision"]))
                if content is not None:
                    check(name, "goal entry sourceDigest", e.get("sourceDigest"), digest("source", content))
                    check(name, "goal entry renderedDigest", e["renderedDigest"], digest("rendered entry", content))
            elif e["kind"] == "identity":
                assert "sourceDigest" not in e, name
                identity = {k: m[k] for k in ("phase", "goalId", "attemptId", "workflowId", "goalRevision",
                                              "workflowVersion")}
                for key, field in (("plan", "plan"), ("candidateDigest", "candidateBaseDigest"),
                                   ("generationId", "candidateGenerationId")):
                    if key in m:
                        identity[field] = m[key]
                check(name, "identity entry renderedDigest", e["renderedDigest"], digest("rendered entry", identity))
    elif kind == "dispatchClaimed":
        binding(name, profiles, r["profile"], "profile")
        if r["attemptId"] in manifests:
            digest_, m = manifests[r["attemptId"]]
            check(name, "dispatch manifestDigest", r["manifestDigest"], digest_)
            check(name, "dispatch packageDigest", r["packageDigest"], m["packageDigest"])
    elif kind == "workerEventAdmitted":
        check(name, "worker payload", r["payloadDigest"], digest("worker payload", r["payload"]))
        if r["attemptId"] in manifests:
            check(name, "worker event manifestDigest", r["manifestDigest"], manifests[r["attemptId"]][0])
    elif kind == "evidenceRecorded":
        evidence[r["evidenceId"]] = digest("evidence record", r)
    elif kind == "acceptanceDecided":
        im = r["inputManifest"]
        ids = [e["evidenceId"] for e in im["evidence"]]
        # sorted by evidence id: strictly ascending bytewise order of the 16 id bytes
        assert ids and all(a < b for a, b in zip(ids, ids[1:])), f"{name}: evidence set order"
        for e in im["evidence"]:
            if e["evidenceId"] in evidence:
                check(name, "evidence reference recordDigest", e["recordDigest"], evidence[e["evidenceId"]])
        binding(name, policies, im["policy"], "policy")
        check(name, "acceptance input manifest", r["inputManifestDigest"],
              digest("acceptance input manifest", im))
        check(name, "evidence set", r["evidenceSetDigest"], digest("evidence set", im["evidence"]))
        core = {k: r[k] for k in ("reasons", "verdict", "workflowId", "generationId", "candidateDigest",
                                  "evidenceSetDigest", "inputManifestDigest")}
        check(name, "acceptance decision", r["decisionDigest"], digest("acceptance decision", core))
        decisions[r["decisionId"]] = r
    elif kind == "repairRecorded":
        core = {k: x for k, x in r.items() if k not in ("repairId", "repairDigest")}
        check(name, "repair record", r["repairDigest"], digest("repair record", core))
        if r["decisionId"] in decisions:
            d = decisions[r["decisionId"]]
            for field in ("decisionDigest", "inputManifestDigest", "evidenceSetDigest"):
                check(name, "repair " + field, r[field], d[field])
            check(name, "repair parentCandidateDigest", r["parentCandidateDigest"], d["candidateDigest"])
    elif kind == "sourceRegistryRecorded":
        reg = r["registry"]
        for src in reg["sources"]:
            refs = []
            for res in src["resources"]:
                if "content" in res:
                    check(name, "source resource", res["digest"], raw_digest("source resource", res["content"]))
                    assert len(res["content"]) == res["bytes"], name
                ref = {"path": res["path"], "bytes": res["bytes"], "digest": res["digest"]}
                # `executable` is present (true) only for an executable file (outside review 56).
                if res.get("executable"):
                    ref["executable"] = True
                refs.append(ref)
            check(name, "registry source", src["contentDigest"], digest("registry source", refs))
        check(name, "source registry", r["registryDigest"], digest("source registry", reg))
        registries[r["registryDigest"]] = reg
    elif kind == "profileRevisionRecorded":
        # The plan and generation digests are projections the runtime re-derives from the
        # registry (docs/profiles.md); here only the registry binding is checked.
        counts["profile revision registry binding"] = counts.get("profile revision registry binding", 0) + 1
        if r["registryDigest"] not in registries:
            failures.append(f"{name}: registryDigest names no earlier registry vector")

    elif kind == "selectionRecorded":
        # Issue #15 (docs/selection.md): the binding and the decision digests.
        keys = ("phase", "taskId", "sessionId", "noWorkflow", "planDigest", "queryDigest",
                "taskRevision", "routingPolicy", "triggerDigest")
        bound = {k: r[k] for k in keys if k in r}
        check(name, "selection binding", r["bindingDigest"], digest("selection binding", bound))
        body = {"decision": r["decision"], "candidates": [c["id"] for c in r["candidates"]],
                "explicitIds": r["explicitIds"], "selectedIds": r["selectedIds"],
                "bindingDigest": r["bindingDigest"]}
        check(name, "selection", r["selectionDigest"], digest("selection", body))
        if r["registryDigest"] not in registries:
            failures.append(f"{name}: registryDigest names no earlier registry vector")
        # The receipt (docs/selection.md "Receipts and bindings"): never the prose.
        loaded = []
        for res in r["resources"]:
            if not loaded or loaded[-1] != res["id"]:
                loaded.append(res["id"])
        receipt = {k: r[k] for k in ("phase", "reason", "taskId", "decision", "resources", "sessionId",
                                     "planDigest", "explicitIds", "queryDigest", "selectedIds", "taskRevision",
                                     "bindingDigest", "routingPolicy", "registryDigest", "profileRevision",
                                     "selectionDigest") if k in r}
        receipt["loadedIds"] = loaded
        receipts.add(raw_digest("selection receipt", cbor2.dumps(receipt, canonical=True)))

if ignored_seen != IGNORED_REASONS:
    failures.append(f"ignored-delivery reasons without a vector: {sorted(IGNORED_REASONS - ignored_seen)}")
if failures:
    print("\n".join(failures))
    sys.exit(f"crosscheck: {len(failures)} record digest(s) differ from the documented formulas")
summary = ", ".join(f"{k} {n}" for k, n in sorted(counts.items()))
print(f"crosscheck: {len(vectors)} positive vectors verified by cbor2 + blake3; digests checked: {summary}")
