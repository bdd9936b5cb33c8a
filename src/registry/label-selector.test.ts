import { describe, expect, it } from 'vitest';
import {
  parseLabelExpression,
  parseSelector,
  selectorView,
  selectProviders,
  SelectorError,
  type LabelSource,
  type ServiceSelector,
} from './label-selector.js';

/** A CMDB as a plain table; an IP it does not know has no labels. */
const cmdbOf = (table: Record<string, Record<string, string>>): LabelSource => ({
  labelsOf: (ip) => table[ip] ?? {},
});

const SCENARIO = cmdbOf({
  '11.11.11.11': { site: 'x11' },
  '22.22.22.22': { site: 'x12' },
  '33.33.33.33': { site: 'x11' },
  '44.44.44.44': { site: 'x12' },
  '55.55.55.55': { site: 'x13' },
});

const provider = (ip: string, metadata: Record<string, string> = {}) => ({ ip, metadata });
const ips = (list: Array<{ ip: string }>) => list.map((p) => p.ip);
const label = (expression: string): ServiceSelector => ({ type: 'label', expression, labels: parseLabelExpression(expression) });

describe('parseLabelExpression', () => {
  it('reads clauses joined by &, ignoring whitespace, without duplicate labels', () => {
    expect(parseLabelExpression('CONSUMER.label.site = PROVIDER.label.site')).toEqual(['site']);
    expect(parseLabelExpression(' CONSUMER.label.site=PROVIDER.label.site &\tCONSUMER . label.rack = PROVIDER.label.rack ')).toEqual(['site', 'rack']);
    expect(parseLabelExpression('CONSUMER.label.a=PROVIDER.label.a&CONSUMER.label.a=PROVIDER.label.a')).toEqual(['a']);
    expect(parseLabelExpression('   ')).toEqual([]);
  });

  it('rejects anything else, naming the clause', () => {
    const cases: Array<[string, string, string]> = [
      ['CONSUMER.label.site = PROVIDER.label.zone', 'CONSUMER.label.site=PROVIDER.label.zone', 'different labels'],
      ['CONSUMER.label.site', 'CONSUMER.label.site', 'has no ='],
      ['CONSUMER.label.site = PROVIDER.label.site = x', 'CONSUMER.label.site=PROVIDER.label.site=x', 'more than one ='],
      ['PROVIDER.label.site = CONSUMER.label.site', 'PROVIDER.label.site=CONSUMER.label.site', 'CONSUMER.label.'],
      ['CONSUMER.label.site = INSTANCE.metadata.site', 'CONSUMER.label.site=INSTANCE.metadata.site', 'PROVIDER.label.'],
      ['CONSUMER.label. = PROVIDER.label.', 'CONSUMER.label.=PROVIDER.label.', 'names no label'],
      ['CONSUMER.label.a=PROVIDER.label.a && CONSUMER.label.b=PROVIDER.label.b', '', 'is empty'],
      ['CONSUMER.label.a=PROVIDER.label.a &', '', 'is empty'],
      ['CONSUMER.label.a=PROVIDER.label.a | CONSUMER.label.b=PROVIDER.label.b', 'CONSUMER.label.a=PROVIDER.label.a|CONSUMER.label.b=PROVIDER.label.b', 'more than one ='],
    ];
    for (const [expression, clause, why] of cases) {
      let error: unknown;
      try {
        parseLabelExpression(expression);
      } catch (err) {
        error = err;
      }
      expect(error, expression).toBeInstanceOf(SelectorError);
      expect((error as SelectorError).clause, expression).toBe(clause);
      expect((error as SelectorError).message, expression).toContain(why);
      if (clause !== '') expect((error as SelectorError).message).toContain(`'${clause}'`);
    }
  });
});

describe('parseSelector', () => {
  it('reads label and none selectors, blank meaning none', () => {
    expect(parseSelector(undefined)).toEqual({ type: 'none' });
    expect(parseSelector(' ')).toEqual({ type: 'none' });
    expect(parseSelector('{"type":"none"}')).toEqual({ type: 'none' });
    expect(parseSelector('{"type":"label","expression":"CONSUMER.label.site = PROVIDER.label.site"}')).toEqual({
      type: 'label',
      expression: 'CONSUMER.label.site = PROVIDER.label.site',
      labels: ['site'],
    });
    // A label selector without an expression compares nothing, as in Nacos.
    expect(parseSelector('{"type":"label"}')).toEqual({ type: 'label', expression: '', labels: [] });
  });

  it('accepts the JSON URL-encoded once more, as Nacos decodes it again', () => {
    const json = JSON.stringify({ type: 'label', expression: 'CONSUMER.label.site = PROVIDER.label.site' });
    expect(parseSelector(encodeURIComponent(json))).toMatchObject({ type: 'label', labels: ['site'] });
  });

  it('rejects text that is not a selector', () => {
    for (const [text, message] of [
      ['label', 'selector format incorrect'],
      ['[1]', 'selector format incorrect'],
      ['{"expression":"CONSUMER.label.a=PROVIDER.label.a"}', 'not match any type of selector'],
      ['{"type":"cmdb"}', 'not match any type of selector'],
      ['{"type":"label","expression":5}', 'must be a string'],
      ['{"type":"label","expression":"CONSUMER.label.a=PROVIDER.label.b"}', "'CONSUMER.label.a=PROVIDER.label.b'"],
    ]) {
      expect(() => parseSelector(text), text).toThrow(SelectorError);
      expect(() => parseSelector(text), text).toThrow(message);
    }
  });

  it('shows a selector the way Nacos serializes it', () => {
    expect(selectorView(label('CONSUMER.label.site = PROVIDER.label.site'))).toEqual({
      type: 'label',
      expression: 'CONSUMER.label.site = PROVIDER.label.site',
      labels: ['site'],
      contextType: 'CMDB',
    });
    expect(selectorView({ type: 'none' })).toEqual({ type: 'none' });
  });
});

