# peerlimit's rate limit server (cmd/peerlimit): a static binary on a
# distroless base, run as a non-root user.
#
#   docker build -t peerlimit .
#   docker run --rm -v "$PWD/config:/etc/peerlimit/config:ro" -p 8081:8081 -p 8080:8080 \
#     -e PEERLIMIT_CONFIG_DIR=/etc/peerlimit/config peerlimit
#
# The binary runs Go's collector at GOGC=400 and, given a memory limit
# (docker run --memory 512m), sets Go's soft memory limit to 90% of it;
# GOGC and GOMEMLIMIT in the environment (-e) override either.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/peerlimit ./cmd/peerlimit

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/peerlimit /peerlimit
USER 65532:65532
# 8081 rate limit service (gRPC), 8080 /metrics /healthz /json,
# 7946 gossip (TCP and UDP), 7947 peer sync (gRPC).
EXPOSE 8081 8080 7946 7946/udp 7947
ENTRYPOINT ["/peerlimit"]
