import { ImportNacosSyncError } from './import-nacos-sync-error.js';
import { columnKey, MAX_VALUE_CHARS, placeText, type ExportRow, type Place, type RowValue } from './import-nacos-sync-rows.js';

/** Most fields of one CSV row: nacos-sync's tables have a dozen columns. */
const MAX_FIELDS = 256;

/** The delimiters a header row may use, tried in this order. */
const DELIMITERS = [',', '\t', ';'] as const;

interface Field {
  text: string;
  quoted: boolean;
  line: number;
  column: number;
}

/**
 * Reads one table of a nacos-sync export from CSV with a header row, as database tools write it
 * (MySQL Workbench, DBeaver, `mysql --batch`, H2's `CSVWRITE`): RFC 4180 fields, `"` quoted with
 * `""` for a quote, CRLF or LF line ends, the delimiter (`,`, tab or `;`) the header row uses. The
 * table is told by its header: `cluster_type` makes it the `cluster` table, `task_id` or
 * `service_name` the `task` table (column names in any case, `clusterType` as well).
 *
 * `NULL` comes as an unquoted empty field, `\N` (MySQL's `INTO OUTFILE`) or `NULL`; a quoted
 * empty field `""` is an empty string.
 *
 * Hostile input: one pass, bounded fields ({@link MAX_VALUE_CHARS} characters, {@link MAX_FIELDS}
 * per row); errors are {@link ImportNacosSyncError}s naming `file:line:column` and, past the
 * header, the column. A file that ends inside a quoted field says it looks truncated, as does a
 * last row with fewer fields than the header.
 *
 * Deliberately left out: backslash escapes inside quoted fields (`ESCAPED BY '\\'`): such a field
 * fails where the escaped quote ends it, rather than being read wrong.
 */
export function readCsvTable(text: string, file: string): ExportRow[] {
  const source = text.startsWith('\ufeff') ? text.slice(1) : text;
  const delimiter = delimiterOf(source);
  const records = new CsvRecords(source, file, delimiter);
  const header = records.next();
  if (header === undefined) throw new ImportNacosSyncError(`${file}: is empty; expected a header row with nacos-sync's column names`);
  const columns = header.map((f) => f.text.trim());
  const keys = columns.map(columnKey);
  const table: ExportRow['table'] | undefined = keys.includes('clustertype') ? 'cluster' : keys.includes('taskid') || keys.includes('servicename') ? 'task' : undefined;
  if (table === undefined) {
    throw new ImportNacosSyncError(
      `${file}:1:1: the header row (${columns.slice(0, 12).join(', ')}) is neither nacos-sync's cluster table (cluster_type, ...) nor its task table (task_id, service_name, ...)`,
    );
  }
  const rows: ExportRow[] = [];
  for (let record = records.next(); record !== undefined; record = records.next()) {
    const first = record[0] as Field;
    if (record.length === 1 && first.text === '' && !first.quoted) continue;
    const at: Place = { file, line: first.line, column: 1 };
    if (record.length !== columns.length) {
      const truncated = records.atEnd() && record.length < columns.length ? '; is the file truncated?' : '';
      throw new ImportNacosSyncError(`${placeText(at)}: this row has ${record.length} fields, the header has ${columns.length}${truncated}`);
    }
    const values = new Map<string, RowValue>();
    record.forEach((f, i) => {
      const column = columns[i] as string;
      values.set(keys[i] as string, { value: nullOf(f), column, at: { file, line: f.line, column: f.column } });
    });
    rows.push({ table, at, values });
  }
  return rows;
}

function nullOf(f: Field): string | null {
  if (f.quoted) return f.text;
  return f.text === '' || f.text === '\\N' || f.text === 'NULL' ? null : f.text;
}

/** The delimiter that splits the first line (outside quotes) into the most fields. */
function delimiterOf(text: string): string {
  const counts = new Map<string, number>(DELIMITERS.map((d) => [d, 0]));
  let quoted = false;
  for (let i = 0; i < text.length && i < MAX_VALUE_CHARS; i += 1) {
    const c = text[i] as string;
    if (c === '"') quoted = !quoted;
    else if (!quoted && (c === '\n' || c === '\r')) break;
    else if (!quoted && counts.has(c)) counts.set(c, (counts.get(c) ?? 0) + 1);
  }
  let best: string = DELIMITERS[0];
  for (const d of DELIMITERS) if ((counts.get(d) ?? 0) > (counts.get(best) ?? 0)) best = d;
  return best;
}

class CsvRecords {
  private i = 0;
  private line = 1;
  private lineStart = 0;

  constructor(
    private readonly text: string,
    private readonly file: string,
    private readonly delimiter: string,
  ) {}

  atEnd(): boolean {
    return this.i >= this.text.length;
  }

  private fail(message: string, at: { line: number; column: number }): never {
    throw new ImportNacosSyncError(`${placeText({ file: this.file, ...at })}: ${message}`);
  }

  /** The next record's fields, or undefined at the end of the text. */
  next(): Field[] | undefined {
    if (this.atEnd()) return undefined;
    const fields: Field[] = [];
    for (;;) {
      fields.push(this.field());
      if (fields.length > MAX_FIELDS) this.fail(`a row of more than ${MAX_FIELDS} fields; this is not a nacos-sync table`, { line: this.line, column: 1 });
      const c = this.text[this.i];
      if (c === this.delimiter) {
        this.i += 1;
        continue;
      }
      if (c === '\r' && this.text[this.i + 1] === '\n') this.i += 1;
      if (c !== undefined) this.newline();
      return fields;
    }
  }

  private newline(): void {
    this.i += 1;
    this.line += 1;
    this.lineStart = this.i;
  }

  private field(): Field {
    const line = this.line;
    const column = this.i - this.lineStart + 1;
    if (this.text[this.i] !== '"') {
      const from = this.i;
      for (;;) {
        const c = this.text[this.i];
        if (c === undefined || c === this.delimiter || c === '\n' || c === '\r') break;
        if (c === '"') this.fail('a quote inside an unquoted field; quote the whole field and double the quote ("")', { line, column: this.i - this.lineStart + 1 });
        this.i += 1;
        if (this.i - from > MAX_VALUE_CHARS) this.fail(`a field longer than ${MAX_VALUE_CHARS} characters; nacos-sync's columns hold at most 255`, { line, column });
      }
      return { text: this.text.slice(from, this.i), quoted: false, line, column };
    }
    this.i += 1;
    const parts: string[] = [];
    let length = 0;
    let from = this.i;
    for (;;) {
      const c = this.text[this.i];
      if (c === undefined) this.fail('the file ends inside this quoted field; is it truncated?', { line, column });
      if (c === '"') {
        parts.push(this.text.slice(from, this.i));
        length += this.i - from;
        if (this.text[this.i + 1] === '"') {
          parts.push('"');
          length += 1;
          this.i += 2;
          from = this.i;
        } else {
          this.i += 1;
          break;
        }
      } else if (c === '\n') {
        this.newline();
      } else {
        this.i += 1;
      }
      if (length + (this.i - from) > MAX_VALUE_CHARS) this.fail(`a field longer than ${MAX_VALUE_CHARS} characters; nacos-sync's columns hold at most 255`, { line, column });
    }
    const after = this.text[this.i];
    if (after !== undefined && after !== this.delimiter && after !== '\n' && after !== '\r') {
      this.fail(`expected a delimiter or the end of the line after the closing quote, found "${after}"`, { line: this.line, column: this.i - this.lineStart + 1 });
    }
    return { text: parts.join(''), quoted: true, line, column };
  }
}
