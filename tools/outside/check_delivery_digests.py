#!/usr/bin/env python3
"""Recomputes the context-delivery digests (registry, registry source, resource, selection
binding, selection, and the derived selection receipt an Attempt names) of a ledger from
the preimages docs/format.md's digest table gives, with verify_from_format.py's independent
canonical CBOR encoder.  Usage: python3 tools/outside/check_delivery_digests.py LEDGER_DIR
(needs `pip install blake3`)."""
import sys, importlib.util
DIR=sys.argv[1]
import os
spec=importlib.util.spec_from_file_location('v',os.path.join(os.path.dirname(os.path.abspath(__file__)),'verify_from_format.py')); v=importlib.util.module_from_spec(spec); sys.argv=['x']; spec.loader.exec_module(v)
recs = v.read_journal(DIR+'/journal')
entries=[]
for r in recs:
    fr=v.decode_one(r['payload'])
    entries += [(r,e) for e in fr['entries']]
ok=bad=0
def chk(label,got,want):
    global ok,bad
    if got==want: ok+=1
    else: bad+=1; print('MISMATCH',label,got.hex(),want.hex() if isinstance(want,bytes) else want)
receipts={}
for r,e in entries:
    ent=v.decode_one(e); ev=ent['event']; (kind,rec),=ev.items()
    if kind=='sourceRegistryRecorded':
        reg=rec['registry']
        chk('registryDigest', v.D('source registry', reg), rec['registryDigest'])
        for src in reg['sources']:
            chk('contentDigest', v.D('registry source', [{'path':x['path'],'bytes':x['bytes'],'digest':x['digest']} for x in src['resources']]), src['contentDigest'])
            for x in src['resources']:
                if 'content' in x: chk('resource digest', v.Draw('source resource', x['content']), x['digest'])
    if kind=='selectionRecorded':
        b={k:rec[k] for k in ['phase','taskId','sessionId','noWorkflow','planDigest','taskRevision','routingPolicy','triggerDigest']}
        if 'queryDigest' in rec: b['queryDigest']=rec['queryDigest']
        chk('bindingDigest', v.D('selection binding', b), rec['bindingDigest'])
        s={'decision':rec['decision'],'candidates':[c['id'] for c in rec['candidates']],'explicitIds':rec['explicitIds'],'selectedIds':rec['selectedIds'],'bindingDigest':rec['bindingDigest']}
        chk('selectionDigest', v.D('selection', s), rec['selectionDigest'])
        loaded=[]
        for x in rec['resources']:
            if not loaded or loaded[-1]!=x['id']: loaded.append(x['id'])
        body={k:rec[k] for k in ['phase','reason','taskId','decision','resources','sessionId','planDigest','explicitIds','selectedIds','taskRevision','bindingDigest','routingPolicy','registryDigest','profileRevision','selectionDigest']}
        body['loadedIds']=loaded
        if 'queryDigest' in rec: body['queryDigest']=rec['queryDigest']
        receipts[v.D('selection receipt', body)]=ent['seq']
    if kind=='attemptStarted' and 'selectionReceipt' in rec:
        sr=rec['selectionReceipt']
        if sr in receipts: ok+=1
        else: bad+=1; print('MISMATCH receipt', sr.hex(), [k.hex()[:12] for k in receipts])
print('ok',ok,'bad',bad,'receipts',len(receipts))
