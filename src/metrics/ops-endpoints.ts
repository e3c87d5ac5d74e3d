// The metrics port's ops pages beside /metrics, as upstream kube-proxy serves them: /statusz and
// /flagz (each behind its component-base feature gate, ComponentStatusz / ComponentFlagz, beta
// and on in v1.37) and /metrics/slis (the health-check SLI metrics).

import type { IncomingMessage } from 'node:http';
import type { SliMetrics } from './slis.ts';
import {
  flagzObject,
  flagzText,
  negotiateZPage,
  pickDelimiter,
  statuszObject,
  statuszText,
  type StatuszInfo,
} from './zpages.ts';

export interface OpsAnswer {
  code: number;
  type: string;
  body: string;
  headers?: Record<string, string>;
}

/** An answer for `path`, or undefined when the path is not one of these pages. */
export type OpsRoutes = (path: string, req: IncomingMessage) => OpsAnswer | Promise<OpsAnswer> | undefined;

export interface OpsEndpointsOptions {
  /** The name the pages give the component (upstream: "kube-proxy"). */
  component: string;
  /** /statusz's facts (paths included); omit to not serve /statusz. */
  statusz?: () => Omit<StatuszInfo, 'component'>;
  /** Every flag and its value as the command line shows it; omit to not serve /flagz. */
  flagz?: () => Readonly<Record<string, string>>;
  slis: SliMetrics;
  random?: () => number;
}

const TEXT = 'text/plain; charset=utf-8';

/** The text page, the structured object, or 406, as the Accept header asks. */
function zpage(
  req: IncomingMessage,
  kind: 'Statusz' | 'Flagz',
  text: () => string,
  object: (v: 'v1alpha1' | 'v1beta1') => unknown,
): OpsAnswer {
  const f = negotiateZPage(req.headers.accept, kind);
  if (f.kind === 'text') return { code: 200, type: TEXT, body: text() };
  if (f.kind === 'json') {
    const headers: Record<string, string> =
      f.version === 'v1alpha1'
        ? {
            Warning: `299 - "This version of the ${kind.toLowerCase()} endpoint is deprecated. Please use a newer version."`,
          }
        : {};
    return {
      code: 200,
      type: `application/json;as=${kind};g=config.k8s.io;v=${f.version}`,
      body: JSON.stringify(object(f.version)),
      headers,
    };
  }
  const accepted = ['v1beta1', 'v1alpha1'].map((v) => `application/json;as=${kind};g=config.k8s.io;v=${v}`);
  return {
    code: 406,
    type: TEXT,
    body: `only the following media types are accepted: text/plain, ${accepted.join(', ')}\n`,
  };
}

export function opsRoutes(o: OpsEndpointsOptions): OpsRoutes {
  const delim = () => pickDelimiter(o.random);
  return (path, req) => {
    if (path === '/statusz' && o.statusz !== undefined) {
      const info = { ...o.statusz(), component: o.component };
      return zpage(
        req,
        'Statusz',
        () => statuszText(info, delim()),
        (v) => statuszObject(info, v),
      );
    }
    if (path === '/flagz' && o.flagz !== undefined) {
      const flags = o.flagz();
      return zpage(
        req,
        'Flagz',
        () => flagzText(o.component, flags, delim()),
        (v) => flagzObject(o.component, flags, v),
      );
    }
    if (path === '/metrics/slis') {
      if (req.method === 'DELETE') {
        o.slis.reset();
        return { code: 200, type: TEXT, body: 'metrics reset\n' };
      }
      return o.slis.registry.metrics().then((body) => ({ code: 200, type: o.slis.registry.contentType, body }));
    }
    return undefined;
  };
}
