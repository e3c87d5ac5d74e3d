// `kube-proxy-ts completion`: the generated script, run by bash itself with the words a user
// typed (COMP_WORDS/COMP_CWORD, as bash's programmable completion sets them).
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { completionScript, runCompletion } from '../../../src/cli/completion.ts';
import { FLAGS } from '../../../src/config/flags.ts';

/** What the script offers for `words`, the last one being completed. */
function complete(words: readonly string[], shell: 'bash' | 'zsh' = 'bash'): string[] {
  const script = completionScript(shell);
  const quoted = words.map((w) => `'${w.replaceAll("'", "'\\''")}'`).join(' ');
  const out = execFileSync(
    'bash',
    [
      '-c',
      `${script}\nCOMP_WORDS=(${quoted}); COMP_CWORD=${words.length - 1}; _kube_proxy_ts; printf '%s\\n' "\${COMPREPLY[@]}"`,
    ],
    { encoding: 'utf8' },
  );
  return out.split('\n').filter((l) => l !== '');
}

test('subcommands, then flags by prefix, from the flag table', (t) => {
  t.deepEqual(complete(['kube-proxy-ts', '']), ['explain', 'trace', 'completion', 'profile']);
  t.deepEqual(complete(['kube-proxy-ts', '--proxy-m']), ['--proxy-mode']);
  t.deepEqual(complete(['kube-proxy-ts', '--service-traffic']), ['--service-traffic-metrics']);
  // Every non-deprecated flag is offered.
  const all = new Set(complete(['kube-proxy-ts', '-']));
  for (const f of FLAGS.filter((x) => x.deprecated === undefined))
    t.true(all.has(f.name.length === 1 ? `-${f.name}` : `--${f.name}`), f.name);
});

test('values: modes, output formats, files; --flag=value too', (t) => {
  t.deepEqual(complete(['kube-proxy-ts', '--proxy-mode', 'n']), ['nftables']);
  t.deepEqual(complete(['kube-proxy-ts', '--proxy-mode', '=', 'ip']), ['iptables', 'ipvs']);
  t.deepEqual(complete(['kube-proxy-ts', 'explain', '-o', '']), ['table', 'json']);
  t.deepEqual(complete(['kube-proxy-ts', 'completion', '']), ['bash', 'zsh']);
  t.true(complete(['kube-proxy-ts', '--config', '/etc/host']).includes('/etc/hostname'));
});

test('the subcommands offer their own flags', (t) => {
  t.deepEqual(complete(['kube-proxy-ts', 'trace', '--l']), ['--live', '--live-timeout']);
  t.deepEqual(complete(['kube-proxy-ts', 'explain', '--']), [
    '--output',
    '--control-socket',
    '--hostname-override',
    '--node',
    '--help',
  ]);
});

test('profile offers its kinds and flags; its --output completes a file name, not a format', (t) => {
  t.deepEqual(complete(['kube-proxy-ts', 'profile', '']), [
    'cpu',
    'heap',
    '--seconds',
    '--output',
    '-o',
    '--control-socket',
    '--help',
    '-h',
  ]);
  t.true(complete(['kube-proxy-ts', 'profile', 'heap', '-o', '/etc/host']).includes('/etc/hostname'));
  t.deepEqual(complete(['kube-proxy-ts', 'explain', '-o', '']), ['table', 'json']);
});

test('zsh gets the same through bashcompinit; a bad shell is a usage error', (t) => {
  t.regex(completionScript('zsh'), /^# zsh completion[^\n]*\nautoload -U \+X bashcompinit && bashcompinit\n/);
  const err: string[] = [];
  t.is(
    runCompletion(
      ['fish'],
      () => t.fail(),
      (s) => err.push(s),
    ),
    2,
  );
  t.regex(err.join(''), /Usage: kube-proxy-ts completion bash\|zsh/);
  const out: string[] = [];
  t.is(
    runCompletion(
      ['bash'],
      (s) => out.push(s),
      () => t.fail(),
    ),
    0,
  );
  t.regex(out.join(''), /complete -F _kube_proxy_ts kube-proxy-ts\n$/);
});
