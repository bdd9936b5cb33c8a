/**
 * The rows of a nacos-sync export, whatever file format they were read from (SQL dump or CSV):
 * what the importer maps onto clusters and tasks, with the place of every value for messages.
 */

/** Where something is in an export: 1-based line and column. */
export interface Place {
  file: string;
  line: number;
  column: number;
}

/** One value of a row: `null` for SQL `NULL` (or a CSV null marker), with where it was read. */
export interface RowValue {
  value: string | null;
  /** The column's name as the export spells it (`cluster_type`, `CLUSTER_TYPE`, `clusterType`). */
  column: string;
  at: Place;
}

/** One row of the `cluster` or `task` table. */
export interface ExportRow {
  table: 'cluster' | 'task';
  /** Where the row starts. */
  at: Place;
  /** Values by {@link columnKey} of their column. */
  values: ReadonlyMap<string, RowValue>;
}

/**
 * A column name as the importer looks it up: lower case, without `_`, so that `cluster_type`
 * (nacos-sync's schema, MySQL), `CLUSTER_TYPE` (H2) and `clusterType` (the JPA field) are one.
 */
export function columnKey(name: string): string {
  return name.replace(/_/g, '').toLowerCase();
}

/** `file:line:column`. */
export function placeText(at: Place): string {
  return `${at.file}:${at.line}:${at.column}`;
}

/** The nacos-sync table a name denotes (`cluster`, `CLUSTER`, `nacos_sync.cluster`'s last part), else undefined. */
export function tableOf(name: string): ExportRow['table'] | undefined {
  const key = name.toLowerCase();
  return key === 'cluster' || key === 'task' ? key : undefined;
}

/** Most characters of one value: nacos-sync's columns are `varchar(255)`; anything far longer is not its export. */
export const MAX_VALUE_CHARS = 65_536;

/** Most bytes of one export file read. */
export const MAX_FILE_BYTES = 256 * 1024 * 1024;
