#!/usr/bin/env python3
"""Outside verifier for closure-ledger journal v3 / entries v1, written from docs/format.md only."""
import sys, os, struct, json
from blake3 import blake3

def dk(ctx, data):
    return blake3(data, derive_key_context=ctx).digest()

class Bad(Exception): pass

# ---------- strict canonical CBOR walk + decode ----------
class Dec:
    def __init__(s, b): s.b=b; s.i=0
    def head(s):
        b=s.b
        if s.i>=len(b): raise Bad('Truncated')
        ib=b[s.i]; s.i+=1
        mt, ai = ib>>5, ib&31
        if ib in (0xF9,0xFA,0xFB): raise Bad('Float')
        if mt==6: raise Bad('Tag')
        if ib==0xFF: raise Bad('Malformed(break)')
        if mt==7:
            if ai in (20,21): return mt, ai, None
            raise Bad('Simple %02x'%ib)
        if ai in (28,29,30): raise Bad('Malformed')
        if ai==31:
            if mt in (0,1): raise Bad('Malformed')
            raise Bad('Indefinite')
        if ai<24: return mt, ai, ai
        n={24:1,25:2,26:4,27:8}[ai]
        if s.i+n>len(b): raise Bad('Truncated')
        v=int.from_bytes(b[s.i:s.i+n],'big'); s.i+=n
        mins={24:24,25:256,26:65536,27:1<<32}[ai]
        if v<mins: raise Bad('NonShortest')
        return mt, ai, v
    def item(s, depth=0):
        start=s.i
        mt, ai, v = s.head()
        if mt==0: return v
        if mt==1: return ('NEG', -1-v)
        if mt in (2,3):
            if s.i+v>len(s.b): raise Bad('Truncated')
            raw=bytes(s.b[s.i:s.i+v]); s.i+=v
            if mt==2: return raw
            try: return raw.decode('utf-8', errors='strict')
            except UnicodeDecodeError: raise Bad('Schema(invalid utf8)')
        if mt==7: return ai==21
        if depth>=32: raise Bad('TooDeep')
        if v>len(s.b)-s.i: raise Bad('Truncated(count)')
        if mt==4:
            return [s.item(depth+1) for _ in range(v)]
        if mt==5:
            d={}; prev=None
            for _ in range(v):
                ks=s.i; k=s.item(depth+1); kb=s.b[ks:s.i]
                if prev is not None:
                    if kb<prev: raise Bad('KeyOrder %r'%(k,))
                    if kb==prev: raise Bad('DuplicateKey %r'%(k,))
                prev=bytes(kb)
                if not isinstance(k,str): raise Bad('Schema(non-text key)')
                d[k]=s.item(depth+1)
            return d
        raise Bad('?')

def decode_one(b):
    d=Dec(b); v=d.item()
    if d.i!=len(b): raise Bad('TrailingBytes')
    return v

# ---------- my own canonical encoder ----------
def ehead(mt, n):
    if n<24: return bytes([mt<<5|n])
    if n<256: return bytes([mt<<5|24,n])
    if n<65536: return bytes([mt<<5|25])+n.to_bytes(2,'big')
    if n<1<<32: return bytes([mt<<5|26])+n.to_bytes(4,'big')
    return bytes([mt<<5|27])+n.to_bytes(8,'big')
def enc(x):
    if x is True: return b'\xf5'
    if x is False: return b'\xf4'
    if isinstance(x,int):
        if x<0: raise Bad('negative')
        return ehead(0,x)
    if isinstance(x,tuple) and x[0]=='NEG': return ehead(1,-1-x[1])
    if isinstance(x,(bytes,bytearray)): return ehead(2,len(x))+bytes(x)
    if isinstance(x,str): b=x.encode(); return ehead(3,len(b))+b
    if isinstance(x,list): return ehead(4,len(x))+b''.join(enc(i) for i in x)
    if isinstance(x,dict):
        items=sorted(((enc(k),enc(v)) for k,v in x.items()), key=lambda kv: kv[0])
        return ehead(5,len(items))+b''.join(k+v for k,v in items)
    raise Bad('cannot encode %r'%type(x))

def walk_types(x, path, out):
    """collect forbidden-for-schema things: negative ints"""
    if isinstance(x,tuple): out.append(('negative int', path))
    elif isinstance(x,dict):
        for k,v in x.items(): walk_types(v, path+'.'+k, out)
    elif isinstance(x,list):
        for i,v in enumerate(x): walk_types(v, path+'[%d]'%i, out)

