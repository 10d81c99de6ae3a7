// Package api is the object API `infrakit watch` serves: the stack's
// objects and their verbs as versioned JSON (/v1/groups, /v1/plan, ...),
// the endpoint the remote CLI runs its commands through (/v1/cli), and
// what guards them all: the bearer token (Auth), TLS (TLSConfig) and the
// rule that only loopback may be served without TLS (CheckListen).
//
// Every verb runs the CLI's own command in the watch process through a
// Runner (command/ implements it), with the client's files in a directory
// of their own: the same plan, executor and state lock as the CLI, and
// the same output. The JSON shapes are the CLI's -json ones;
// website/api.md is the contract.
package api
