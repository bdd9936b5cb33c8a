import { ImportNacosSyncError } from './import-nacos-sync-error.js';
import { columnKey, MAX_VALUE_CHARS, placeText, tableOf, type ExportRow, type Place, type RowValue } from './import-nacos-sync-rows.js';

/**
 * How string literals escape: MySQL (`mysqldump`) takes backslash escapes (`\'`, `\n`, `\\`) as
 * well as `''`; H2 (`SCRIPT TO`) and standard SQL only `''`. `auto` decides on the first quoted
 * identifier (backticks: MySQL; double quotes: H2) or `CREATE MEMORY`/`CACHED TABLE` (H2), and
 * reads backslash escapes until then.
 */
export type SqlDialect = 'auto' | 'mysql' | 'h2';

/** The `cluster` and `task` rows of a dump, and notes for the operator. */
export interface SqlDump {
  rows: ExportRow[];
  notes: string[];
}

type TokenKind = 'word' | 'ident' | 'string' | 'number' | 'punct' | 'eof';

interface Token {
  kind: TokenKind;
  /** A word or number as written; an identifier or string with its quotes removed and escapes read. */
  text: string;
  line: number;
  column: number;
}

/** Most characters of an unquoted word or number. */
const MAX_WORD_CHARS = 1024;

/** The words that open a table element which is not a column (`PRIMARY KEY (...)`, `KEY idx (...)`). */
const NOT_COLUMNS = new Set(['PRIMARY', 'KEY', 'UNIQUE', 'CONSTRAINT', 'INDEX', 'FOREIGN', 'CHECK', 'FULLTEXT', 'SPATIAL']);

/** MySQL's backslash escapes (`\%` and `\_` keep their backslash, as MySQL reads them). */
const MYSQL_ESCAPES: Readonly<Record<string, string>> = { '0': '\0', b: '\b', n: '\n', r: '\r', t: '\t', Z: '\x1a', '%': '\\%', _: '\\_' };

/**
 * Reads the rows of nacos-sync's `cluster` and `task` tables from a SQL dump: `INSERT INTO ...
 * VALUES (...), (...);` statements as `mysqldump` and H2's `SCRIPT` write them, with or without a
 * column list (without one, the columns come from the dump's `CREATE TABLE`: a table Hibernate
 * created has its columns in another order than nacos-sync's `nacosSync.sql`). Every other
 * statement and table is skipped.
 *
 * The input is hostile text: one pass over it, character by character (regular expressions only
 * check single bounded tokens, such as a hex literal); every string and identifier is bounded
 * ({@link MAX_VALUE_CHARS}), as is every word, so a huge
 * or unterminated literal fails where it starts instead of being read to the end. Errors are
 * {@link ImportNacosSyncError}s naming `file:line:column`; a file that ends inside a statement
 * says it looks truncated.
 *
 * Deliberately left out: expressions and function calls in `VALUES` (except H2's
 * `STRINGDECODE('...')`, `U&'...'` strings, `X'..'`/`0x..` hex literals and charset introducers such as `_binary`),
 * `INSERT ... SELECT` and `INSERT ... SET`: dump tools do not write them.
 */
export function readSqlDump(text: string, file: string, dialect: SqlDialect = 'auto'): SqlDump {
  return new DumpReader(new SqlTokens(text.startsWith('\ufeff') ? text.slice(1) : text, file, dialect)).read(text);
}

class SqlTokens {
  private i = 0;
  private line = 1;
  private lineStart = 0;
  private peeked: Token | undefined;
  /** Whether strings take backslash escapes; undefined until the dialect shows. */
  backslash: boolean | undefined;

  constructor(
    private readonly text: string,
    readonly file: string,
    dialect: SqlDialect,
  ) {
    this.backslash = dialect === 'auto' ? undefined : dialect === 'mysql';
  }

  /** The H2 dialect, unless it is known already. */
  seenH2(): void {
    this.backslash ??= false;
  }

  fail(message: string, at: { line: number; column: number }): never {
    throw new ImportNacosSyncError(`${placeText({ file: this.file, ...at })}: ${message}`);
  }

  place(at: { line: number; column: number }): Place {
    return { file: this.file, line: at.line, column: at.column };
  }

