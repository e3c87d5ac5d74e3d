// Reads a KubeProxyConfiguration file (YAML or JSON; JSON is YAML) into flat values.
// Like upstream, unknown fields do not fail the load (upstream falls back to lenient
// decoding and logs); we return them as warnings. A wrong type fails, naming the field.

import { errorMessage } from '../base/errors.ts';
import { LineCounter, parseDocument } from 'yaml';
import { parseDuration } from './duration.ts';
import { API_VERSION, FIELDS, KIND, isObjectPath, type FieldKind, type FlatValue, type FlatValues } from './schema.ts';
import type { ConfigError } from './types.ts';

export interface FileParseResult {
  values: FlatValues;
  errors: ConfigError[];
  warnings: string[];
  /** "FILE:LINE:COLUMN" of a field path's value in the file, when the file has it. */
  locate?: (path: string) => string | undefined;
}

export function parseConfigFile(text: string, source = 'config file'): FileParseResult {
  const values: FlatValues = new Map();
  const errors: ConfigError[] = [];
  const warnings: string[] = [];

  // prettyErrors adds each error's line and column (linePos); its message then also carries a
  // code excerpt on further lines, of which only the first line is kept.
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true, lineCounter });
  const locate = (path: string): string | undefined => {
    const node: unknown = doc.getIn(path.split('.'), true);
    const start = (node as { range?: readonly number[] } | undefined)?.range?.[0];
    if (start === undefined) return undefined;
    const { line, col } = lineCounter.linePos(start);
    return `${source}:${line}:${col}`;
  };
  if (doc.errors.length > 0) {
    for (const e of doc.errors) {
      const at = e.linePos?.[0];
      const where = at ? `${source}:${at.line}:${at.col}` : source;
      const message = e.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '');
      errors.push({ field: where, message: `not valid YAML or JSON: ${message}` });
    }
    return { values, errors, warnings };
  }
  const root: unknown = doc.toJS();
  if (root === null || typeof root !== 'object' || Array.isArray(root)) {
    errors.push({ field: source, message: 'must contain a KubeProxyConfiguration object' });
    return { values, errors, warnings };
  }

  const walk = (obj: Record<string, unknown>, prefix: string): void => {
    for (const [key, raw] of Object.entries(obj)) {
      const path = prefix === '' ? key : `${prefix}.${key}`;
      const kind = FIELDS.get(path);
      if (kind === undefined) {
        if (isObjectPath(path)) {
          if (raw === null || raw === undefined) continue;
          if (typeof raw !== 'object' || Array.isArray(raw)) {
            errors.push({ field: path, message: `${show(raw)} must be an object` });
            continue;
          }
          walk(raw as Record<string, unknown>, path);
          continue;
        }
        warnings.push(`${source}: unknown field "${path}" ignored`);
        continue;
      }
      if (kind === 'ignored') continue;
      // A null (as --write-config-to output has for unset lists) means "not set".
      if (raw === null || raw === undefined) continue;
      const v = convert(kind, raw);
      if (v.ok) values.set(path, v.value);
      else errors.push({ field: path, message: v.error });
    }
  };
  walk(root as Record<string, unknown>, '');
  for (const e of errors) {
    const at = locate(e.field);
    if (at !== undefined) e.at = at;
  }

  const apiVersion = values.get('apiVersion');
  const kind = values.get('kind');
  if (apiVersion !== API_VERSION) {
    errors.unshift({
      field: 'apiVersion',
      message: `${show(apiVersion ?? '')} is not supported (want "${API_VERSION}")`,
    });
  }
  if (kind !== KIND) {
    errors.unshift({ field: 'kind', message: `${show(kind ?? '')} is not supported (want "${KIND}")` });
  }
  return { values, errors, warnings, locate };
}

type Converted = { ok: true; value: FlatValue } | { ok: false; error: string };

function convert(kind: Exclude<FieldKind, 'ignored'>, raw: unknown): Converted {
  const ok = (value: FlatValue): Converted => ({ ok: true, value });
  const bad = (error: string): Converted => ({ ok: false, error });
  switch (kind) {
    case 'string':
      if (typeof raw === 'string') return ok(raw);
      return bad(`${show(raw)} must be a string`);
    case 'bool':
      if (typeof raw === 'boolean') return ok(raw);
      return bad(`${show(raw)} must be true or false`);
    case 'int':
      if (typeof raw === 'number' && Number.isInteger(raw)) return ok(raw);
      return bad(`${show(raw)} must be an integer`);
    case 'float':
      if (typeof raw === 'number' && Number.isFinite(raw)) return ok(raw);
      return bad(`${show(raw)} must be a number`);
    case 'duration':
      if (typeof raw !== 'string') return bad(`${show(raw)} must be a duration string such as "30s"`);
      try {
        return ok(parseDuration(raw));
      } catch (e) {
        return bad(errorMessage(e));
      }
    case 'strings':
      if (Array.isArray(raw) && raw.every((s) => typeof s === 'string')) return ok(raw as string[]);
      return bad(`${show(raw)} must be a list of strings`);
    case 'boolMap':
      if (
        typeof raw === 'object' &&
        raw !== null &&
        !Array.isArray(raw) &&
        Object.values(raw).every((b) => typeof b === 'boolean')
      ) {
        return ok({ ...(raw as Record<string, boolean>) });
      }
      return bad(`${show(raw)} must be a map of names to true/false`);
  }
}

export function show(v: unknown): string {
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return String(v);
  }
}