# ---------- journal v3 ----------
MAGIC3=b'CLJ3'; END3=b'CLJ3-END'
HCTX='closure-ledger v3 journal record header'; PCTX='closure-ledger v3 journal record payload'
problems=[]; notes=[]
def P(msg): problems.append(msg); print('MISMATCH:', msg)
def N(msg): notes.append(msg); print('note:', msg)

def read_journal(jdir):
    names=sorted(os.listdir(jdir))
    records=[]
    nextseq=0
    for si,name in enumerate(names):
        if not (name.endswith('.clj') and len(name)==24 and name[:20].isdigit()):
            P('unexpected file in journal/: %s'%name); continue
        b=open(os.path.join(jdir,name),'rb').read()
        if int(name[:20])!=nextseq: P('segment %s not named for first seq %d'%(name,nextseq))
        v2 = b[:4]==b'CLJ2'
        if v2: N('segment %s is a v2 segment (read by the v2 rules)'%name)
        magic=b'CLJ2' if v2 else MAGIC3
        hctx=HCTX.replace('v3','v2') if v2 else HCTX; pctx=PCTX.replace('v3','v2') if v2 else PCTX
        off=0
        while off<len(b):
            if off%8 and not v2: P('record at unaligned offset %d'%off)
            rest=b[off:]
            if not any(rest):
                if si!=len(names)-1 or v2: P('zeros after last record of non-last segment')
                N('segment %s: %d unwritten zero bytes after last record at offset %d (file %d bytes)'%(name,len(rest),off,len(b)))
                break
            if len(rest)<60: P('incomplete header at %d'%off); break
            if rest[:4]!=magic: P('no record magic at %d: %s'%(off,rest[:4].hex())); break
            hdr=rest[:20]
            if rest[20:28]!=dk(hctx,hdr)[:8]: P('header check mismatch at %d'%off); break
            plen,fseq,cnt=struct.unpack('>IQI',rest[4:20])
            if not (1<=plen<=16777216 and 1<=cnt<=4096): P('header out of bounds at %d'%off); break
            p=0 if v2 else (4-plen)%8; L=60+plen if v2 else 68+plen+p
            if L%8 and not v2: P('record length %d not multiple of 8'%L)
            if len(rest)<L: P('incomplete record at %d'%off); break
            payload=rest[60:60+plen]
            if rest[28:60]!=dk(pctx,hdr+payload): P('payload check mismatch at %d'%off); break
            pad=rest[60+plen:60+plen+p]
            if pad!=b'\0'*p: P('padding not zero at %d: %s'%(off,pad.hex()))
            if not v2 and rest[L-8:L]!=END3: P('end marker mismatch at %d: %s'%(off,rest[L-8:L].hex()))
            if fseq!=nextseq: P('SeqGap: record at %d firstSeq %d, expected %d'%(off,fseq,nextseq))
            records.append(dict(seg=name,off=off,firstSeq=fseq,count=cnt,plen=plen,pad=p,L=L,payload=payload))
            nextseq=fseq+cnt
            off+=L
    return records

def main(d):
    jdir=os.path.join(d,'journal')
    recs=read_journal(jdir)
    entries=[]
    for r in recs:
        fb=r['payload']
        if len(fb)>16777216: P('frame TooLarge')
        if fb[:12]!=bytes.fromhex('A26176016765')+b'ntries' and fb[:12]!=bytes.fromhex('a2617601')+bytes([0x67])+b'entries'[:7]:
            pass
        if not fb.startswith(bytes.fromhex('a2617601')+b'\x67entries'):
            P('frame at %s@%d does not begin A2 61 76 01 67 "entries": %s'%(r['seg'],r['off'],fb[:12].hex()))
        try: fr=decode_one(fb)
        except Bad as e: P('frame at %d not canonical: %s'%(r['off'],e)); continue
        if set(fr)!={'v','entries'} or fr['v']!=1: P('frame keys/version wrong: %r'%list(fr))
        if enc(fr)!=fb: P('frame re-encode differs at %d'%r['off'])
        es=fr['entries']
        if not (1<=len(es)<=4096): P('FrameEntries %d'%len(es))
        if len(es)!=r['count']: P('HeaderMismatch: count %d vs %d entries'%(r['count'],len(es)))
        for e in es:
            if not isinstance(e,bytes): P('frame entry not bstr'); continue
            if len(e)>1048576: P('entry TooLarge')
            entries.append((r,e))
    return recs, entries

