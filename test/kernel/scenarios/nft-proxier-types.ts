export type { ModelOptions } from '../../../src/model/types.ts';
export interface SyncReportLike {
  full: boolean;
  servicesChanged: number;
  errors: string[];
  batches: number;
}
