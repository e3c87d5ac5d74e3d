// Guards for untrusted JSON-shaped input: every read tolerates a missing field or a value of
// the wrong type, so a malformed object yields issues, never an exception.

import type { Issues } from './issues.ts';
import { LABEL_HEADLESS, LABEL_SERVICE_PROXY_NAME } from './k8s.ts';

export const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

export const str = (v: unknown): string => (typeof v === 'string' ? v : '');

/** The array, or [] for anything else (absent fields are common and legal). */
const NONE: readonly unknown[] = Object.freeze([]);
export const arr = (v: unknown): readonly unknown[] => (Array.isArray(v) ? v : NONE);

export const isPortNumber = (v: unknown): v is number =>
  Number.isInteger(v) && (v as number) >= 1 && (v as number) <= 65535;

/** Labels as a string map; anything else is no labels. */
export function labelsOf(meta: unknown): Record<string, unknown> {
  if (!isObject(meta) || !isObject(meta['labels'])) return {};
  return meta['labels'];
}

export function nameOf(meta: unknown): { namespace: string; name: string } {
  if (!isObject(meta)) return { namespace: '', name: '' };
  return { namespace: str(meta['namespace']), name: str(meta['name']) };
}

/** An object with a namespace and a name; undefined, with an issue, when it is not an object or lacks one. */
export function namedObject(
  input: unknown,
  issues: Issues,
): { obj: Record<string, unknown>; namespace: string; name: string } | undefined {
  if (!isObject(input)) {
    issues.add('not-an-object', typeof input);
    return undefined;
  }
  const { namespace, name } = nameOf(input['metadata']);
  if (!namespace || !name) {
    issues.add('missing-name', `namespace '${namespace}', name '${name}'`);
    return undefined;
  }
  return { obj: input, namespace, name };
}

/** kube-proxy's informers never see objects another proxy owns, nor headless ones. */
export const PROXY_IGNORED_LABELS = [LABEL_SERVICE_PROXY_NAME, LABEL_HEADLESS] as const;

export const isIgnoredByLabel = (labels: Record<string, unknown>): boolean =>
  PROXY_IGNORED_LABELS.some((l) => Object.hasOwn(labels, l));
