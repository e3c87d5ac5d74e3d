// An API server certificate the daemon refuses, named for the operator: what is wrong with it
// (OpenSSL's reason and code, e.g. DEPTH_ZERO_SELF_SIGNED_CERT), which CA it was checked
// against (the kubeconfig's certificate-authority or certificate-authority-data, the service
// account's ca.crt in a pod, or the system's CAs when none is configured) and what to change.
// Node's own text suggests running Node.js with --use-system-ca, a flag of the runtime that the
// operator of this daemon does not control; it is left out.

/** Certificate verification failures (OpenSSL's X509_V_ERR_* as Node names them, and Node's own). */
const UNTRUSTED = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_DECRYPT_CERT_SIGNATURE',
  'CERT_SIGNATURE_FAILURE',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'CERT_CHAIN_TOO_LONG',
  'INVALID_CA',
  'INVALID_PURPOSE',
  'PATH_LENGTH_EXCEEDED',
]);
const DATES = new Set(['CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID']);
const NAME = new Set(['ERR_TLS_CERT_ALTNAME_INVALID', 'HOSTNAME_MISMATCH']);

/** The cluster entry the request went to (client-node's Cluster). */
export interface TlsCluster {
  name: string;
  server: string;
  caFile?: string | undefined;
  caData?: string | undefined;
}

export class TlsVerifyError extends Error {
  /** The verification error's code, e.g. DEPTH_ZERO_SELF_SIGNED_CERT. */
  readonly tlsCode: string;
  constructor(message: string, tlsCode: string) {
    super(message);
    this.name = 'TlsVerifyError';
    this.tlsCode = tlsCode;
  }
}

/** The CA a server certificate was checked against, in the operator's terms. */
function trustedBy(cluster: TlsCluster, inCluster: boolean): string {
  if (inCluster && cluster.caFile) return `the service account's CA file ${cluster.caFile}`;
  if (cluster.caFile) return `the kubeconfig's certificate-authority (${cluster.caFile})`;
  if (cluster.caData) return "the kubeconfig's certificate-authority-data";
  return "the system's CAs (no CA configured: --master without a kubeconfig, or a kubeconfig cluster without certificate-authority or certificate-authority-data)";
}

function advice(code: string, cluster: TlsCluster, inCluster: boolean): string {
  if (DATES.has(code)) return "check the server certificate's validity dates and this node's clock";
  if (NAME.has(code)) {
    return `the certificate does not name the address ${cluster.server}: connect to a name or address it lists (--master, or the kubeconfig's server)`;
  }
  if (inCluster) return "the service account's ca.crt must hold the CA that signed the API server's certificate";
  return "give the CA that signed the server's certificate as certificate-authority or certificate-authority-data of the kubeconfig's cluster (--kubeconfig)";
}

/** The verification error in err's cause chain (undici wraps it in "fetch failed"), if any. */
function verificationCause(err: unknown): { code: string; message: string } | undefined {
  for (let e = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && (UNTRUSTED.has(code) || DATES.has(code) || NAME.has(code))) {
      return { code, message: e.message };
    }
  }
  return undefined;
}

/**
 * Node's advice to run Node.js differently ("...; if the root CA is installed locally, try
 * running Node.js with --use-system-ca").
 */
const NODE_HINT = /;[^;]*(?:--use-system-ca|Node\.js)[^;]*$/;

/**
 * A TlsVerifyError naming the cause and the remedy when err is a failed certificate
 * verification of the API server; undefined for any other error.
 */
export function tlsVerifyError(err: unknown, cluster: TlsCluster, inCluster = false): TlsVerifyError | undefined {
  const cause = verificationCause(err);
  if (cause === undefined) return undefined;
  const reason = cause.message.replace(NODE_HINT, '').trim();
  return new TlsVerifyError(
    `the API server's certificate (${cluster.server}) is refused: ${reason} (${cause.code}); ` +
      `checked against ${trustedBy(cluster, inCluster)}; ${advice(cause.code, cluster, inCluster)}`,
    cause.code,
  );
}