CTX=lambda k: 'closure-ledger v1 '+k
def D(kind, value): return dk(CTX(kind), enc(value))
def Draw(kind, raw): return dk(CTX(kind), raw)
B32='0123456789ABCDEFGHJKMNPQRSTVWXYZ'
def ulid(b):
    n=int.from_bytes(b,'big'); return ''.join(B32[(n>>(5*(25-i)))&31] for i in range(26))
def hx(b): return 'b3:'+b.hex()

ENTRY_KEYS=['v','seq','prev','event','ledger','timeMs']
stats={'digests_checked':0,'digests_unverifiable':[]}
def chk(label, got, want):
    stats['digests_checked']+=1
    if got!=want: P('%s: recorded %s, recomputed %s'%(label, got.hex() if isinstance(got,bytes) else got, want.hex() if isinstance(want,bytes) else want))

def check_entries(entries):
    import cbor2
    prevhash=b'\0'*32; ledger=None; lastT=-1
    st=dict(policies={}, profiles={}, goals={}, facts={}, sources={}, evidence={}, evseq={}, decisions={}, gens={}, manifests={}, attempts={}, seqs={})
    for idx,(r,eb) in enumerate(entries):
        tag='seq %d'%idx
        if not eb.startswith(bytes.fromhex('a6617601')): P('%s: entry does not begin A6 61 76 01: %s'%(tag,eb[:4].hex()))
        try: e=decode_one(eb)
        except Bad as x: P('%s: entry not canonical per walk: %s'%(tag,x)); continue
        if enc(e)!=eb: P('%s: my canonical re-encoding differs'%tag)
        try:
            c=cbor2.dumps(cbor2.loads(eb), canonical=True)
            if c!=eb: P('%s: cbor2 canonical re-encoding differs'%tag)
        except Exception as x: P('%s: cbor2: %s'%(tag,x))
        neg=[]; walk_types(e,'',neg)
        if neg: P('%s: negative ints %r'%(tag,neg))
        if list(e)!=ENTRY_KEYS: P('%s: entry keys %r'%(tag,list(e)))
        if e.get('v')!=1: P('%s: v=%r'%(tag,e.get('v')))
        if e.get('seq')!=idx: P('%s: seq field %r'%(tag,e.get('seq')))
        if idx<r['firstSeq'] or idx>=r['firstSeq']+r['count']: P('%s outside its record header range'%tag)
        if e.get('prev')!=prevhash: P('%s: prev %s != hash(seq-1) %s'%(tag,e.get('prev',b'').hex(),prevhash.hex()))
        if not (isinstance(e.get('ledger'),bytes) and len(e['ledger'])==16): P('%s: ledger not 16-byte bstr'%tag)
        if ledger is None: ledger=e['ledger']
        elif e['ledger']!=ledger: P('%s: ledger id differs from genesis'%tag)
        if not isinstance(e.get('timeMs'),int) or e['timeMs']<lastT: P('%s: timeMs decreases'%tag)
        lastT=e['timeMs']
        ev=e['event']
        if not (isinstance(ev,dict) and len(ev)==1): P('%s: event not a 1-key map'%tag); continue
        (kind,rec),=ev.items()
        if (idx==0)!=(kind=='ledgerInitialized'): P('%s: ledgerInitialized placement (%s)'%(tag,kind))
        h=dk('closure-ledger v1 entry', eb)
        st['seqs'][idx]=(kind,rec,h)
        prevhash=h
        try: check_record(idx, kind, rec, st)
        except Exception as x: P('%s: verifier exception in %s: %r'%(tag,kind,x))
    return prevhash, ledger

KNOWN_KINDS=set('''ledgerInitialized policyBundleInstalled executionProfileInstalled goalCreated goalRevised workflowStarted phaseAdvanced
factProposed factConfirmed factInvalidated humanDecisionRecorded projectSourceRecorded scenarioRecorded obligationRecorded blockerRaised blockerResolved
generationOpened generationFrozen attemptStarted dispatchClaimed attemptFinished attemptFailed attemptCancelled workerEventAdmitted workerDeliveryIgnored
evidenceRecorded acceptanceDecided repairRecorded workflowCancelled selectionRecorded'''.split())