  peek(): Token {
    this.peeked ??= this.read();
    return this.peeked;
  }

  next(): Token {
    const t = this.peek();
    this.peeked = undefined;
    return t;
  }

  private at(): { line: number; column: number } {
    return { line: this.line, column: this.i - this.lineStart + 1 };
  }

  /** Moves past the character at `i`, counting lines. */
  private step(): void {
    if (this.text.charCodeAt(this.i) === 10) {
      this.line += 1;
      this.lineStart = this.i + 1;
    }
    this.i += 1;
  }

  private read(): Token {
    this.skipSpaceAndComments();
    const start = this.at();
    const c = this.text[this.i];
    if (c === undefined) return { kind: 'eof', text: '', ...start };
    if (c === "'") return { kind: 'string', text: this.quoted("'", this.backslash !== false, 'string'), ...start };
    if (c === '`') {
      this.backslash ??= true;
      return { kind: 'ident', text: this.quoted('`', false, 'quoted name'), ...start };
    }
    if (c === '"') {
      this.backslash ??= false;
      return { kind: 'ident', text: this.quoted('"', false, 'quoted name'), ...start };
    }
    if (isDigit(c) || (c === '.' && isDigit(this.text[this.i + 1]))) return { kind: 'number', text: this.word(start), ...start };
    if (isWordChar(c)) return { kind: 'word', text: this.word(start), ...start };
    this.step();
    return { kind: 'punct', text: c, ...start };
  }

  private skipSpaceAndComments(): void {
    for (;;) {
      const c = this.text[this.i];
      if (c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\f') {
        this.step();
      } else if ((c === '-' && this.text[this.i + 1] === '-') || c === '#') {
        while (this.i < this.text.length && this.text.charCodeAt(this.i) !== 10) this.i += 1;
      } else if (c === '/' && this.text[this.i + 1] === '*') {
        const start = this.at();
        this.i += 2;
        while (this.i < this.text.length && !(this.text[this.i] === '*' && this.text[this.i + 1] === '/')) this.step();
        if (this.i >= this.text.length) this.fail('the file ends inside this /* comment; is it truncated?', start);
        this.i += 2;
      } else {
        return;
      }
    }
  }

  /** A word or number: letters, digits, `_`, `$` (and `.`, `+`, `-` after an exponent in numbers). */
  private word(start: { line: number; column: number }): string {
    const from = this.i;
    while (this.i < this.text.length) {
      const c = this.text[this.i] as string;
      const exponentSign = (c === '+' || c === '-') && /[eE]/.test(this.text[this.i - 1] ?? '') && isDigit(this.text[from]);
      if (!(isWordChar(c) || (c === '.' && isDigit(this.text[from])) || exponentSign)) break;
      this.i += 1;
      if (this.i - from > MAX_WORD_CHARS) this.fail(`a word longer than ${MAX_WORD_CHARS} characters; this is not a nacos-sync dump`, start);
    }
    return this.text.slice(from, this.i);
  }

  /** A quoted string or name: the quote doubled stands for itself; with `backslash`, MySQL's escapes too. */
  private quoted(quote: string, backslash: boolean, what: string): string {
    const start = this.at();
    this.i += 1;
    const parts: string[] = [];
    let length = 0;
    let from = this.i;
    for (;;) {
      const c = this.text[this.i];
      if (c === undefined) this.fail(`the file ends inside this ${what}; is it truncated?`, start);
      if (c === quote || (backslash && c === '\\')) {
        parts.push(this.text.slice(from, this.i));
        length += this.i - from;
        if (c === quote && this.text[this.i + 1] !== quote) {
          this.i += 1;
          return parts.join('');
        }
        const escaped = this.text[this.i + 1];
        if (escaped === undefined) this.fail(`the file ends inside this ${what}; is it truncated?`, start);
        parts.push(c === quote ? quote : (MYSQL_ESCAPES[escaped] ?? escaped));
        length += 1;
        this.i += 1;
        this.step();
        from = this.i;
      } else {
        this.step();
      }
      if (length + (this.i - from) > MAX_VALUE_CHARS) this.fail(`a ${what} longer than ${MAX_VALUE_CHARS} characters; nacos-sync's columns hold at most 255`, start);
    }
  }
}

