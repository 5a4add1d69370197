# anarchond in a container. Not built on the machine this was written on (it
# has no Docker engine): see docs/operating.md, "Container".
#
#   docker build --build-arg VERSION="$(git describe --tags --always --dirty)" \
#                --build-arg COMMIT="$(git rev-parse HEAD)" -t anarchon .
#   docker run --init --stop-timeout 50 -v anarchon-state:/var/lib/anarchon \
#              -v "$PWD/etc-anarchon:/etc/anarchon:ro" anarchon

# Build: cgo (SQLite is linked in), so a glibc toolchain image.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# .git is not in the build context (.dockerignore): pass what `make build`
# would have read from it.
ARG VERSION=dev
ARG COMMIT=
RUN CGO_ENABLED=1 go build \
      -ldflags "-X github.com/anarchon/anarchon/internal/cli.Version=${VERSION} -X github.com/anarchon/anarchon/internal/cli.Commit=${COMMIT}" \
      -o /out/anarchond ./cmd/anarchond
# The jobs' guard, beside anarchond (static: standard library only, no
# cgo).
RUN CGO_ENABLED=0 go build -o /out/anarchon-supervise ./cmd/anarchon-supervise

# Run: the same Debian release as the builder, for the glibc the binary links.
FROM debian:bookworm-slim
# ca-certificates: TLS to the stores; tzdata: jobs' timezone: (the binary does
# not embed the zone database); curl: the HEALTHCHECK.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates tzdata curl \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/anarchond /out/anarchon-supervise /usr/bin/
# The packaged crontab: SQLite at /var/lib/anarchon/anarchon.db, no jobs.
# Mount a directory of yours holding anarchon.yaml over /etc/anarchon
# (read-only is fine): see docs/operating.md.
COPY packaging/anarchon.yaml /etc/anarchon/anarchon.yaml
# A non-root user with a fixed uid, so that volume ownership is predictable.
# The crontab is root's and not writable by others: anarchond refuses one
# that group or others can write.
RUN groupadd --system --gid 10001 anarchon \
 && useradd --system --uid 10001 --gid anarchon --home-dir /var/lib/anarchon \
      --no-create-home --shell /usr/sbin/nologin anarchon \
 && mkdir -p /var/lib/anarchon \
 && chown anarchon:anarchon /var/lib/anarchon \
 && chmod 0750 /var/lib/anarchon \
 && chown root:root /etc/anarchon /etc/anarchon/anarchon.yaml \
 && chmod 0755 /etc/anarchon \
 && chmod 0644 /etc/anarchon/anarchon.yaml
USER anarchon:anarchon
# The binary runs on this image's glibc and accepts the shipped crontab.
RUN ["/usr/bin/anarchond", "validate", "--offline", "--config", "/etc/anarchon/anarchon.yaml"]
WORKDIR /var/lib/anarchon

# Metrics on every interface of the container, so that the published port
# answers; the HEALTHCHECK below asks the loopback address inside it.
ENV ANARCHON_METRICS_LISTEN=0.0.0.0:9464
EXPOSE 9464
VOLUME ["/etc/anarchon", "/var/lib/anarchon"]

HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD curl -fsS -o /dev/null http://127.0.0.1:9464/healthz || exit 1

# SIGTERM (docker stop) drains running jobs for shutdownGraceMs (30 s by
# default): give docker stop more than that (--stop-timeout 50, or compose's
# stop_grace_period: 50s), or Docker SIGKILLs the daemon after 10 s.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/anarchond"]
CMD ["run", "--config", "/etc/anarchon/anarchon.yaml"]
