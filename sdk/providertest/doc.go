// Package providertest is a conformance suite for infrakit providers. A
// provider author runs it from a test beside the provider's main package; it
// builds the binary, launches it the way infrakit does (plugin.Start: the
// go-plugin handshake and gRPC, no in-process shortcut) and checks every
// kind the provider's Metadata says it serves against the SPI contracts:
//
//   - Metadata: a usable name and version, known kinds, parseable schema
//     types, a schema that accepts the valid properties; and a case in the
//     Config for every served type (so the suite keeps up with the provider).
//   - Instance: Validate (a rejection carries provider.Diagnostics with the
//     attribute path), Provision, DescribeInstances by tags (subset matches,
//     other tags do not; properties only when asked), Label merges, Destroy
//     (again, and of an unknown ID, is not an error), Watch when served, and
//     20 concurrent Provision calls.
//   - Flavor: Validate, Prepare keeps the input's tags, init and properties,
//     Healthy answers healthy, unhealthy or unknown, the batch health path
//     (flavor.BatchHealthChecker over HealthyBatch, as `infrakit watch`
//     asks it: one answer per instance, in order, for batches larger than
//     one call carries), Drain.
//   - LoadBalancer: Publish/Routes/Unpublish, ConfigureHealthCheck,
//     RegisterBackends/Backends/DeregisterBackends.
//   - Authorizer: Validate, Authorize/Describe/Revoke (revoking a gone one is
//     not an error).
//   - Metrics: a query answered with one value, now and at a time asked
//     (the sample says which time it is for), a query matching no data
//     answered as no data (neither 0 nor an error), a query that does not
//     parse refused with diagnostics, and 10 concurrent queries.
//   - Configure: Config.ProviderConfig, the provider block's attributes, is
//     sent before any other call, as infrakit sends it; then it is taken
//     again, and each Config.InvalidProviderConfig refused with a
//     diagnostic at its path.
//
// Everything the suite creates carries the tags providertest.run and
// providertest.case and is destroyed when its test ends.
//
// A provider's conformance test (plugins/myprovider/conformance_test.go):
//
//	package main
//
//	import (
//		"encoding/json"
//		"os"
//		"testing"
//
//		"github.com/infrakit/infrakit/sdk/flavor"
//		"github.com/infrakit/infrakit/sdk/providertest"
//	)
//
//	var builder *providertest.Builder
//
//	func TestMain(m *testing.M) {
//		builder = providertest.NewBuilder()
//		code := m.Run()
//		builder.Close()
//		os.Exit(code)
//	}
//
//	func TestConformance(t *testing.T) {
//		providertest.Run(t, providertest.Config{
//			Binary: builder.Build(t, "."),
//			Env:    []string{"MYPROVIDER_ENDPOINT=http://localhost:9999"},
//			Instance: map[string]providertest.InstanceCase{
//				"vm": {
//					Valid: json.RawMessage(`{"size": "small"}`),
//					Invalid: []providertest.Invalid{
//						{Properties: json.RawMessage(`{"size": 3}`), Path: []string{"size"}},
//					},
//				},
//			},
//			Flavor: map[string]providertest.FlavorCase{
//				"myflavor": {
//					Valid:      json.RawMessage(`{"init": ["echo hi"]}`),
//					Allocation: flavor.Allocation{Size: 1},
//					Instance:   "vm", // Healthy and Drain judge a real vm
//				},
//			},
//			LoadBalancer: "test-lb",
//		})
//	}
//
// Run it with `go test -run Conformance -v ./plugins/myprovider`; set
// INFRAKIT_LOG=debug to see the provider's log in the test output.
package providertest
