// The daemon's descriptor budget for what clients of the network can make it open: the
// userspace proxy's sockets and connections (and, later, any other proxy listener). Every
// descriptor of the process counts against RLIMIT_NOFILE; running out (EMFILE) fails accepts,
// syncs, API requests and health checks alike. So the proxy gets the limit less a reserve for
// the rest of the daemon, and past its budget a new connection is refused at once and counted,
// never starving the rest.
//
// Costs: a proxied TCP connection holds two descriptors (the client's and the endpoint's), a
// UDP association one, a proxy socket (listener) one. Listeners are always granted (a sync
// must not fail for a client flood; they come out of the reserve when the budget is spent), so
// connections only take what the listeners leave. One holder (a service port) takes at most
// half of the budget, so that a flood of connections to one Service leaves the other half to
// the others.

/**
 * Descriptors kept for the daemon beside its HTTP servers' connections: the API connection, netlink
 * sockets, health-check listeners, files, Node's own.
 */
export const OTHER_DESCRIPTORS_RESERVED = 1024;

/** An RLIMIT_NOFILE of RLIM_INFINITY (not allowed by Linux; Node would not cope) is taken as this. */
const UNLIMITED_AS = 1 << 20;

export interface BudgetSize {
  /** Descriptors the proxy may hold. */
  readonly limit: number;
  /** Descriptors kept for the rest of the daemon. */
  readonly reserved: number;
  /** The limit was too low for the whole reserve: half of it is the proxy's, half the rest's. */
  readonly tight: boolean;
}

/** The proxy's share of `softLimit`, keeping `reserved` descriptors for the rest (at least half). */
export function budgetSize(softLimit: number, reserved: number): BudgetSize {
  const soft = Number.isFinite(softLimit) ? Math.max(0, Math.floor(softLimit)) : UNLIMITED_AS;
  if (soft - reserved >= soft / 2) return { limit: soft - reserved, reserved, tight: false };
  const half = Math.floor(soft / 2);
  return { limit: half, reserved: soft - half, tight: true };
}

/** The share of the budget one holder may take. */
export const HOLDER_SHARE = 0.5;

export class DescriptorBudget {
  readonly limit: number;
  /** Descriptors one holder may hold at most. */
  readonly holderLimit: number;
  private used = 0;
  private refusals = 0;

  constructor(limit: number) {
    this.limit = limit;
    this.holderLimit = Math.floor(limit * HOLDER_SHARE);
  }

  /** Descriptors held now. */
  get inUse(): number {
    return this.used;
  }

  /** Acquisitions refused since start. */
  get refused(): number {
    return this.refusals;
  }

  /** Takes n descriptors for a holder that has `held` if they fit; false (counted) when they do not. */
  tryAcquire(n: number, held = 0): boolean {
    if (this.used + n > this.limit || held + n > this.holderLimit) {
      this.refusals++;
      return false;
    }
    this.used += n;
    return true;
  }

  /** Takes n descriptors even past the budget (listeners). */
  force(n: number): void {
    this.used += n;
  }

  release(n: number): void {
    this.used = Math.max(0, this.used - n);
  }
}

/** A budget with no limit, for tests and callers that were given none. */
export const unlimitedBudget = (): DescriptorBudget => new DescriptorBudget(Number.POSITIVE_INFINITY);
