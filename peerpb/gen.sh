#!/bin/sh
# Regenerates peer.pb.go and peer_grpc.pb.go from peer.proto. Needs protoc
# (Debian: protobuf-compiler); installs the Go plugins at pinned versions in a
# temporary directory.
set -eu
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
GOBIN=$bin go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
GOBIN=$bin go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1
PATH=$bin:$PATH protoc --go_out=. --go_opt=paths=source_relative \
  --go-grpc_out=. --go-grpc_opt=paths=source_relative peer.proto
