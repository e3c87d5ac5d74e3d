export {
  BoundedFrequencyRunner,
  type RunInfo,
  type RunReason,
  type RunnerOptions,
} from './bounded-frequency-runner.ts';
