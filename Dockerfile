# The kais image (docs/kubernetes.md): `kais orchestrator`, `kais agent` and every other command of
# the CLI; the deployment in deploy/ runs it as user 10001. No image is built or published by this
# repository: build it with `docker build -t kais:0.1.0 .` and push it to your registry.

# 1. build: the TypeScript sources compiled with every dependency (dev ones included)
FROM node:20-bookworm-slim AS build
WORKDIR /src
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
RUN npm ci
COPY . .
RUN npm run build

# 2. runtime dependencies only (better-sqlite3 is compiled here when no prebuilt binary fits)
FROM node:20-bookworm-slim AS deps
WORKDIR /app
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
RUN npm ci --omit=dev && npm cache clean --force

# 3. the image: what `npm pack` ships (compiled CLI, built-in scenarios, shipped models, curriculum)
FROM node:20-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY models ./models
COPY training/curriculum/lessons ./training/curriculum/lessons
COPY package.json LICENSE README.md ./
RUN rm -rf dist/scripts && groupadd --gid 10001 kais && useradd --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin kais
USER 10001:10001
EXPOSE 7000 8080 9090
ENTRYPOINT ["node", "/app/dist/kais.js"]
CMD ["--help"]
