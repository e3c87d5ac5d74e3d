// Keeps the test API server honest: its list/watch protocol, checked with plain HTTP, as
// kube-apiserver answers (selectors, resourceVersions, paging, 410s, selector transitions).

import test from 'ava';
import { FakeApiServer, parseLabelSelector } from '../../helpers/fake-apiserver.ts';
import { svc } from './objects.ts';

async function json(url: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(url);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** Reads watch events until n have arrived (or the stream ends). */
async function events(
  url: string,
  n: number,
  during?: () => void,
): Promise<{ type: string; object: Record<string, unknown> }[]> {
  const ctrl = new AbortController();
  const res = await fetch(url, { signal: ctrl.signal });
  const reader = res.body!.getReader();
  const out: { type: string; object: Record<string, unknown> }[] = [];
  let buf = '';
  during?.();
  const dec = new TextDecoder();
  while (out.length < n) {
    const { done, value } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i: number;
    while ((i = buf.indexOf('\n')) >= 0) {
      out.push(JSON.parse(buf.slice(0, i)) as { type: string; object: Record<string, unknown> });
      buf = buf.slice(i + 1);
    }
  }
  ctrl.abort();
  return out;
}

test('label selector syntax', (t) => {
  const m = parseLabelSelector('a,!b,c=1,d!=2,e in (x, y),f notin (z)');
  t.true(m({ a: '', c: '1', e: 'x' }));
  t.false(m({ c: '1', e: 'x' }), 'a must exist');
  t.false(m({ a: '', b: '', c: '1', e: 'x' }), 'b must not');
  t.false(m({ a: '', c: '1', d: '2', e: 'x' }));
  t.false(m({ a: '', c: '1', e: 'w' }));
  t.false(m({ a: '', c: '1', e: 'x', f: 'z' }));
  t.throws(() => parseLabelSelector('a in x'));
});

test('lists: kinds, namespaces, selectors, paging from a snapshot, expired continue tokens', async (t) => {
  const s = await FakeApiServer.start();
  t.teardown(() => s.close());
  s.create(svc('a', 'one'));
  s.create(svc('b', 'two', { 'service.kubernetes.io/service-proxy-name': 'x' }));
  s.create(svc('b', 'three'));
  let r = await json(`${s.url}/api/v1/services`);
  t.is(r.body['kind'], 'ServiceList');
  t.is((r.body['metadata'] as { resourceVersion: string }).resourceVersion, s.resourceVersion);
  t.is((r.body['items'] as unknown[]).length, 3);
  r = await json(
    `${s.url}/api/v1/namespaces/b/services?labelSelector=${encodeURIComponent('!service.kubernetes.io/service-proxy-name')}`,
  );
  t.deepEqual(
    (r.body['items'] as { metadata: { name: string } }[]).map((i) => i.metadata.name),
    ['three'],
  );
  r = await json(`${s.url}/api/v1/services?limit=2`);
  const cont = (r.body['metadata'] as { continue?: string }).continue!;
  t.truthy(cont);
  s.create(svc('c', 'four')); // after the snapshot: not on page 2
  s.remove('Service', 'b/two'); // nor is this deletion seen there
  r = await json(`${s.url}/api/v1/services?limit=2&continue=${cont}`);
  t.deepEqual(
    (r.body['items'] as { metadata: { name: string } }[]).map((i) => i.metadata.name),
    ['two'],
    'pages in namespace/name order',
  );
  s.compact();
  r = await json(`${s.url}/api/v1/services?limit=2&continue=${cont}`);
  t.is(r.status, 410);
  t.is(r.body['reason'], 'Expired');
  t.is((await json(`${s.url}/api/v1/pods`)).status, 404);
  t.is((await json(`${s.url}/api/v1/services?labelSelector=${encodeURIComponent('a in')}`)).status, 400);
});

test('watches: replay after a resourceVersion, selector transitions, bookmarks, 410 as an ERROR event', async (t) => {
  const s = await FakeApiServer.start();
  t.teardown(() => s.close());
  const rv0 = s.resourceVersion;
  s.create(svc('a', 'one'));
  const sel = encodeURIComponent('!service.kubernetes.io/service-proxy-name');
  const evs = await events(
    `${s.url}/api/v1/services?watch=true&resourceVersion=${rv0}&allowWatchBookmarks=true&labelSelector=${sel}`,
    5,
    () => {
      s.update(svc('a', 'one', {}, 81));
      s.update(svc('a', 'one', { 'service.kubernetes.io/service-proxy-name': 'x' })); // leaves: DELETED
      s.update(svc('a', 'one', {}, 82)); // comes back: ADDED
      setTimeout(() => s.bookmark(), 20);
    },
  );
  t.deepEqual(
    evs.map((e) => e.type),
    ['ADDED', 'MODIFIED', 'DELETED', 'ADDED', 'BOOKMARK'],
  );
  t.is((evs[4]!.object['metadata'] as { resourceVersion: string }).resourceVersion, s.resourceVersion);
  s.compact();
  const gone = await events(`${s.url}/api/v1/services?watch=true&resourceVersion=${rv0}`, 1);
  t.is(gone[0]!.type, 'ERROR');
  t.like(gone[0]!.object, { kind: 'Status', code: 410, reason: 'Expired' });
  const fromNow = await events(`${s.url}/api/v1/services?watch=true`, 1);
  t.like(fromNow[0], { type: 'ADDED' }, 'no resourceVersion: the current state first');
});
