// --feature-gates / featureGates checked as upstream's featuregate does: a name it does not know
// is an error ("unrecognized feature gate: X"), setting a GA or deprecated gate is a warning,
// and AllAlpha / AllBeta turn on every alpha / beta gate not set by name. What each gate is
// at v1.37 is in feature-gates-v1.37.ts.

import { KNOWN_FEATURE_GATES, type GateStage } from './feature-gates-v1.37.ts';

export interface GateSpec {
  readonly defaultValue: boolean;
  readonly stage: GateStage;
}

const KNOWN: ReadonlyMap<string, GateSpec> = new Map(
  KNOWN_FEATURE_GATES.map(([name, defaultValue, stage]) => [name, { defaultValue, stage }]),
);

export function knownFeatureGate(name: string): GateSpec | undefined {
  return KNOWN.get(name);
}

export interface GateCheck {
  /** The first name upstream would refuse (names are checked in sorted order). */
  unknown?: string;
  warnings: string[];
}

/** Upstream's SetFromMap checks: stops at the first unknown name, warns for GA and deprecated gates. */
export function checkFeatureGates(set: Readonly<Record<string, boolean>>): GateCheck {
  const warnings: string[] = [];
  for (const name of Object.keys(set).sort()) {
    const spec = KNOWN.get(name);
    if (spec === undefined) return { unknown: name, warnings };
    if (spec.stage === 'DEPRECATED' || spec.stage === '') {
      const what = spec.stage === '' ? 'GA' : 'deprecated';
      warnings.push(
        `featureGates: setting ${what} feature gate ${name}=${set[name]}; it will be removed in a future release`,
      );
    }
  }
  return { warnings };
}

/** Whether a gate is on: set by name, else by AllAlpha/AllBeta for its stage, else its default. */
export function featureEnabled(set: Readonly<Record<string, boolean>>, name: string): boolean {
  const explicit = set[name];
  if (explicit !== undefined) return explicit;
  const spec = KNOWN.get(name);
  if (spec === undefined) return false;
  if (spec.stage === 'ALPHA' && name !== 'AllAlpha' && set['AllAlpha'] === true) return true;
  if (spec.stage === 'BETA' && name !== 'AllBeta' && set['AllBeta'] === true) return true;
  return spec.defaultValue;
}

export interface GateState {
  readonly name: string;
  readonly stage: GateStage;
  readonly enabled: boolean;
}

/** Every known gate and whether it is on, as kubernetes_feature_enabled reports them. */
export function featureGateStates(set: Readonly<Record<string, boolean>>): GateState[] {
  return KNOWN_FEATURE_GATES.map(([name, , stage]) => ({ name, stage, enabled: featureEnabled(set, name) }));
}
