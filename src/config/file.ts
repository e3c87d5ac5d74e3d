// Reads a KubeProxyConfiguration file (YAML or JSON; JSON is YAML) into flat values.
// Like upstream, unknown fields do not fail the load (upstream falls back to lenient
// decoding and logs); we return them as warnings. A wrong type fails, naming the field.

import { errorMessage } from '../base/errors.ts';
import { LineCounter, parseDocument } from 'yaml';
import { MAX_YAML_ALIASES } from '../sources/read-file.ts';
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

  const root = parseRoot(text, source);
  if ('error' in root) {
    errors.push(root.error);
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
  walk(root.value, '');
  const locate = root.locate;
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

/**
 * The file's top-level object, or its first problem as one line naming the line and column
 * (the field is "FILE:LINE:COLUMN"); aliases limited, a parser's own limit (nesting deeper
 * than the stack) reported, not thrown.
 */
function parseRoot(
  text: string,
  source: string,
): { value: Record<string, unknown>; locate: (path: string) => string | undefined } | { error: ConfigError } {
  const lineCounter = new LineCounter();
  const invalid = (message: string, offset?: number): { error: ConfigError } => {
    const pos = offset === undefined ? undefined : lineCounter.linePos(offset);
    const first = (message.split('\n')[0] ?? '').replace(/ at line \d+, column \d+:?$/, '');
    return { error: { field: pos ? `${source}:${pos.line}:${pos.col}` : source, message: first } };
  };
  let root: unknown;
  let doc: ReturnType<typeof parseDocument>;
  try {
    doc = parseDocument(text, { prettyErrors: false, uniqueKeys: true, lineCounter });
    const e = doc.errors[0];
    if (e !== undefined) return invalid(`not valid YAML or JSON: ${e.message}`, e.pos[0]);
    root = doc.toJS({ maxAliasCount: MAX_YAML_ALIASES });
  } catch (e) {
    return invalid(`cannot be read: ${errorMessage(e)}`);
  }
  if (root === null || typeof root !== 'object' || Array.isArray(root))
    return invalid('must contain a KubeProxyConfiguration object');
  // Where a field's value stands, for errors found after parsing (a wrong type, a bad value).
  const locate = (path: string): string | undefined => {
    const node: unknown = doc.getIn(path.split('.'), true);
    const start = (node as { range?: readonly number[] } | undefined)?.range?.[0];
    if (start === undefined) return undefined;
    const { line, col } = lineCounter.linePos(start);
    return `${source}:${line}:${col}`;
  };
  return { value: root as Record<string, unknown>, locate };
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