function isDigit(c: string | undefined): boolean {
  return c !== undefined && c >= '0' && c <= '9';
}

function isWordChar(c: string): boolean {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || isDigit(c) || c === '_' || c === '$';
}

function isWord(t: Token, ...words: string[]): boolean {
  return t.kind === 'word' && words.includes(t.text.toUpperCase());
}

function isPunct(t: Token, c: string): boolean {
  return t.kind === 'punct' && t.text === c;
}

function describe(t: Token): string {
  if (t.kind === 'eof') return 'the end of the file';
  if (t.kind === 'string') return 'a string';
  return `"${t.text.slice(0, 40)}"`;
}

class DumpReader {
  /** Columns of the tables the dump creates, by table. */
  private readonly columns = new Map<ExportRow['table'], string[]>();
  private readonly rows: ExportRow[] = [];

  constructor(private readonly t: SqlTokens) {}

  read(text: string): SqlDump {
    for (;;) {
      const first = this.t.next();
      if (first.kind === 'eof') break;
      if (isPunct(first, ';')) continue;
      if (isWord(first, 'INSERT', 'REPLACE')) this.insert(first);
      else if (isWord(first, 'CREATE')) this.create();
      else this.skipStatement();
    }
    return { rows: this.rows, notes: this.notes(text) };
  }

  private notes(text: string): string[] {
    const head = text.slice(0, 200);
    if (/^\ufeff?-- (MySQL|MariaDB) dump/.test(head) && !text.slice(-1000).includes('-- Dump completed')) {
      return [`${this.t.file}: has no "-- Dump completed" line at its end: mysqldump may not have finished; compare the row counts with the database`];
    }
    return [];
  }

  /** Skips to the `;` that ends the statement (or the end of the file). */
  private skipStatement(): void {
    let depth = 0;
    for (;;) {
      const t = this.t.next();
      if (t.kind === 'eof' || (depth === 0 && isPunct(t, ';'))) return;
      if (isPunct(t, '(')) depth += 1;
      else if (isPunct(t, ')')) depth -= 1;
    }
  }

  /** A possibly qualified name (`"PUBLIC"."CLUSTER"`, `nacos_sync.task`): its last part. */
  private name(): Token {
    let part = this.t.next();
    if (part.kind !== 'word' && part.kind !== 'ident') this.t.fail(`expected a table name, found ${describe(part)}`, part);
    while (isPunct(this.t.peek(), '.')) {
      if (part.kind === 'word' && part.text.toUpperCase() === 'PUBLIC') this.t.seenH2();
      this.t.next();
      part = this.t.next();
      if (part.kind !== 'word' && part.kind !== 'ident') this.t.fail(`expected a table name, found ${describe(part)}`, part);
    }
    return part;
  }

  private create(): void {
    let t = this.t.next();
    while (isWord(t, 'MEMORY', 'CACHED', 'TEMPORARY', 'GLOBAL', 'LOCAL')) {
      if (isWord(t, 'MEMORY', 'CACHED')) this.t.seenH2();
      t = this.t.next();
    }
    if (!isWord(t, 'TABLE')) return this.skipStatement();
    if (isWord(this.t.peek(), 'IF')) {
      this.t.next();
      this.t.next();
      this.t.next();
    }
    const table = tableOf(this.name().text);
    if (table === undefined || !isPunct(this.t.next(), '(')) return this.skipStatement();
    const columns: string[] = [];
    for (;;) {
      const first = this.t.next();
      if (first.kind === 'eof') this.t.fail(`the file ends inside CREATE TABLE ${table}; is it truncated?`, first);
      if (isPunct(first, ')')) break;
      if (first.kind === 'ident' || (first.kind === 'word' && !NOT_COLUMNS.has(first.text.toUpperCase()))) columns.push(first.text);
      if (this.skipElement(table)) break;
    }
    this.columns.set(table, columns);
    this.skipStatement();
  }

  /** Skips the rest of a table element; true when it was the last one (`)` met). */
  private skipElement(table: string): boolean {
    let depth = 0;
    for (;;) {
      const t = this.t.next();
      if (t.kind === 'eof') this.t.fail(`the file ends inside CREATE TABLE ${table}; is it truncated?`, t);
      if (isPunct(t, '(')) depth += 1;
      else if (isPunct(t, ')')) {
        if (depth === 0) return true;
        depth -= 1;
      } else if (depth === 0 && isPunct(t, ',')) return false;
    }
  }

