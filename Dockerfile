# regsync daemon image. Build context: the repository root (see .dockerignore).
#   docker build -t regsync .        or        docker compose up --build

FROM node:20-slim AS build
WORKDIR /app
# Dependencies first, so that source edits do not invalidate this layer. --ignore-scripts because the
# `prepare` script would build dist/ before the sources are here.
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts
COPY . .
RUN npm run build && npm prune --omit=dev

FROM node:20-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build --chown=node:node /app ./
USER node
EXPOSE 8080
ENTRYPOINT ["node", "bin/regsync.js"]
CMD ["up", "--listen", "0.0.0.0:8080"]
