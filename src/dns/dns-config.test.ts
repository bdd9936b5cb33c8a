import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DnsConfigError } from './dns-config-error.js';
import { defaultDnsSettings, parseDnsSection, readDnsSettingsFile, resolveDnsSettings } from './dns-config.js';

describe('DNS settings', () => {
  it('defaults to loopback, regsync.internal, no forwarding, every cluster', () => {
    const s = resolveDnsSettings({}, {});
    expect(s).toEqual(defaultDnsSettings());
    expect([s.listen, s.zone, s.upstreams, s.clusters]).toEqual([{ host: '127.0.0.1', port: 5353 }, 'regsync.internal', [], undefined]);
  });

  it('reads a file (top level or under dns:), and flags win over it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'dns-config-'));
    const file = join(dir, 'dns.yaml');
    writeFileSync(
      file,
      [
        'dns:',
        '  listen: 127.0.0.1:5300',
        '  zone: corp.internal',
        '  clusters: [sh, bj]',
        '  ttl: [{ services: ["db-*"], seconds: 1 }]',
        '  aliases: { echo: { name: "providers:com.acme.Echo:1.0.0:" } }',
        '  site: { trustedResolvers: [10.0.0.53, 192.0.2.0/24], protectThreshold: 0.5 }',
        '  rateLimit: { perSecond: 50 }',
      ].join('\n'),
    );
    const fromFile = readDnsSettingsFile(file);
    const s = resolveDnsSettings(fromFile, { zone: 'other.internal', upstream: '10.0.0.2, [::1]:5353' });
    expect(s.listen).toEqual({ host: '127.0.0.1', port: 5300 });
    expect(s.zone).toBe('other.internal');
    expect(s.clusters).toEqual(['sh', 'bj']);
    expect(s.ttl).toEqual([{ services: ['db-*'], seconds: 1 }]);
    expect(s.aliases).toEqual({ echo: { namespace: 'public', group: 'DEFAULT_GROUP', name: 'providers:com.acme.Echo:1.0.0:' } });
    expect(s.site).toEqual({ labels: ['site', 'region'], trustedResolvers: ['10.0.0.53', '192.0.2.0/24'], loopbackAs: undefined, protectThreshold: 0.5 });
    expect(s.rateLimit).toEqual({ perSecond: 50, burst: 100 });
    expect(s.upstreams).toEqual(['10.0.0.2', '[::1]:5353']);
  });

  it('names the setting at fault', () => {
    const bad: Array<[unknown, RegExp]> = [
      [{ zon: 'x.internal' }, /^dns zon: not a DNS setting/],
      [{ listen: '127.0.0.1:99999' }, /^dns listen: expected host:port with a port from 0 to 65535/],
      [{ listen: 'localhost:53' }, /^dns listen: the host must be an IP address/],
      [{ zone: 'svc.local' }, /^dns zone:/],
      [{ ttlSeconds: -1 }, /^dns ttlSeconds: must be a whole number/],
      [{ upstreams: ["resolver.example"] }, /^dns upstreams: "resolver.example" is not an IP address/],
      [{ site: { trustedResolvers: ['10.0.0.0/33'] } }, /^dns site.trustedResolvers: expected an IP address or CIDR/],
      [{ site: { protectThreshold: 2 } }, /^dns site.protectThreshold: must be a number from 0 to 1/],
      [{ site: { label: ['site'] } }, /^dns site.label: not a site setting/],
      [{ aliases: { echo: { name: 'x', cluster: 'sh' } } }, /^dns aliases.echo.cluster: not a service key field/],
    ];
    for (const [section, message] of bad) {
      expect(() => parseDnsSection(section), JSON.stringify(section)).toThrow(DnsConfigError);
      expect(() => parseDnsSection(section)).toThrow(message);
    }
    expect(() => resolveDnsSettings({}, { clusters: ' , ' })).toThrow(/^dns --clusters: must name at least one item/);
    expect(() => readDnsSettingsFile('/nonexistent/dns.yaml')).toThrow(/file not found/);
  });
});
