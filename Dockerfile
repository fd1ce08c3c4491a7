# syntax=docker/dockerfile:1
# The pipes image: a static binary on distroless, run as a non-root user,
# pipes itself PID 1 (it handles SIGTERM: polling stops, in-flight batches
# get --shutdown-timeout). Build it from the repository's root:
#
#   docker build -t pipes:latest .
#   docker run --rm -v "$PWD/examples/quickstart:/etc/pipes:ro" pipes:latest run --drain -f /etc/pipes
#
# Pipeline files go in /etc/pipes (mount them there); /metrics, /healthz and
# /readyz listen on :9464.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
# The same command CI builds the binary with (see the README, "Install"):
# static (no cgo), reproducible paths, the version stamped when given.
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/pipes ./cmd/pipes

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/pipes /pipes
USER nonroot:nonroot
EXPOSE 9464
ENTRYPOINT ["/pipes"]
CMD ["run", "-f", "/etc/pipes", "--metrics-addr", "0.0.0.0:9464"]
