// Run by a netns agent: the test API server (test/helpers/fake-apiserver.ts) inside a
// namespace, where a daemon running there (from the image's root) reaches it on 127.0.0.1
// as a pod reaches KUBERNETES_SERVICE_HOST. One server per agent process.

import type { GoneStorm, KObject, LoggedRequest } from '../helpers/fake-apiserver.ts';
import { FakeApiServer } from '../helpers/fake-apiserver.ts';

let server: FakeApiServer | undefined;

/** Starts it with TLS and a bearer token, holding `objects`; returns its port. */
export async function startApiServer(
  tls: { key: string; cert: string },
  token: string,
  objects: KObject[],
): Promise<number> {
  if (server) throw new Error('the API server is already running in this agent');
  server = await FakeApiServer.start({ tls, token });
  for (const o of objects) server.create(o);
  return Number(new URL(server.url).port);
}

function running(): FakeApiServer {
  if (!server) throw new Error('no API server running in this agent');
  return server;
}

export function apiRequests(): LoggedRequest[] {
  return running().requests;
}

export function apiEvents(): { namespace: string; event: KObject }[] {
  return running().events.map(({ namespace, event }) => ({ namespace, event }));
}

export function apiUpsert(obj: KObject): void {
  running().upsert(obj);
}

export async function stopApiServer(): Promise<void> {
  await server?.close();
  server = undefined;
}

/** Starts it over plain HTTP (the daemon's --master http://...), holding `objects`; returns its port. */
export async function startPlainApiServer(objects: KObject[], token?: string): Promise<number> {
  if (server) throw new Error('the API server is already running in this agent');
  server = await FakeApiServer.start(token === undefined ? {} : { token });
  for (const o of objects) server.create(o);
  return Number(new URL(server.url).port);
}

/** Makes the next `count` requests fail with `status` (a metav1.Status body). */
export function apiFailNext(count: number, status: number): void {
  running().failNext(count, status);
}

/** Hangs the server (accepts, never answers; open watches cut) or lets it answer again. */
export function apiHung(on: boolean): void {
  running().hung = on;
}

/** Starts a 410 storm (every watch answered "too old resource version") or, with null, ends it. */
export function apiGoneStorm(storm: GoneStorm | null): void {
  running().goneStorm(storm ?? undefined);
}

/** Watches answered 410 by the storm so far. */
export function apiGoneSent(): number {
  return running().goneSent;
}