  private insert(start: Token): void {
    let t = this.t.next();
    while (isWord(t, 'IGNORE', 'LOW_PRIORITY', 'DELAYED', 'HIGH_PRIORITY')) t = this.t.next();
    if (!isWord(t, 'INTO')) return this.skipStatement();
    const nameToken = this.name();
    const table = tableOf(nameToken.text);
    if (table === undefined) return this.skipStatement();
    const listed = isPunct(this.t.peek(), '(') ? this.columnList() : undefined;
    const columns = listed ?? this.columns.get(table);
    if (columns === undefined) {
      this.t.fail(
        `INSERT INTO ${nameToken.text} names no columns and the file has no CREATE TABLE ${nameToken.text} before it: ` +
          'export with the table definitions (mysqldump without --no-create-info) or with column names (mysqldump --complete-insert)',
        start,
      );
    }
    let keyword = this.t.next();
    if (isWord(keyword, 'OVERRIDING')) {
      // H2: OVERRIDING SYSTEM VALUE / OVERRIDING USER VALUE, before VALUES.
      this.t.next();
      this.t.next();
      keyword = this.t.next();
    }
    if (!isWord(keyword, 'VALUES', 'VALUE')) this.t.fail(`expected VALUES in INSERT INTO ${nameToken.text}, found ${describe(keyword)}`, keyword);
    for (;;) {
      this.row(table, columns, start);
      const after = this.t.next();
      if (isPunct(after, ',')) continue;
      if (isPunct(after, ';')) return;
      if (isWord(after, 'ON')) return this.skipStatement();
      if (after.kind === 'eof') this.t.fail(`the file ends inside the INSERT INTO ${nameToken.text} that starts here (no ";" after its last row); is it truncated?`, start);
      this.t.fail(`expected "," or ";" after a row of INSERT INTO ${nameToken.text}, found ${describe(after)}`, after);
    }
  }

  private columnList(): string[] {
    this.t.next();
    const columns: string[] = [];
    for (;;) {
      const t = this.t.next();
      if (t.kind !== 'word' && t.kind !== 'ident') this.t.fail(`expected a column name, found ${describe(t)}`, t);
      columns.push(t.text);
      const after = this.t.next();
      if (isPunct(after, ')')) return columns;
      if (!isPunct(after, ',')) this.t.fail(`expected "," or ")" in the column list, found ${describe(after)}`, after);
    }
  }

  private row(table: ExportRow['table'], columns: readonly string[], statement: Token): void {
    const open = this.t.next();
    if (open.kind === 'eof') this.t.fail(`the file ends inside the INSERT INTO ${table} that starts here; is it truncated?`, statement);
    if (!isPunct(open, '(')) this.t.fail(`expected "(" to start a row of ${table}, found ${describe(open)}`, open);
    const values = new Map<string, RowValue>();
    let count = 0;
    for (;;) {
      const at = this.t.peek();
      if (at.kind === 'eof') this.t.fail(`the file ends inside this row of ${table}; is it truncated?`, open);
      const value = this.value(table);
      const column = columns[count];
      count += 1;
      if (column !== undefined) values.set(columnKey(column), { value, column, at: this.t.place(at) });
      const after = this.t.next();
      if (isPunct(after, ')')) break;
      if (after.kind === 'eof') this.t.fail(`the file ends inside this row of ${table}; is it truncated?`, open);
      if (!isPunct(after, ',')) this.t.fail(`expected "," or ")" after a value, found ${describe(after)}`, after);
    }
    if (count !== columns.length) {
      this.t.fail(`this row of ${table} has ${count} values, but the table has ${columns.length} columns (${columns.join(', ')})`, open);
    }
    this.rows.push({ table, at: this.t.place(open), values });
  }

