import { describe, expect, it } from 'vitest';
import { MAX_MATCHED_NAME_LENGTH, mapService, mappingClashes, metadataFilter, serviceFilter, taskRuleProblem } from './task-rules.js';
import { GlobError } from './glob-error.js';
import type { TaskOptions } from './types.js';

const svc = (name: string, group = 'DEFAULT_GROUP', namespace = 'public') => ({ namespace, group, name });
const all = (options: TaskOptions = {}) => ({ service: '*', group: '*', namespace: '*', options });

describe('serviceFilter', () => {
  it("skips Dubbo's consumer entries by default and nothing else", () => {
    const keep = serviceFilter({});
    expect(keep('providers:com.acme.Orders::')).toBe(true);
    expect(keep('orders')).toBe(true);
    expect(keep('consumers:com.acme.Orders::')).toBe(false);
  });

  it('applies include, then exclude; an explicit exclude replaces the default', () => {
    const keep = serviceFilter({ include: ['orders-*', 'pay?'], exclude: ['*-canary'] });
    expect(['orders-eu', 'orders-canary', 'pays', 'payments', 'users'].filter(keep)).toEqual(['orders-eu', 'pays']);
    expect(serviceFilter({ exclude: [] })('consumers:x')).toBe(true);
    expect(serviceFilter({ include: [] })('orders')).toBe(false);
  });

  it('answers the backtracking include at once, and leaves out names too long to match', () => {
    const keep = serviceFilter({ include: ['*a*a*a*a*a*a*a*a*a*a*a*a*b'] });
    expect(keep('a'.repeat(64))).toBe(false);
    expect(keep(`${'a'.repeat(63)}b`)).toBe(true);
    expect(keep(`${'a'.repeat(MAX_MATCHED_NAME_LENGTH)}b`)).toBe(false);
    expect(serviceFilter({})('x'.repeat(MAX_MATCHED_NAME_LENGTH))).toBe(true);
    expect(serviceFilter({})('x'.repeat(MAX_MATCHED_NAME_LENGTH + 1))).toBe(false);
  });

  it('throws for patterns the API refuses (a task stored by other means), naming the field', () => {
    expect(() => serviceFilter({ exclude: ['ok', '{a,b'] })).toThrow(new GlobError('options.exclude[1] "{a,b": "{" is never closed (write \\{ for the character itself)', 1));
    expect(() => metadataFilter({ metadataDeny: ['[[:digit:]]'] })).toThrow(/^options\.mapping\.metadataDeny\[0\] .*POSIX classes/);
  });
});

describe('mapService', () => {
  it('maps namespace, group and name; rename wins over prefix and suffix', () => {
    const mapping = { namespaces: { dev: 'prod' }, groups: { A: 'B' }, prefix: 'east-', suffix: '.v1', rename: { legacy: 'modern' } };
    expect(mapService(svc('orders', 'A', 'dev'), mapping)).toEqual(svc('east-orders.v1', 'B', 'prod'));
    expect(mapService(svc('legacy', 'C', 'test'), mapping)).toEqual(svc('modern', 'C', 'test'));
    expect(mapService(svc('toString'), { rename: {} })).toEqual(svc('toString'));
    expect(mapService(svc('orders'), undefined)).toEqual(svc('orders'));
  });
});

describe('metadataFilter', () => {
  it('keeps allowed keys minus denied ones', () => {
    const keep = metadataFilter({ metadataAllow: ['app', 'dubbo.*'], metadataDeny: ['dubbo.secret*'] });
    expect(['app', 'dubbo.version', 'dubbo.secretKey', 'other'].filter((k) => keep?.(k))).toEqual(['app', 'dubbo.version']);
    expect(metadataFilter({ prefix: 'x' })).toBeUndefined();
    expect(metadataFilter({ metadataDeny: ['secret*'] })?.('k'.repeat(MAX_MATCHED_NAME_LENGTH + 1))).toBe(false);
  });
});

describe('taskRuleProblem', () => {
  it('accepts ordinary rules', () => {
    expect(taskRuleProblem(all({ mapping: { namespaces: { dev: 'prod', prod: 'dev' }, prefix: 'x-', rename: { a: 'b' } } }))).toBeUndefined();
    expect(taskRuleProblem({ service: 'orders', group: 'G', namespace: 'dev', options: { mapping: { namespaces: { dev: 'public' }, rename: { orders: 'orders2' } } } })).toBeUndefined();
  });

  it('refuses rules that make two services one, saying which', () => {
    expect(taskRuleProblem(all({ mapping: { rename: { a: 'x', b: 'x' } } }))).toBe('options.mapping.rename maps both "a" and "b" to "x": two services would become one');
    expect(taskRuleProblem(all({ mapping: { groups: { A: 'C', B: 'C' } } }))).toMatch(/options\.mapping\.groups maps both "A" and "B" to "C"/);
    expect(taskRuleProblem(all({ mapping: { namespaces: { dev: 'public' } } }))).toMatch(/maps "dev" to "public", whose own services are synced as they are/);
    expect(taskRuleProblem(all({ mapping: { prefix: 'p-', rename: { a: 'p-b' } } }))).toMatch(/sends "a" to "p-b", where service "b" would go/);
  });

  it('refuses patterns that cannot be compiled, naming the field', () => {
    expect(taskRuleProblem(all({ include: ['orders-*', '[abc'] }))).toMatch(/^options\.include\[1\] "\[abc": "\[" is never closed/);
    expect(taskRuleProblem(all({ exclude: ['@(a|b)'] }))).toMatch(/^options\.exclude\[0\] .*extglobs/);
    expect(taskRuleProblem(all({ mapping: { metadataAllow: ['{a,b'] } }))).toMatch(/^options\.mapping\.metadataAllow\[0\] /);
    expect(taskRuleProblem({ service: 'orders', group: 'G', namespace: 'public', options: { mapping: { metadataDeny: ['{1..100}'] } } })).toMatch(/^options\.mapping\.metadataDeny\[0\] .*more than 64 alternatives/);
    expect(taskRuleProblem(all({ include: ['*a*a*a*a*a*a*a*a*a*a*a*a*b'] }))).toBeUndefined();
  });

  it('refuses wildcards and filters where they mean nothing', () => {
    expect(taskRuleProblem({ service: 'orders', group: '*', namespace: 'public', options: {} })).toMatch(/need service "\*"/);
    expect(taskRuleProblem({ service: 'orders', group: 'G', namespace: 'public', options: { include: ['o*'] } })).toMatch(/apply to service "\*" only/);
    expect(taskRuleProblem({ service: 'orders', group: 'G', namespace: 'public', options: { mapping: { rename: { other: 'x' } } } })).toMatch(/does not name the task's service "orders"/);
  });
});

describe('mappingClashes', () => {
  it('finds destination services more than one source service maps to', () => {
    const clashes = mappingClashes([svc('b'), svc('a'), svc('c')], { prefix: 'p-', rename: { a: 'p-b' } });
    expect([...clashes]).toEqual([['public/DEFAULT_GROUP/p-b', [svc('b'), svc('a')]]]);
    expect(mappingClashes([svc('a')], undefined).size).toBe(0);
  });
});