def check_binding(tag, b, st):
    if 'policy' in b:
        pol=b['policy']; want=st['policies'].get(pol['id'])
        if want is None: P('%s: policy binding names unknown policy'%tag)
        else: chk(tag+' policy.digest', pol['digest'], want[0])
    if 'profile' in b:
        pr=b['profile']; want=st['profiles'].get(pr['id'])
        if want is None: P('%s: profile binding names unknown profile'%tag)
        else: chk(tag+' profile.digest', pr['digest'], want[0])

def check_record(seq, kind, rec, st):
    tag='seq %d %s'%(seq,kind)
    if kind not in KNOWN_KINDS:
        N('%s: event kind not in format.md catalog'%tag)
    if kind=='policyBundleInstalled':
        want=D('policy bundle', rec['bundle']); chk(tag+'.digest', rec['digest'], want)
        st['policies'][rec['policyId']]=(rec['digest'], rec['bundle'])
    elif kind=='executionProfileInstalled':
        want=D('execution profile', rec['profile']); chk(tag+'.digest', rec['digest'], want)
        st['profiles'][rec['profileId']]=(rec['digest'], rec['profile'])
    elif kind in ('goalCreated','goalRevised'):
        st['goals'][(rec['goalId'], rec.get('revision',1))]=rec['content']
    elif kind=='projectSourceRecorded':
        chk(tag+'.digest', rec['digest'], Draw('source', rec['content'].encode()))
        st['sources'][rec['sourceId']]=(seq,rec)
    elif kind in ('humanDecisionRecorded','scenarioRecorded','obligationRecorded','blockerRaised'):
        idk={'humanDecisionRecorded':'decisionId','scenarioRecorded':'scenarioId','obligationRecorded':'obligationId','blockerRaised':'blockerId'}[kind]
        st.setdefault('misc',{})[ulid(rec[idk])]=(seq,rec)
    elif kind=='sourceRegistryRecorded' and False: pass
    elif kind=='factProposed':
        st['facts'][(rec['factId'],rec['revision'])]=rec
    elif kind=='workflowStarted':
        check_binding(tag, rec, st)
    elif kind=='generationOpened':
        st['gens'][rec['generationId']]=dict(rec)
        if 'parent' in rec:
            par=st['gens'].get(rec['parent'])
            if par and 'candidateDigest' in par: chk(tag+' baseDigest = parent frozen candidateDigest', rec['baseDigest'], par['candidateDigest'])
    elif kind=='generationFrozen':
        st['gens'].setdefault(rec['generationId'],{}).update(candidateDigest=rec['candidateDigest'], changeSetDigest=rec['changeSetDigest'])
    elif kind=='attemptStarted':
        m=rec['manifest']
        md=D('context manifest', m); chk(tag+'.manifestDigest', rec['manifestDigest'], md)
        st['attempts'][rec['attemptId']]=(rec, md)
        check_binding(tag+' manifest', m, st)
        for k in ('phase','attemptId','workflowId','workflowVersion','generationId','selectionReceipt'):
            if (k in rec)!=(k in m) or rec.get(k)!=m.get(k): P('%s: envelope %s %r != manifest %r'%(tag,k,rec.get(k),m.get(k)))
        pol=st['policies'].get(m['policy']['id'])
        if pol:
            bundle=pol[1]
            ph=[p for p in bundle['phases'] if p['phase']==m['phase']]
            caps=ph[0]['capabilities'] if ph else None
            grant={'phase':m['phase'],'capabilities':caps}
            chk(tag+' capabilityGrantDigest', m['capabilityGrantDigest'], D('capability grant', grant))
            ark={'DISCOVERY':['PROPOSALS'],'PLAN':['PROPOSALS'],'IMPLEMENT':['COMPLETION_REQUEST']}.get(m['phase'],[])
            contract={'maxEventBytes':bundle['maxEventBytes'],'workerEventSchema':'closure-ledger/worker-payload/v1','allowedResultKinds':ark}
            chk(tag+' responseContractDigest', m['responseContractDigest'], D('response contract', contract))
        if 'candidateDigest' in m:
            g=st['gens'].get(m.get('generationId'))
            if g: chk(tag+' manifest candidateDigest = generation baseDigest', m['candidateDigest'], g['baseDigest'])
        check_manifest_entries(tag, m, st, grant if pol else None, contract if pol else None, ph[0] if pol and ph else None)
    elif kind=='dispatchClaimed':
        a=st['attempts'].get(rec['attemptId'])
        if a:
            chk(tag+'.manifestDigest', rec['manifestDigest'], a[1])
            chk(tag+'.packageDigest (copy)', rec['packageDigest'], a[0]['manifest']['packageDigest'])
            if rec['workflowVersion']!=a[0]['workflowVersion']: P(tag+' workflowVersion differs')
        check_binding(tag, rec, st)
    elif kind=='workerEventAdmitted':
        chk(tag+'.payloadDigest', rec['payloadDigest'], D('worker payload', rec['payload']))
        a=st['attempts'].get(rec['attemptId'])
        if a: chk(tag+'.manifestDigest (copy)', rec['manifestDigest'], a[1])
    elif kind=='evidenceRecorded':
        d=D('evidence record', rec); st['evidence'][rec['evidenceId']]=(d,rec,seq)
        g=st['gens'].get(rec['generationId'])
        if g and 'candidateDigest' in g: chk(tag+' candidateDigest (copy)', rec['candidateDigest'], g['candidateDigest'])
    elif kind=='acceptanceDecided':
        im=rec['inputManifest']; ev=im['evidence']
        ids=[x['evidenceId'] for x in ev]
        if ids!=sorted(set(ids)) or not (1<=len(ids)<=128): P(tag+' evidence not strictly ascending / size')
        for x in ev:
            e=st['evidence'].get(x['evidenceId'])
            if e is None: P(tag+' names unknown evidence')
            else: chk(tag+' evidence recordDigest', x['recordDigest'], e[0])
        check_binding(tag+' inputManifest', im, st)
        chk(tag+'.evidenceSetDigest', rec['evidenceSetDigest'], D('evidence set', ev))
        chk(tag+'.inputManifestDigest', rec['inputManifestDigest'], D('acceptance input manifest', im))
        pre={k:v for k,v in rec.items() if k not in ('decisionId','decisionDigest','inputManifest')}
        chk(tag+'.decisionDigest', rec['decisionDigest'], D('acceptance decision', pre))
        g=st['gens'].get(rec['generationId'])
        if g and 'candidateDigest' in g: chk(tag+' candidateDigest (copy)', rec['candidateDigest'], g['candidateDigest'])
        st['decisions'][rec['decisionId']]=(rec,seq)
    elif kind=='repairRecorded':
        st.setdefault('repairs',{})[rec['repairId']]=rec
        pre={k:v for k,v in rec.items() if k not in ('repairId','repairDigest')}
        chk(tag+'.repairDigest', rec['repairDigest'], D('repair record', pre))
        dd=st['decisions'].get(rec['decisionId'])
        if dd:
            for k in ('decisionDigest','inputManifestDigest','evidenceSetDigest'):
                chk(tag+'.'+k+' (copy)', rec[k], dd[0][k])
        g=st['gens'].get(rec['parentGenerationId'])
        if g and 'candidateDigest' in g: chk(tag+'.parentCandidateDigest (copy)', rec['parentCandidateDigest'], g['candidateDigest'])
    elif kind=='sourceRegistryRecorded':
        st['registry']=rec['registry']
        for s in rec['registry']['sources']:
            for res in s['resources']:
                c=res['content']; c=c if isinstance(c,bytes) else c.encode()
                if dk('closure-ledger v1 source resource', c)==res['digest']: stats['digests_checked']+=1
                else: stats['digests_unverifiable'].append(tag+' resource '+s['id']+' digest (guessed preimage: source resource ctx over raw content) did not match')
        stats['digests_unverifiable'].append(tag+' registryDigest / contentDigest (preimage not in format.md)')
    elif kind in ('profileRevisionRecorded','selectionRecorded'):
        for k in rec:
            if k.endswith('Digest') or k=='previous': stats['digests_unverifiable'].append('%s.%s (preimage not in format.md)'%(tag,k))

