import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { readCsvTable } from './import-nacos-sync-csv.js';
import { ImportNacosSyncError } from './import-nacos-sync-error.js';
import { MAX_VALUE_CHARS, type ExportRow } from './import-nacos-sync-rows.js';
import { readSqlDump } from './import-nacos-sync-sql.js';

const fixture = (name: string) => fileURLToPath(new URL(`../../test/fixtures/nacos-sync/${name}`, import.meta.url));
const plain = (row: ExportRow | undefined) => Object.fromEntries([...(row?.values ?? new Map()).entries()].map(([k, v]) => [k, v.value]));

function failure(run: () => unknown): string {
  try {
    run();
  } catch (err) {
    if (err instanceof ImportNacosSyncError) return err.message;
    throw err;
  }
  throw new Error('expected an ImportNacosSyncError');
}

describe('readCsvTable', () => {
  it('reads the fixture tables as the SQL dump holds them (quotes, doubled quotes, commas in fields, empty as NULL, CRLF)', () => {
    const sql = readSqlDump(readFileSync(fixture('nacos_sync.sql'), 'utf8'), 'nacos_sync.sql').rows;
    const pick = (rows: ExportRow[], table: string, keys: string[]) => rows.filter((r) => r.table === table).map((r) => Object.fromEntries(keys.map((k) => [k, r.values.get(k)?.value])));
    const clusterKeys = ['clusterid', 'clustername', 'clustertype', 'connectkeylist', 'username', 'password', 'namespace'];
    const taskKeys = ['taskid', 'sourceclusterid', 'destclusterid', 'servicename', 'groupname', 'namespace', 'version', 'taskstatus'];
    const clusters = readCsvTable(readFileSync(fixture('cluster.csv'), 'utf8'), 'cluster.csv');
    const tasks = readCsvTable(readFileSync(fixture('task.csv'), 'utf8'), 'task.csv');
    expect(pick(clusters, 'cluster', clusterKeys)).toEqual(pick(sql, 'cluster', clusterKeys));
    expect(pick(tasks, 'task', taskKeys)).toEqual(pick(sql, 'task', taskKeys));
    expect(clusters[1]?.values.get('password')).toEqual({ value: 'it\'s\\a "secret"', column: 'password', at: { file: 'cluster.csv', line: 3, column: 100 } });
  });

  it('takes the table from the header in any spelling, tabs or semicolons as delimiters, NULL markers, a BOM', () => {
    const tsv = '\ufeffCLUSTER_NAME\tclusterType\tNAMESPACE\tpassword\n"a\tb"\tNACOS\t\\N\t""\n';
    expect(readCsvTable(tsv, 'c.tsv').map((r) => [r.table, plain(r)])).toEqual([['cluster', { clustername: 'a\tb', clustertype: 'NACOS', namespace: null, password: '' }]]);
    const semi = 'task_id;service_name;group_name\nt;"multi\nline";NULL\n\n';
    const rows = readCsvTable(semi, 't.csv');
    expect(rows.map((r) => [r.table, plain(r)])).toEqual([['task', { taskid: 't', servicename: 'multi\nline', groupname: null }]]);
    expect(rows[0]?.values.get('groupname')?.at).toEqual({ file: 't.csv', line: 3, column: 7 });
    expect(failure(() => readCsvTable('id,name\n1,a\n', 'x.csv'))).toBe(
      "x.csv:1:1: the header row (id, name) is neither nacos-sync's cluster table (cluster_type, ...) nor its task table (task_id, service_name, ...)",
    );
    expect(failure(() => readCsvTable('', 'x.csv'))).toBe("x.csv: is empty; expected a header row with nacos-sync's column names");
  });

  it('says where a row is wrong: field count, stray quotes, text after a closing quote', () => {
    expect(failure(() => readCsvTable('task_id,service_name\na,b\nc\nd,e\n', 't.csv'))).toBe('t.csv:3:1: this row has 1 fields, the header has 2');
    expect(failure(() => readCsvTable('task_id,service_name\na,b"c\n', 't.csv'))).toBe('t.csv:2:4: a quote inside an unquoted field; quote the whole field and double the quote ("")');
    expect(failure(() => readCsvTable('task_id,service_name\na,"b\\"c"\n', 't.csv'))).toBe('t.csv:2:7: expected a delimiter or the end of the line after the closing quote, found "c"');
  });

  it('says a truncated file is truncated: inside a quoted field, or a short last row', () => {
    expect(failure(() => readCsvTable('task_id,service_name\na,"unfinished', 't.csv'))).toBe('t.csv:2:3: the file ends inside this quoted field; is it truncated?');
    expect(failure(() => readCsvTable('task_id,service_name,group_name\na,b,c\nd,e', 't.csv'))).toBe('t.csv:3:1: this row has 2 fields, the header has 3; is the file truncated?');
  });

  it('refuses a huge field where it starts, without reading it all', () => {
    const huge = `task_id,service_name\na,${'x'.repeat(20 * 1024 * 1024)}\n`;
    expect(failure(() => readCsvTable(huge, 't.csv'))).toBe(`t.csv:2:3: a field longer than ${MAX_VALUE_CHARS} characters; nacos-sync's columns hold at most 255`);
    expect(failure(() => readCsvTable(`task_id,service_name\na,"${'""'.repeat(MAX_VALUE_CHARS + 1)}`, 't.csv'))).toMatch(/^t\.csv:2:3: a field longer than/);
    expect(failure(() => readCsvTable(`task_id\n${','.repeat(1000)}\n`, 't.csv'))).toBe('t.csv:2:1: a row of more than 256 fields; this is not a nacos-sync table');
  });
});
