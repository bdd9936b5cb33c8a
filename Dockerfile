# regsync image. Build context: the repository root (see .dockerignore).
#   docker build -t regsync .
#   docker run -p 8080:8080 -v regsync-data:/data regsync                        standalone
#   docker run -p 8080:8080 -e REGSYNC_REDIS_URL=redis://redis:6379 regsync      on a Redis of yours
#   docker run regsync worker --redis redis://redis:6379 --metrics-listen 0.0.0.0:9464
#
# The default command is `regsync up` (REST API, dashboard and a sync worker in one process). With
# REGSYNC_REDIS_URL (or --redis) it uses that Redis; without, it starts the redis-server installed
# below on 127.0.0.1 inside the container, with its append-only file in /data (a volume): the image
# works on its own for a single machine and a try-out. `api`, `worker` and `dns` need a Redis
# (REGSYNC_REDIS_URL) and never start the local one.

FROM node:20-slim AS build
WORKDIR /app
# Dependencies first, so that source edits do not invalidate this layer. --ignore-scripts because the
# `prepare` script would build dist/ before the sources are here.
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts
COPY . .
RUN npm run build && npm prune --omit=dev

FROM node:20-slim
# redis-server for `regsync up` without a Redis of its own; tini forwards SIGTERM to node and reaps
# the redis-server child, so `docker stop` is a graceful stop (shard handover, reconciles finished).
RUN apt-get update \
  && apt-get install -y --no-install-recommends redis-server tini \
  && rm -rf /var/lib/apt/lists/* \
  && mkdir -p /data \
  && chown node:node /data
ENV NODE_ENV=production
WORKDIR /app
# What runs: the command, the build, production dependencies, and the demo's declarations.
COPY --from=build --chown=node:node /app/package.json ./
COPY --from=build --chown=node:node /app/bin ./bin
COPY --from=build --chown=node:node /app/dist ./dist
COPY --from=build --chown=node:node /app/node_modules ./node_modules
COPY --from=build --chown=node:node /app/tasks ./tasks
USER node
VOLUME ["/data"]
EXPOSE 8080
ENTRYPOINT ["/usr/bin/tini", "--", "node", "bin/regsync.js"]
CMD ["up", "--listen", "0.0.0.0:8080", "--data-dir", "/data"]
