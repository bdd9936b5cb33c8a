#!/bin/sh
# Starts one container of a pod of the `redis` StatefulSet: redis-server or its Sentinel.
#
#   redis-ha.sh redis            write redis.conf, exec redis-server
#   redis-ha.sh sentinel         write sentinel.conf unless it exists, exec redis-server --sentinel
#   redis-ha.sh redis-conf       print the redis.conf it would write (tests, debugging)
#   redis-ha.sh sentinel-conf    print the sentinel.conf it would write
#
# Who the primary is comes from the Sentinels already running (the `redis-sentinel` Service):
# after a failover, a pod that restarts, pod 0 included, rejoins as a replica of the promoted one
# instead of starting as a second primary. When no Sentinel answers (the very first start), pod 0
# is the primary and the others replicate it. Every address is a stable pod DNS name of the
# headless Service, since pod IPs change at every restart.
set -eu

: "${MASTER_NAME:=mymaster}"
: "${REDIS_PORT:=6379}"
: "${SENTINEL_PORT:=26379}"
: "${SENTINEL_HOST:=redis-sentinel}"
: "${QUORUM:=2}"
: "${DOWN_AFTER_MS:=5000}"
: "${FAILOVER_TIMEOUT_MS:=60000}"
: "${MAXMEMORY:=400mb}"
: "${DATA_DIR:=/data}"
: "${CONF_DIR:=/conf}"
: "${HEADLESS_DOMAIN:?set HEADLESS_DOMAIN, e.g. redis-headless.regsync.svc.cluster.local}"
POD="${POD_NAME:-$(hostname)}"
SELF="$POD.$HEADLESS_DOMAIN"
FIRST="${POD%-*}-0.$HEADLESS_DOMAIN"

# "host port" of the primary the running Sentinels know; nothing when none answers.
known_primary() {
  answer=$(timeout 5 redis-cli -h "$SENTINEL_HOST" -p "$SENTINEL_PORT" --raw sentinel get-master-addr-by-name "$MASTER_NAME" 2>/dev/null || true)
  host=$(printf '%s\n' "$answer" | sed -n 1p)
  port=$(printf '%s\n' "$answer" | sed -n 2p)
  case "$port" in '' | *[!0-9]*) return 0 ;; esac
  case "$host" in '' | *[!A-Za-z0-9.:-]*) return 0 ;; esac
  printf '%s %s\n' "$host" "$port"
}

primary() {
  found=$(known_primary)
  if [ -n "$found" ]; then printf '%s\n' "$found"; else printf '%s %s\n' "$FIRST" "$REDIS_PORT"; fi
}

redis_conf() {
  set -- $(primary)
  cat <<CONF
port $REDIS_PORT
bind * -::*
protected-mode no
dir $DATA_DIR
appendonly yes
appendfsync everysec
# BullMQ's queues and regsync's state must never be evicted: a full Redis refuses writes instead.
maxmemory $MAXMEMORY
maxmemory-policy noeviction
replica-announce-ip $SELF
replica-announce-port $REDIS_PORT
CONF
  if [ "$1" != "$SELF" ]; then printf 'replicaof %s %s\n' "$1" "$2"; fi
}

sentinel_conf() {
  set -- $(primary)
  # A stable id per pod: a recreated pod is the same Sentinel to the others, not one more to count.
  myid=$(printf '%s' "$SELF" | sha1sum | cut -c1-40)
  cat <<CONF
port $SENTINEL_PORT
dir $DATA_DIR
sentinel myid $myid
sentinel resolve-hostnames yes
sentinel announce-hostnames yes
sentinel announce-ip $SELF
sentinel announce-port $SENTINEL_PORT
sentinel monitor $MASTER_NAME $1 $2 $QUORUM
sentinel down-after-milliseconds $MASTER_NAME $DOWN_AFTER_MS
sentinel failover-timeout $MASTER_NAME $FAILOVER_TIMEOUT_MS
sentinel parallel-syncs $MASTER_NAME 1
CONF
}

case "${1:-}" in
  redis-conf) redis_conf ;;
  sentinel-conf) sentinel_conf ;;
  redis)
    redis_conf >"$CONF_DIR/redis.conf"
    exec redis-server "$CONF_DIR/redis.conf"
    ;;
  sentinel)
    # Sentinel rewrites its file with what it learns (primary, replicas, epochs): keep it across restarts.
    [ -s "$DATA_DIR/sentinel.conf" ] || sentinel_conf >"$DATA_DIR/sentinel.conf"
    exec redis-server "$DATA_DIR/sentinel.conf" --sentinel
    ;;
  *)
    echo "usage: $0 redis|sentinel|redis-conf|sentinel-conf" >&2
    exit 64
    ;;
esac
