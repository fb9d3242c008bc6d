#!/usr/bin/env python3
# Checks a document stepblame wrote against schemas/report.schema.json:
#   schema_check.py doc|ranks|compare SCHEMA FILE
#   schema_check.py jsonl SCHEMA LINES DOC      (the lines are DOC's steps)
#   schema_check.py perfetto SCHEMA FILE NSTEPS (test_report's synthetic trace)
# A field the schema does not list is an error (undocumented); with python3's
# jsonschema installed the document is also checked by it. Exit 0: valid.
import json, re, sys
def resolve(root, ref):
    node = root
    for part in ref.lstrip('#/').split('/'):
        node = node[part]
    return node
TYPES = {'object': dict, 'array': list, 'string': str, 'boolean': bool, 'null': type(None)}
def is_type(v, t):
    if t == 'integer': return isinstance(v, int) and not isinstance(v, bool)
    if t == 'number': return isinstance(v, (int, float)) and not isinstance(v, bool)
    return isinstance(v, TYPES[t])
KNOWN = {'$schema','$id','$defs','$ref','title','description','type','required','properties',
         'additionalProperties','patternProperties','items','enum','const','minimum','maximum'}
def check(root, s, v, path):
    unknown = set(s) - KNOWN
    if unknown: raise SystemExit('checker does not know %s' % unknown)
    if '$ref' in s: check(root, resolve(root, s['$ref']), v, path)
    if 'type' in s:
        ts = s['type'] if isinstance(s['type'], list) else [s['type']]
        if not any(is_type(v, t) for t in ts): fail(path, 'is %r, not %s' % (v, ts))
    if 'const' in s and v != s['const']: fail(path, '%r != %r' % (v, s['const']))
    if 'enum' in s and v not in s['enum']: fail(path, '%r not in %s' % (v, s['enum']))
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if 'minimum' in s and v < s['minimum']: fail(path, '%r < %r' % (v, s['minimum']))
        if 'maximum' in s and v > s['maximum']: fail(path, '%r > %r' % (v, s['maximum']))
    if isinstance(v, dict):
        for k in s.get('required', []):
            if k not in v: fail(path, 'lacks ' + k)
        props = s.get('properties', {})
        for k, x in v.items():
            if k in props: check(root, props[k], x, path + '.' + k); continue
            pat = [p for p in s.get('patternProperties', {}) if re.search(p, k)]
            for p in pat: check(root, s['patternProperties'][p], x, path + '.' + k)
            # the schema leaves objects open for consumers; written by this version, a field
            # the schema does not list is undocumented
            if not pat and s.get('additionalProperties', not ('properties' in s or 'patternProperties' in s)) is False: fail(path, 'undocumented field ' + k)
    if isinstance(v, list) and 'items' in s:
        for i, x in enumerate(v): check(root, s['items'], x, '%s[%d]' % (path, i))
def fail(path, why): raise ValueError(path + ': ' + why)
def validate(schema, doc, sub=None):
    s = resolve(schema, sub) if sub else schema
    check(schema, s, doc, '$')
    try:
        import jsonschema
    except ImportError:
        return
    full = dict(s); full['$defs'] = schema['$defs']
    jsonschema.Draft202012Validator(full).validate(doc)
mode, schema_path, path = sys.argv[1], sys.argv[2], sys.argv[3]
schema = json.load(open(schema_path))
try:
    if mode == 'doc':
        validate(schema, json.load(open(path)))
    elif mode == 'ranks':
        validate(schema, json.load(open(path)), '#/$defs/ranks')
    elif mode == 'compare':
        validate(schema, json.load(open(path)), '#/$defs/compare')
    elif mode == 'jsonl':
        doc = json.load(open(sys.argv[4]))
        lines = [json.loads(l) for l in open(path)]
        if len(lines) != len(doc['steps']): fail('$', '%d lines, %d steps' % (len(lines), len(doc['steps'])))
        for i, (a, b) in enumerate(zip(lines, doc['steps'])):
            validate(schema, a, '#/$defs/step')
            if a.pop('identity', None) != doc['identity']: fail('line %d' % i, 'its identity is not the report\'s')
            if a.pop('loss_total', None) != doc['loss']['total']: fail('line %d' % i, 'its loss_total is not the report\'s loss.total')
            if a != b: fail('line %d' % i, 'differs from steps[%d]' % i)
    elif mode == 'perfetto':
        want_steps = int(sys.argv[4])
        d = json.load(open(path))
        ev = d['traceEvents']
        flows = {}
        for e in ev:
            if e['ph'] not in ('X', 'M', 'C', 's', 'f'): fail('event', 'phase ' + e['ph'])
            if e['ph'] == 'X' and (e['dur'] < 0 or not isinstance(e['ts'], (int, float))): fail('event', repr(e))
            if e['ph'] == 'C' and not 0 <= e['args']['percent'] <= 100: fail('counter', repr(e))
            if e['ph'] in 'sf': flows.setdefault(e['id'], []).append(e)
        for i, f in flows.items():
            if sorted(x['ph'] for x in f) != ['f', 's'] or f[0]['ts'] > f[1]['ts']: fail('flow %s' % i, repr(f))
        cat = lambda c: [e for e in ev if e.get('cat') == c]
        if len(cat('step')) != want_steps: fail('steps', '%d slices, want %d' % (len(cat('step')), want_steps))
        if not cat('gpu'): fail('gpu', 'no GPU stream slices')
        if not cat('blame'): fail('blame', 'no blame slices')
        if not [e for e in cat('interferer') if e['pid'] == 900]: fail('interferer', 'noisy[900] missing')
        if not [e for e in cat('thread') if e['pid'] == 100 and e['tid'] == 101 and e['name'] == 'cpu_wait']: fail('thread', 'no cpu_wait slice on the launcher')
        names = {(e['pid'], e.get('tid')): e['args']['name'] for e in ev
                 if e['ph'] == 'M' and e['name'] in ('process_name', 'thread_name')}
        for e in cat('gpu'):
            if e['ph'] == 'X' and e['name'] != 'launch' and not names.get((e['pid'], e['tid']), '').startswith('stream '): fail('names', 'GPU stream %s unnamed' % e['tid'])
            if e['ph'] == 'X' and e['name'] != 'launch' and not names.get((e['pid'], None), '').startswith('GPU '): fail('names', 'GPU device unnamed')
        if names.get((100, 101)) != 'launcher': fail('names', 'launcher thread unnamed')
        if not any(v.startswith('trainer') for k, v in names.items() if k[1] is None): fail('names', 'no process name for the target')
        if names.get((900, None)) != 'noisy': fail('names', 'interferer process unnamed')
except (ValueError, KeyError, TypeError) as e:
    print('INVALID', e)
    sys.exit(1)
except Exception as e:
    print('INVALID', type(e).__name__, str(e).splitlines()[0])
    sys.exit(1)
print('OK')
