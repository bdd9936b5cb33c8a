import { describe, expect, it } from 'vitest';
import { optionText, optionValue } from './cluster-form.js';
import type { KindOption } from './types.js';

const opt = (type: KindOption['type'], name = 'o'): KindOption => ({ name, type, description: '' });

describe('option inputs of the cluster form', () => {
  it('leaves an empty input out (the kind\'s default), whatever the type', () => {
    for (const type of ['string', 'integer', 'boolean', 'list', 'object'] as const) expect(optionValue(opt(type), '  ')).toBeUndefined();
  });

  it('reads each type as the JSON the kinds\' parsers take', () => {
    expect(optionValue(opt('integer'), ' 500 ')).toBe(500);
    expect(optionValue(opt('boolean'), 'false')).toBe(false);
    expect(optionValue(opt('boolean'), 'true')).toBe(true);
    expect(optionValue(opt('list'), 'prod, staging  default')).toEqual(['prod', 'staging', 'default']);
    expect(optionValue(opt('object'), 'default=public, prod=production')).toEqual({ default: 'public', prod: 'production' });
    expect(optionValue(opt('object'), '{"prod": {"namespace": "public", "group": "PROD"}}')).toEqual({ prod: { namespace: 'public', group: 'PROD' } });
    expect(optionValue(opt('string'), ' /etc/kube/config ')).toBe('/etc/kube/config');
  });

  it('sends a value that is not of its type as written, for the API to refuse by name', () => {
    expect(optionValue(opt('integer'), '5s')).toBe('5s');
    expect(optionValue(opt('integer'), '1.5')).toBe('1.5');
  });

  it('refuses an object that is neither JSON nor key=value, naming the option', () => {
    expect(() => optionValue(opt('object', 'namespaceMap'), '{"a": ')).toThrow(/^options\.namespaceMap: not JSON/);
    expect(() => optionValue(opt('object', 'namespaceMap'), 'default')).toThrow(/^options\.namespaceMap: "default" must be key=value/);
  });

  it('shows stored values so that reading them back gives the same value', () => {
    const cases: Array<[KindOption['type'], unknown]> = [
      ['integer', 500],
      ['boolean', false],
      ['string', 'v1'],
      ['list', ['prod', 'staging']],
      ['object', { default: 'public' }],
      ['object', { prod: { namespace: 'public', group: 'PROD' } }],
      ['object', { 'a b': 'x' }],
      ['object', { a: 'x,y' }],
    ];
    for (const [type, value] of cases) expect(optionValue(opt(type), optionText(opt(type), value)), `${type} ${JSON.stringify(value)}`).toEqual(value);
    expect(optionText(opt('object'), { default: 'public', prod: 'production' })).toBe('default=public, prod=production');
    expect(optionText(opt('integer'), undefined)).toBe('');
  });
});