  private value(table: string): string | null {
    const t = this.t.next();
    if (t.kind === 'string' || t.kind === 'number') return t.kind === 'number' && /^0x/i.test(t.text) ? hexText(this.t, t, t.text.slice(2)) : t.text;
    if (t.kind === 'punct' && (t.text === '-' || t.text === '+') && this.t.peek().kind === 'number') return `${t.text === '-' ? '-' : ''}${this.t.next().text}`;
    if (isWord(t, 'NULL')) return null;
    if (isWord(t, 'TRUE', 'FALSE')) return t.text.toLowerCase();
    const next = this.t.peek();
    if (t.kind === 'word' && t.text.startsWith('_') && next.kind === 'string') return this.t.next().text;
    if (isWord(t, 'X') && next.kind === 'string' && next.line === t.line && next.column === t.column + 1) return hexText(this.t, next, this.t.next().text);
    if (isWord(t, 'U') && isPunct(next, '&')) {
      this.t.next();
      const s = this.t.next();
      if (s.kind !== 'string') this.t.fail(`expected a string after U&, found ${describe(s)}`, s);
      return unicodeUnescape(this.t, s);
    }
    if (isWord(t, 'STRINGDECODE') && isPunct(next, '(')) {
      this.t.next();
      const s = this.t.next();
      if (s.kind !== 'string') this.t.fail(`expected a string in STRINGDECODE(...), found ${describe(s)}`, s);
      const close = this.t.next();
      if (!isPunct(close, ')')) this.t.fail(`expected ")" after STRINGDECODE's string, found ${describe(close)}`, close);
      return javaUnescape(this.t, s);
    }
    return this.t.fail(`expected a string, a number or NULL in a row of ${table}, found ${describe(t)}`, t);
  }
}

/** A hex literal's bytes as UTF-8 text (`mysqldump --hex-blob`, H2's `X'..'`). */
function hexText(t: SqlTokens, at: Token, hex: string): string {
  if (hex.length % 2 !== 0 || !/^[0-9A-Fa-f]*$/.test(hex)) t.fail('a hex literal with an odd number of digits or a non-hex digit', at);
  return Buffer.from(hex, 'hex').toString('utf8');
}

const JAVA_ESCAPES: Readonly<Record<string, string>> = { n: '\n', t: '\t', r: '\r', b: '\b', f: '\f', '\\': '\\', "'": "'", '"': '"' };

/** A standard SQL `U&'...'` string (H2 2.x's `SCRIPT`): `\XXXX` and `\+XXXXXX` code points, `\\` for a backslash. */
function unicodeUnescape(t: SqlTokens, at: Token): string {
  const s = at.text;
  const out: string[] = [];
  for (let i = 0; i < s.length; i += 1) {
    const c = s[i] as string;
    if (c !== '\\') {
      out.push(c);
      continue;
    }
    if (s[i + 1] === '\\') {
      out.push('\\');
      i += 1;
      continue;
    }
    const long = s[i + 1] === '+';
    const hex = long ? s.slice(i + 2, i + 8) : s.slice(i + 1, i + 5);
    const code = /^[0-9A-Fa-f]+$/.test(hex) && hex.length === (long ? 6 : 4) ? parseInt(hex, 16) : NaN;
    if (!(code <= 0x10ffff)) t.fail('U&: an escape needs four hex digits (\\XXXX) or six (\\+XXXXXX)', at);
    out.push(String.fromCodePoint(code));
    i += long ? 7 : 4;
  }
  return out.join('');
}

/** H2's `STRINGDECODE`: Java escapes (`\uXXXX`, `\n`, `\\`, ...) in an already unquoted string. */
function javaUnescape(t: SqlTokens, at: Token): string {
  const s = at.text;
  const out: string[] = [];
  for (let i = 0; i < s.length; i += 1) {
    const c = s[i] as string;
    if (c !== '\\') {
      out.push(c);
      continue;
    }
    const e = s[i + 1];
    if (e === 'u') {
      const hex = s.slice(i + 2, i + 6);
      if (!/^[0-9A-Fa-f]{4}$/.test(hex)) t.fail('STRINGDECODE: \\u needs four hex digits', at);
      out.push(String.fromCharCode(parseInt(hex, 16)));
      i += 5;
    } else if (e !== undefined && JAVA_ESCAPES[e] !== undefined) {
      out.push(JAVA_ESCAPES[e]);
      i += 1;
    } else {
      t.fail(`STRINGDECODE: unknown escape \\${e ?? ''}`, at);
    }
  }
  return out.join('');
}
