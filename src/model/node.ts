// The facts about this node that semantics depend on: its zone (topology hints), its primary
// IP ("primary" nodePortAddresses) and its pod CIDRs (detect-local NodeCIDR mode).

import { parseCIDR, parseIP, type IPFamily } from '../base/ip.ts';
import { LABEL_TOPOLOGY_ZONE } from './k8s.ts';
import { arr, isObject, labelsOf, nameOf, str } from './guards.ts';
import { Issues } from './issues.ts';
import type { NodeInfo } from './types.ts';

export const unknownNode = (name: string): NodeInfo => ({ name, known: false, zone: '', primaryIP: '', podCIDRs: [] });

export function normalizeNode(input: unknown, nodeName: string, family: IPFamily): { info: NodeInfo; issues: Issues } {
  const issues = new Issues();
  if (!isObject(input)) {
    issues.add('not-an-object', typeof input);
    return { info: unknownNode(nodeName), issues };
  }
  const zone = str(labelsOf(input['metadata'])[LABEL_TOPOLOGY_ZONE]);
  const status = isObject(input['status']) ? input['status'] : {};
  const spec = isObject(input['spec']) ? input['spec'] : {};
  return {
    info: {
      name: nodeName,
      known: true,
      zone,
      primaryIP: primaryIP(status, family, issues),
      podCIDRs: podCIDRs(spec, family, issues),
    },
    issues,
  };
}

export const nodeNameOf = (input: unknown): string => (isObject(input) ? nameOf(input['metadata']).name : '');

/** First InternalIP of the family, else first ExternalIP (upstream GetNodeHostIPs). */
function primaryIP(status: Record<string, unknown>, family: IPFamily, issues: Issues): string {
  const addrs = arr(status['addresses']).filter(isObject);
  for (const type of ['InternalIP', 'ExternalIP']) {
    for (const a of addrs) {
      if (a['type'] !== type) continue;
      const ip = parseIP(str(a['address']));
      if (!ip) issues.add('invalid-node-address', `${type} '${String(a['address'])}'`);
      else if (ip.family === family) return ip.text;
    }
  }
  return '';
}

function podCIDRs(spec: Record<string, unknown>, family: IPFamily, issues: Issues): string[] {
  const list = arr(spec['podCIDRs']);
  const raw = list.length > 0 ? list : spec['podCIDR'] ? [spec['podCIDR']] : [];
  const out: string[] = [];
  for (const r of raw) {
    const c = parseCIDR(str(r));
    if (!c || !str(r).includes('/')) issues.add('invalid-cidr', `podCIDR '${String(r)}'`);
    else if (c.family === family && !out.includes(c.text)) out.push(c.text);
  }
  return out;
}
