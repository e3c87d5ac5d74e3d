// The manifests under deploy/ as objects, and Kubernetes RBAC's authorisation rule for
// resource requests: which verb, API group and resource an HTTP request to the API server
// is (as the apiserver's RequestInfoResolver names them), and whether a ClusterRole's rules
// allow it (as rbac's RuleAllows: group, resource and verb each match or are "*").

import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { KObject } from './fake-apiserver.ts';

export const DEPLOY_DIR = resolve(import.meta.dirname, '../../deploy');

export interface Manifest {
  file: string;
  obj: KObject;
}

/** Every document of every deploy/*.yaml, in file order. Throws on a YAML error. */
export function loadDeployManifests(dir = DEPLOY_DIR): Manifest[] {
  const out: Manifest[] = [];
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()) {
    for (const doc of parseAllDocuments(readFileSync(join(dir, file), 'utf8'))) {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors.map((e) => e.message).join('; ')}`);
      const obj = doc.toJS() as KObject | null;
      if (obj !== null) out.push({ file, obj });
    }
  }
  return out;
}

/** The one object of this kind (and name, if given); throws when absent or repeated. */
export function manifestOf(all: readonly Manifest[], kind: string, name?: string): KObject {
  const hits = all.filter((m) => m.obj['kind'] === kind && (name === undefined || m.obj['metadata']?.name === name));
  if (hits.length !== 1)
    throw new Error(`expected one ${kind}${name ? ` ${name}` : ''} in deploy/, found ${hits.length}`);
  return hits[0]!.obj;
}

export interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  verbs: string[];
}

export interface RequestAttributes {
  verb: string;
  group: string;
  resource: string;
}

/**
 * The attributes of a resource request: /api/v1[/namespaces/NS]/RESOURCE[/NAME] (core) or
 * /apis/GROUP/VERSION[/namespaces/NS]/RESOURCE[/NAME]; GET is get with a name, else list, or
 * watch with watch=true; POST create, PUT update, PATCH patch, DELETE delete. Undefined for
 * what is not a resource request (discovery, /version ...).
 */
export function requestAttributes(method: string, path: string, watch: boolean): RequestAttributes | undefined {
  const parts = path.split('/').filter((p) => p !== '');
  let group: string;
  let rest: string[];
  if (parts[0] === 'api' && parts.length >= 3) [group, rest] = ['', parts.slice(2)];
  else if (parts[0] === 'apis' && parts.length >= 4) [group, rest] = [parts[1]!, parts.slice(3)];
  else return undefined;
  if (rest[0] === 'namespaces' && rest.length >= 3) rest = rest.slice(2);
  const [resource, name] = rest;
  if (resource === undefined) return undefined;
  const verbs: Record<string, string> = { POST: 'create', PUT: 'update', PATCH: 'patch', DELETE: 'delete' };
  const verb = method === 'GET' ? (watch ? 'watch' : name !== undefined ? 'get' : 'list') : verbs[method];
  if (verb === undefined) return undefined;
  return { verb, group, resource };
}

const matches = (list: readonly string[] | undefined, value: string): boolean =>
  (list ?? []).some((x) => x === '*' || x === value);

/** Whether any rule allows the request. */
export function rulesAllow(rules: readonly PolicyRule[], a: RequestAttributes): boolean {
  return rules.some(
    (r) => matches(r.apiGroups, a.group) && matches(r.resources, a.resource) && matches(r.verbs, a.verb),
  );
}