def check_manifest_entries(tag, m, st, grant, contract, phasepol):
    for i,en in enumerate(m['entries']):
        k=en['kind']; t='%s manifest.entries[%d] %s'%(tag,i,k); pre=None
        if k=='identity':
            pre={x:m[x] for x in ('phase','goalId','attemptId','workflowId','goalRevision','workflowVersion','plan') if x in m}
            if 'candidateDigest' in m: pre['candidateBaseDigest']=m['candidateDigest']
            if 'generationId' in m: pre['candidateGenerationId']=m['generationId']
            if en.get('sourceRevision')!=m['workflowVersion']: P(t+' sourceRevision != workflow version')
        elif k in ('policy','profile'):
            b=m[k]; pre={'id':b['id'],'digest':b['digest']}
            if en.get('sourceDigest')!=b['digest']: P(t+' sourceDigest != binding digest')
            if en['sourceRef']!='%s/%s'%(k,ulid(b['id'])): P(t+' sourceRef %s'%en['sourceRef'])
        elif k=='invariant':
            pol=st['policies'][m['policy']['id']][1]; j=[x for x in m['entries'][:i] if x['kind']=='invariant']
            pre=pol['invariants'][len(j)]
        elif k=='phase' and grant:
            pre=[phasepol['objective'], grant, contract]
        elif k=='goal':
            c=st['goals'].get((m['goalId'],m['goalRevision']))
            if c is not None:
                pre=c; chk(t+' sourceDigest (goal content)', en['sourceDigest'], D('source', c))
        elif k=='candidate':
            g=st['gens'].get(m['generationId']); pre=[m['generationId'], g['baseDigest']]
        elif k=='fact':
            fid=en['sourceRef'].split('/')[1]
            f=[v for (a,rv),v in st['facts'].items() if ulid(a)==fid and rv==en['sourceRevision']]
            if f:
                f=f[0]; pre={'factId':f['factId'],'revision':f['revision'],'statement':f['statement']}
                chk(t+' sourceDigest', en['sourceDigest'], Draw('source', f['statement'].encode()))
        elif k=='projectSource':
            sid=en['sourceRef'].split('/')[1]
            s=[v for a,v in st['sources'].items() if ulid(a)==sid]
            if s:
                sq,r=s[0]; pre={'path':r['path'],'digest':r['digest'],'content':r['content'],'revision':r['revision'],'sourceId':r['sourceId']}
                chk(t+' sourceDigest', en['sourceDigest'], r['digest'])
        elif k in ('humanDecision','scenario','obligation','blocker'):
            sid=en['sourceRef'].split('/')[1]; x=st.get('misc',{}).get(sid)
            if x:
                sq,r=x
                keys={'humanDecision':('answer','question','decisionId'),'scenario':('title','scenarioId','description'),
                      'obligation':('checkSpecId','description','obligationId','checkSpecDigest'),'blocker':('blockerId','description')}[k]
                pre={kk:r[kk] for kk in keys}
                if en.get('sourceRevision')!=sq: P(t+' sourceRevision %r != seq %d'%(en.get('sourceRevision'),sq))
                if k=='obligation': chk(t+' sourceDigest', en['sourceDigest'], r['checkSpecDigest'])
        elif k=='failedEvidence':
            sid=en['sourceRef'].split('/')[1]
            x=[v for a,v in st['evidence'].items() if ulid(a)==sid]
            if x:
                d,r,sq=x[0]
                pre={'evidenceId':r['evidenceId'],'resultStatus':r['result'],'checkSpecificationId':r['checkSpecId'],'evidenceRecordDigest':d,
                     'checkSpecificationDigest':r['checkSpecDigest'],'evidenceEligibilityState':r['eligibilityState'],
                     'verificationObligationId':r['obligationId'],'evidenceEligibilityVersion':r['eligibilityVersion']}
                chk(t+' sourceDigest', en['sourceDigest'], d)
                if en.get('sourceRevision')!=sq: P(t+' sourceRevision != seq')
        elif k=='taskSelection':
            # field values inferred: resources of the selectionRecorded at sourceRevision, content = registry resource bytes as UTF-8 text
            sel=st['seqs'].get(en['sourceRevision'])
            reg=st.get('registry')
            if sel and sel[0]=='selectionRecorded' and reg:
                pre=[]
                for res in sel[1]['resources']:
                    src=[x for x in reg['sources'] if x['id']==res['id']][0]
                    rr=[x for x in src['resources'] if x['path']==res['path']][0]
                    c=rr['content']; pre.append({'id':res['id'],'path':res['path'],'digest':res['digest'],'content':c.decode() if isinstance(c,bytes) else c})
                    chk(t+' resource digest (copy of registry)', res['digest'], rr['digest'])
                if en['sourceRef']!='selection/'+hx(m['selectionReceipt']) or en.get('sourceDigest')!=m['selectionReceipt']: P(t+' sourceRef/sourceDigest != selectionReceipt')
        elif k=='repairDecision':
            # field values inferred by trial (format.md names the keys only)
            did=en['sourceRef'].split('/')[1]
            dd=[v for a,v in st['decisions'].items() if ulid(a)==did]
            child=st['gens'].get(m.get('generationId'))
            if dd and child and 'repairId' in child:
                dec,dsq=dd[0]
                rep=st['repairs'][child['repairId']]; par=st['gens'][rep['parentGenerationId']]
                fes=[]
                for x in dec['inputManifest']['evidence']:
                    d,r,sq=st['evidence'][x['evidenceId']]
                    if r['result']!='FAIL': continue
                    fes.append({'evidenceId':r['evidenceId'],'resultStatus':r['result'],'checkSpecificationId':r['checkSpecId'],'evidenceRecordDigest':d,
                     'checkSpecificationDigest':r['checkSpecDigest'],'evidenceEligibilityState':r['eligibilityState'],
                     'verificationObligationId':r['obligationId'],'evidenceEligibilityVersion':r['eligibilityVersion']})
                pre={'failedEvidence':fes,'evidenceSetDigest':dec['evidenceSetDigest'],'inputManifestDigest':dec['inputManifestDigest'],
                     'acceptanceDecisionId':dec['decisionId'],'constraintsToPreserve':rep['constraintsToPreserve'],'acceptanceRepairDigest':rep['repairDigest'],
                     'rejectedCandidateDigest':rep['parentCandidateDigest'],'repairCandidateSequence':child['sequence'],'acceptanceDecisionDigest':dec['decisionDigest'],
                     'rejectedCandidateVersion':par['sequence'],'repairCandidateBaseDigest':child['baseDigest'],'repairCandidateGenerationId':child['generationId'],
                     'rejectedCandidateGenerationId':rep['parentGenerationId']}
                chk(t+' sourceDigest = decisionDigest', en['sourceDigest'], dec['decisionDigest'])
                if en.get('sourceRevision')!=dsq: P(t+' sourceRevision != seq of acceptanceDecided')
        if pre is None:
            stats['digests_unverifiable'].append(t+' renderedDigest (not reconstructible from entries alone)')
        else:
            chk(t+' renderedDigest', en['renderedDigest'], D('rendered entry', pre))
    if 'feedbackDigest' in m: stats['digests_unverifiable'].append(tag+' feedbackDigest (item contents not in ledger)')
    stats['digests_unverifiable'].append(tag+' packageDigest (opaque per format.md)')


