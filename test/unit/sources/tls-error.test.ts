// Refused API server certificates named for the operator: the reason and code, the CA in use,
// the remedy for the kind of failure; never Node's advice about its own flags.
import test from 'ava';
import { tlsVerifyError, TlsVerifyError } from '../../../src/sources/tls-error.ts';

const nodeError = (message: string, code: string) =>
  new TypeError('fetch failed', { cause: Object.assign(new Error(message), { code }) });
const kubeconfig = { name: 'c', server: 'https://10.0.0.1:6443', caFile: '/etc/kubernetes/ca.crt' };

test("an untrusted certificate: the reason, the code and the CA file, without Node's hint", (t) => {
  const e = tlsVerifyError(
    nodeError(
      'unable to get local issuer certificate; if the root CA is installed locally, try running Node.js with --use-system-ca',
      'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
    ),
    kubeconfig,
  );
  t.true(e instanceof TlsVerifyError);
  t.is(e!.tlsCode, 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY');
  t.is(
    e!.message,
    "the API server's certificate (https://10.0.0.1:6443) is refused: unable to get local issuer certificate " +
      "(UNABLE_TO_GET_ISSUER_CERT_LOCALLY); checked against the kubeconfig's certificate-authority " +
      "(/etc/kubernetes/ca.crt); give the CA that signed the server's certificate as certificate-authority or " +
      "certificate-authority-data of the kubeconfig's cluster (--kubeconfig)",
  );
});

test('an expired certificate points at the dates and the clock; a wrong name at the address', (t) => {
  t.regex(
    tlsVerifyError(nodeError('certificate has expired', 'CERT_HAS_EXPIRED'), kubeconfig)!.message,
    /\(CERT_HAS_EXPIRED\); .*check the server certificate's validity dates and this node's clock$/,
  );
  t.regex(
    tlsVerifyError(
      nodeError("Hostname/IP does not match certificate's altnames", 'ERR_TLS_CERT_ALTNAME_INVALID'),
      kubeconfig,
    )!.message,
    /does not name the address https:\/\/10\.0\.0\.1:6443/,
  );
});

test('other errors are not TLS verification errors', (t) => {
  t.is(tlsVerifyError(nodeError('connect ECONNREFUSED', 'ECONNREFUSED'), kubeconfig), undefined);
  t.is(tlsVerifyError(new Error('x'), kubeconfig), undefined);
  t.is(tlsVerifyError('x', kubeconfig), undefined);
});
