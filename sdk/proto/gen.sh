#!/bin/sh
# Regenerates the Go code of the infrakit provider protocol:
#   sh sdk/proto/gen.sh        (from anywhere in the module)
# protoc-gen-go and protoc-gen-go-grpc are go.mod tools, so go.mod pins their
# versions; protoc (>= 3.15) and its well-known types come from the system.
set -eu
cd "$(dirname "$0")/../.."
protoc \
	--plugin=protoc-gen-go="$(go tool -n protoc-gen-go)" \
	--plugin=protoc-gen-go-grpc="$(go tool -n protoc-gen-go-grpc)" \
	-I sdk/proto \
	--go_out=sdk/proto --go_opt=paths=source_relative \
	--go-grpc_out=sdk/proto --go-grpc_opt=paths=source_relative \
	sdk/proto/infrakit/provider/v1/provider.proto
