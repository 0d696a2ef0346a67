#!/usr/bin/env python3
"""The API requests one transition costs, from a kube-apiserver audit log (hack/bench/transitions.sh).

    request_mix.py AUDIT_LOG OUT_JSON

The audit log holds, at level Request, every request but LIST and WATCH in the namespace where
bench_transitions flip drove a few actors through the node agent (one pause and one resume
each). Each request is given to the actor it is about (an Actor by its name, an Event by its
involvedObject, a Worker by the actorRef it writes), and each actor's requests are cut into
transitions at the benchmark's spec PATCHes (desiredState): a transition is that PATCH and
everything the agent sent for the actor until the next one, in the order the API server
received them. For each direction (Paused, Running) the most common sequence of request
kinds is the mix, its bodies those of the transition of median total size; OUT_JSON holds
them for `bench_transitions ceiling --mix`, which replays them.

Exits 1 (and says why) when a direction has no transition: a mix that is not there cannot
be replayed, and a ceiling without it would flatter.
"""
import collections
import json
import sys


def kind(e):
    ref = e.get('objectRef') or {}
    sub = ref.get('subresource')
    return '%s %s%s' % (e['verb'], ref.get('resource', '?'), '/' + sub if sub else '')


def size(e):
    body = e.get('requestObject')
    return 0 if body is None else len(json.dumps(body, separators=(',', ':')))


def main(audit_path, out_path):
    events = []
    with open(audit_path) as f:
        for line in f:
            e = json.loads(line)
            if e.get('stage') != 'ResponseComplete' or e.get('verb') in ('list', 'watch'):
                continue
            events.append(e)
    events.sort(key=lambda e: e['requestReceivedTimestamp'])

    owner_of_event, holder_of_worker = {}, {}
    per_actor = collections.defaultdict(list)  # actor → [transition: [event…]]
    failed = collections.Counter()
    for e in events:
        ref = e.get('objectRef') or {}
        res, body = ref.get('resource'), e.get('requestObject') or {}
        if isinstance(body, list):  # a JSON patch: what its test operations expect is the holder
            tested = {op.get('path'): op.get('value') for op in body if op.get('op') == 'test'}
            body = {'status': {'actorRef': {'name': tested['/status/actorRef/name']}}} \
                if '/status/actorRef/name' in tested else {}
            if e.get('verb') == 'patch' and res == 'workers':
                holder_of_worker[ref.get('name')] = tested.get('/status/actorRef/name')
        actor = None
        if res == 'actors':
            actor = ref.get('name')
        elif res == 'events':
            if e['verb'] == 'create':
                actor = (body.get('involvedObject') or {}).get('name')
                owner_of_event[(body.get('metadata') or {}).get('name')] = actor
            else:
                actor = owner_of_event.get(ref.get('name'))
        elif res == 'workers':
            actor = ((body.get('status') or {}).get('actorRef') or {}).get('name') or holder_of_worker.get(ref.get('name'))
            # A merge patch writes the holder (a claim) or none (a free); a JSON patch frees.
            holder_of_worker[ref.get('name')] = None if isinstance(e.get('requestObject'), list) else actor
        if actor is None:
            continue
        code = (e.get('responseStatus') or {}).get('code', 0)
        if not 200 <= code < 300:
            failed[kind(e) + ' %d' % code] += 1
            continue
        is_flip = e['verb'] == 'patch' and res == 'actors' and not ref.get('subresource')
        desired = (body.get('spec') or {}).get('desiredState') if is_flip else None
        if desired:
            per_actor[actor].append({'desired': desired, 'requests': []})
        if per_actor[actor]:  # requests before an actor's first flip are its boot
            per_actor[actor][-1]['requests'].append(e)

    mix = {}
    for desired in ('Paused', 'Running'):
        seen = [t['requests'] for ts in per_actor.values() for t in ts if t['desired'] == desired]
        if not seen:
            print('request_mix: no %s transition in %s' % (desired, audit_path), file=sys.stderr)
            return 1
        shapes = collections.Counter(tuple(kind(e) for e in t) for t in seen)
        shape, count = shapes.most_common(1)[0]
        same = sorted((t for t in seen if tuple(kind(e) for e in t) == shape),
                      key=lambda t: sum(size(e) for e in t))
        chosen = same[len(same) // 2]
        requests = []
        for e in chosen:
            ref = e.get('objectRef') or {}
            requests.append({'verb': e['verb'], 'resource': ref.get('resource', ''),
                             'subresource': ref.get('subresource', ''),
                             'body': e.get('requestObject')})
        mix[desired] = {'requests': requests, 'transitions': len(seen), 'same_shape': count}
        print('mix → %s: %s (%d of %d recorded transitions in this order)' % (
            desired, ', '.join('%s %d B' % (kind(e).replace(e['verb'], e['verb'].upper(), 1), size(e))
                               for e in chosen), count, len(seen)))
        for other, n in shapes.most_common()[1:]:
            print('    also %d× %s' % (n, ', '.join(other)))
    if failed:
        print('    requests the API server refused while recording (not replayed): %s' %
              ', '.join('%s ×%d' % kv for kv in sorted(failed.items())))
    with open(out_path, 'w') as f:
        json.dump(mix, f, indent=1)
    return 0


if __name__ == '__main__':
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