def selftest():
    cases={'1817':'NonShortest','1900ff':'NonShortest','5817'+'00'*23:'NonShortest','a2617601617600':'DuplicateKey','a2617701617600':'KeyOrder','9f00ff':'Indefinite','f97c00':'Float',
           'f6':'Simple','c000':'Tag','0000':'TrailingBytes','62ff':'Truncated','1c':'Malformed','a1006100':'Schema'}
    for h,want in cases.items():
        try: decode_one(bytes.fromhex(h)); print('selftest FAILED to refuse',h)
        except Bad as x: assert str(x).startswith(want), (h,x)
    x=[{'b':1,'aa':2,'a':[True,b'\x00'*24,'x'*300,2**40]}]
    import cbor2; assert enc(x)==cbor2.dumps(x,canonical=True)
    print('selftest ok')

if __name__=='__main__' and sys.argv[1:2]==['--selftest']: selftest()
elif __name__=='__main__':
    d=sys.argv[1] if len(sys.argv)>1 else '/tmp/outside/demo'
    recs,entries=main(d)
    head,ledger=check_entries(entries)
    print('records:',len(recs),' entries:',len(entries),' ledger id:',ulid(ledger) if ledger else None,' head:',hx(head))
    print('journal records: %d header checks + %d payload checks + padding/end markers verified; entry hashes recomputed: %d'%(len(recs),len(recs),len(entries)))
    print('record digests / copies recomputed and compared:',stats['digests_checked'])
    print('not verifiable from format.md + bytes:',len(stats['digests_unverifiable']))
    for u in stats['digests_unverifiable']: print('  -',u)
    print('MISMATCHES:',len(problems))
    for p in problems: print('  *',p)
