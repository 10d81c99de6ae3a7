package providertest

import (
	"encoding/json"
	"time"

	"github.com/infrakit/infrakit/sdk/flavor"
)

// Config says which provider binary to test and with what properties.
//
// Every instance type, flavor type, authorizer type and metrics source type
// the provider lists in its Metadata must have a case, and every case must name a served type: the
// suite fails otherwise, so a provider that grows a type cannot silently
// leave it untested.
type Config struct {
	// Binary is the path of the provider executable (see Build and Builder).
	Binary string
	// Name is how errors and logs call the provider; by default the binary's
	// base name without the "infrakit-provider-" prefix.
	Name string
	// Env is added to the environment the provider is launched with
	// ("INFRAKIT_SIMULATOR_DIR=/tmp/x").
	Env []string
	// Dir is the working directory of the provider; by default a fresh
	// t.TempDir(), so a provider that writes relative paths stays out of the
	// source tree. The suite changes the test's working directory to it while
	// it runs (see Run).
	Dir string

	// Instance has one case per served instance type.
	Instance map[string]InstanceCase
	// Flavor has one case per served flavor type.
	Flavor map[string]FlavorCase
	// LoadBalancer names the load balancer to exercise. Empty skips the load
	// balancer tests: a real load balancer may have to exist before it can be
	// named.
	LoadBalancer string
	// Authorizer has one case per served NFS authorizer type.
	Authorizer map[string]AuthorizerCase
	// Metrics has one case per served metrics source type (query
	// language, "promql").
	Metrics map[string]MetricsCase

	// ProviderConfig is the configuration of the provider's block (a JSON
	// object: `provider "x" { address = "..." }` is {"address": "..."}),
	// which the suite sends with Configure before its checks, as infrakit
	// does before its first call. Empty sends none, as infrakit does for a
	// block without attributes.
	ProviderConfig json.RawMessage
	// InvalidProviderConfig are configurations Configure must refuse, with
	// an error diagnostic at Path inside the object. The suite sends
	// ProviderConfig again after them.
	InvalidProviderConfig []Invalid

	// Timeout bounds each call to the provider; default 30s. The
	// concurrency check's 20 provisions at once get 5 times that together.
	Timeout time.Duration
	// EventTimeout bounds how long a Watch may take to report a change;
	// default 5s.
	EventTimeout time.Duration
}

// Invalid is a properties object the provider must reject, and where.
type Invalid struct {
	// Properties is the JSON object to validate.
	Properties json.RawMessage
	// Path is the attribute path one of the error diagnostics must carry
	// (["init", "1"]); nil means the whole object.
	Path []string
}

// InstanceCase is what the suite provisions for one instance type.
type InstanceCase struct {
	// Valid properties; they are provisioned, so keep them cheap.
	Valid json.RawMessage
	// Invalid properties Validate must reject; may be empty when the type
	// accepts any object.
	Invalid []Invalid
}

// FlavorCase is what the suite prepares for one flavor type.
type FlavorCase struct {
	Valid   json.RawMessage
	Invalid []Invalid
	// Allocation is passed to Validate and Prepare; the zero value is a group
	// of size 0, so set Size (or LogicalIDs) to what the flavor expects.
	Allocation flavor.Allocation
	// Instance, when set, is an instance type of the same provider (with its
	// own InstanceCase): the prepared spec is provisioned with it so Healthy
	// and Drain judge a real instance. Empty judges a made-up description.
	Instance string
}

// AuthorizerCase is what the suite authorizes for one NFS authorizer type.
type AuthorizerCase struct {
	Valid   json.RawMessage
	Invalid []Invalid
}

// MetricsCase is what the suite asks one metrics source type.
type MetricsCase struct {
	// Query is a query the source answers with one value, now and at a
	// second just past (a constant, or a metric the test keeps up).
	Query string
	// Empty, when set, is a query that matches no data: it must be answered
	// with Sample.Empty, neither a value nor an error.
	Empty string
	// Invalid, when set, is a query the source must refuse with an error
	// diagnostic (provider.Diagnostics): one that does not parse.
	Invalid string
}

const (
	defaultTimeout      = 30 * time.Second
	defaultEventTimeout = 5 * time.Second
)
