/**
 * The CMDB provider contract: where labels of entities (most of all IP addresses) come from.
 *
 * It mirrors Nacos's CMDB SPI (`com.alibaba.nacos.api.cmdb.spi.CmdbService`) method for method, so a
 * provider written against it can answer the same questions Nacos asks its own plugins, and the label
 * selector semantics (`CONSUMER.label.site = PROVIDER.label.site`) carry over unchanged.
 *
 * Everything is asynchronous: a provider may sit on a file, an HTTP API or a database. Readers that need
 * synchronous answers on a hot path put a {@link CmdbCache} (see `cache.ts`) in front of it.
 */

/** The entity type of IP addresses, the only one the label selector looks at. */
export const IP_ENTITY_TYPE = 'ip';

/** A label definition (Nacos `Label`). */
export interface CmdbLabel {
  name: string;
  /** The allowed values; empty when any value is allowed. */
  values: string[];
  description?: string;
}

/** One labelled thing (Nacos `Entity`), e.g. `{type: 'ip', name: '11.11.11.11', labels: {site: 'x11'}}`. */
export interface CmdbEntity {
  type: string;
  name: string;
  /** Label name to value; labels the entity does not carry are absent. */
  labels: Record<string, string>;
}

/** What happened to an entity (Nacos `EntityEventType`). */
export type CmdbEventType = 'ENTITY_ADD_OR_UPDATE' | 'ENTITY_REMOVE';

/**
 * A change notice (Nacos `EntityEvent`). It deliberately carries no label values: the reader re-reads
 * the entity, so a late or duplicated event can never install stale labels.
 */
export interface CmdbEvent {
  entityName: string;
  entityType: string;
  type: CmdbEventType;
}

/** A problem a provider works around (typically by serving older data) instead of failing calls. */
export interface CmdbProblem {
  message: string;
  /** Epoch milliseconds the problem was seen. */
  at: number;
}

/** Entity type to entity name to entity (Nacos `getAllEntities()`). */
export type CmdbEntities = Map<string, Map<string, CmdbEntity>>;

/**
 * The SPI. Methods may reject; callers (the cache) treat a rejection as "no answer this time", never
 * as "no labels".
 */
export interface CmdbProvider {
  /** The names of all labels (Nacos `getLabelNames()`). */
  labelNames(): Promise<string[]>;
  /** The types of all entities, e.g. `['ip']` (Nacos `getEntityTypes()`). */
  entityTypes(): Promise<string[]>;
  /** A label definition, or undefined when no such label exists (Nacos `getLabel(name)`). */
  label(name: string): Promise<CmdbLabel | undefined>;
  /** One label value of an entity; undefined when the entity or the label is unknown (Nacos `getLabelValue`). */
  labelValue(entityName: string, entityType: string, label: string): Promise<string | undefined>;
  /** All label values of an entity; empty when the entity is unknown (Nacos `getLabelValues`). */
  labelValues(entityName: string, entityType: string): Promise<Record<string, string>>;
  /** Every entity, by type then name (Nacos `getAllEntities()`). */
  allEntities(): Promise<CmdbEntities>;
  /** One entity, or undefined when unknown (Nacos `getEntity(name, type)`). */
  entity(entityName: string, entityType: string): Promise<CmdbEntity | undefined>;
  /**
   * The events recorded at or after `sinceMs` (epoch milliseconds, Nacos `getEntityEvents(timestamp)`),
   * oldest first. Including the boundary may repeat an event; that is harmless because events only
   * trigger re-reads. A provider may forget old events; readers also do periodic full refreshes.
   */
  events(sinceMs: number): Promise<CmdbEvent[]>;
  /**
   * Optional: a problem the provider currently works around while still answering (e.g. the file it
   * reads is broken and it serves the last good content); undefined when all is well.
   */
  lastError?(): CmdbProblem | undefined;
  /** Optional: releases watchers, connections and timers. */
  close?(): Promise<void>;
}