describe('selectProviders', () => {
  const site = label('CONSUMER.label.site = PROVIDER.label.site');
  const providers = [provider('11.11.11.11'), provider('22.22.22.22')];

  it('keeps the providers whose CMDB labels equal the consumer\'s (the Nacos seed scenario)', () => {
    expect(ips(selectProviders(site, '33.33.33.33', providers, SCENARIO))).toEqual(['11.11.11.11']);
    expect(ips(selectProviders(site, '44.44.44.44', providers, SCENARIO))).toEqual(['22.22.22.22']);
  });

  it('returns every provider when nobody matches, the consumer is unknown, blank or absent', () => {
    expect(ips(selectProviders(site, '55.55.55.55', providers, SCENARIO))).toEqual(['11.11.11.11', '22.22.22.22']);
    expect(ips(selectProviders(site, '66.66.66.66', providers, SCENARIO))).toEqual(['11.11.11.11', '22.22.22.22']);
    expect(ips(selectProviders(site, undefined, providers, SCENARIO))).toEqual(['11.11.11.11', '22.22.22.22']);
    expect(ips(selectProviders(site, '  ', providers, SCENARIO))).toEqual(['11.11.11.11', '22.22.22.22']);
  });

  it('does not match on a blank consumer value, even against a blank provider value', () => {
    const cmdb = cmdbOf({ '33.33.33.33': { site: ' ' }, '11.11.11.11': { site: ' ' } });
    expect(ips(selectProviders(site, '33.33.33.33', providers, cmdb))).toEqual(['11.11.11.11', '22.22.22.22']);
  });

  it('needs every clause to match', () => {
    const both = label('CONSUMER.label.site = PROVIDER.label.site & CONSUMER.label.rack = PROVIDER.label.rack');
    const cmdb = cmdbOf({
      '33.33.33.33': { site: 'x11', rack: 'r1' },
      '11.11.11.11': { site: 'x11', rack: 'r2' },
      '12.12.12.12': { site: 'x11', rack: 'r1' },
      '13.13.13.13': { site: 'x12', rack: 'r1' },
    });
    const three = [provider('11.11.11.11'), provider('12.12.12.12'), provider('13.13.13.13')];
    expect(ips(selectProviders(both, '33.33.33.33', three, cmdb))).toEqual(['12.12.12.12']);
    // The consumer lacks one of the labels: nothing can match, so all.
    const noRack = cmdbOf({ '33.33.33.33': { site: 'x11' }, '12.12.12.12': { site: 'x11', rack: 'r1' } });
    expect(ips(selectProviders(both, '33.33.33.33', three, noRack))).toHaveLength(3);
  });

  it('reads a provider label from metadata when the CMDB does not have it for the IP', () => {
    const consumersOnly = cmdbOf({ '33.33.33.33': { site: 'x11' }, '44.44.44.44': { site: 'x12' } });
    const copies = [provider('11.11.11.11', { site: 'x11' }), provider('22.22.22.22', { site: 'x12' }), provider('23.23.23.23')];
    expect(ips(selectProviders(site, '33.33.33.33', copies, consumersOnly))).toEqual(['11.11.11.11']);
    expect(ips(selectProviders(site, '44.44.44.44', copies, consumersOnly))).toEqual(['22.22.22.22']);
    // The CMDB wins over metadata when it has the label for the provider's IP.
    const cmdbWins = cmdbOf({ '33.33.33.33': { site: 'x11' }, '22.22.22.22': { site: 'x11' } });
    expect(ips(selectProviders(site, '33.33.33.33', copies, cmdbWins))).toEqual(['11.11.11.11', '22.22.22.22']);
  });

  it('without a CMDB the consumer has no labels, so every provider is returned', () => {
    const copies = [provider('11.11.11.11', { site: 'x11' }), provider('22.22.22.22', { site: 'x12' })];
    expect(ips(selectProviders(site, '33.33.33.33', copies, undefined))).toEqual(['11.11.11.11', '22.22.22.22']);
  });

  it('returns every provider when a lookup throws, and for none or empty selectors', () => {
    const broken: LabelSource = {
      labelsOf: (ip) => {
        if (ip === '22.22.22.22') throw new Error('CMDB down');
        return { site: 'x11' };
      },
    };
    expect(ips(selectProviders(site, '33.33.33.33', providers, broken))).toEqual(['11.11.11.11', '22.22.22.22']);
    expect(ips(selectProviders({ type: 'none' }, '33.33.33.33', providers, SCENARIO))).toHaveLength(2);
    expect(ips(selectProviders(label(''), '33.33.33.33', providers, SCENARIO))).toHaveLength(2);
  });

  it('never returns the caller\'s array itself', () => {
    expect(selectProviders({ type: 'none' }, undefined, providers, undefined)).not.toBe(providers);
  });
});
