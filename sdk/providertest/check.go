package providertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/metrics"
	"github.com/infrakit/infrakit/sdk/provider"
)

// The checks below are pure: they judge values the provider returned and say
// what is wrong in words a provider author can act on. The subtests do the I/O.

// checkDiagnostics reports what is wrong with err as the answer to validating
// invalid properties: it must be, or wrap, provider.Diagnostics holding an
// error about want.
func checkDiagnostics(err error, want []string) error {
	if err == nil {
		return errors.New("accepted invalid properties")
	}
	var ds provider.Diagnostics
	if !errors.As(err, &ds) {
		return fmt.Errorf("error is not provider.Diagnostics, so the core cannot point at the attribute: %v", err)
	}
	var paths []string
	for _, d := range ds {
		if d.Severity == provider.Error && slices.Equal(d.Path, want) {
			return nil
		}
		paths = append(paths, fmt.Sprintf("%q", d.Path))
	}
	return fmt.Errorf("no error diagnostic with path %q; got paths %s: %v", want, strings.Join(paths, ", "), err)
}

// checkRefused reports what is wrong with err as the answer to something
// the provider must refuse as the user's mistake (a query that does not
// parse): it must be, or wrap, provider.Diagnostics holding an error.
func checkRefused(err error) error {
	if err == nil {
		return errors.New("accepted")
	}
	var ds provider.Diagnostics
	if !errors.As(err, &ds) || !ds.HasErrors() {
		return fmt.Errorf("error is not provider.Diagnostics, so the core cannot tell a wrong query from a failing source: %v", err)
	}
	return nil
}

// checkSample judges the answer to a query that has one value, asked for
// time at (zero: now).
func checkSample(s metrics.Sample, err error, at time.Time) error {
	if err != nil {
		return fmt.Errorf("no value: %w", err)
	}
	if s.Empty {
		return errors.New("answered no data (Sample.Empty); the case's Query must be one the source answers with a value")
	}
	if s.At.IsZero() {
		return fmt.Errorf("the sample (value %v) says no time: Sample.At must be the evaluation time or the sample's own", s.Value)
	}
	// A second of slack for a source that keeps its own time resolution.
	if !at.IsZero() && s.At.After(at.Add(time.Second)) {
		return fmt.Errorf("the sample asked for %s is for %s, after it: the source did not evaluate at the time asked",
			at.Format(time.RFC3339Nano), s.At.Format(time.RFC3339Nano))
	}
	return nil
}

// checkEmptySample judges the answer to a query that matches no data: no
// data, which autoscale must not read as 0, is neither a value nor an error.
func checkEmptySample(s metrics.Sample, err error) error {
	if err != nil {
		return fmt.Errorf("a query matching no data must be answered with Sample.Empty, not an error: %w", err)
	}
	if !s.Empty {
		return fmt.Errorf("answered the value %v instead of no data (Sample.Empty): autoscale would take a missing metric for a value", s.Value)
	}
	return nil
}

// containsTags reports the first tag of want that got is missing or has
// another value for; ok is true when got carries every tag of want.
func containsTags(got, want map[string]string) (missing string, ok bool) {
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.Sort(keys) // deterministic message
	for _, k := range keys {
		if v, found := got[k]; !found || v != want[k] {
			return fmt.Sprintf("%s=%q (got %q)", k, want[k], v), false
		}
	}
	return "", true
}

// findInstance returns the descriptions with the given ID.
func findInstance(ds []instance.Description, id instance.ID) []instance.Description {
	var out []instance.Description
	for _, d := range ds {
		if d.ID == id {
			out = append(out, d)
		}
	}
	return out
}

// checkDescribed judges the one description a describe by the instance's own
// tags must return right after Provision.
func checkDescribed(ds []instance.Description, id instance.ID, spec instance.Spec) error {
	found := findInstance(ds, id)
	if len(found) != 1 {
		return fmt.Errorf("describe by its tags lists instance %q %d times (%d descriptions), want once", id, len(found), len(ds))
	}
	if len(ds) != 1 {
		return fmt.Errorf("describe by unique tags lists %d instances, want only %q: %v", len(ds), id, ids(ds))
	}
	d := found[0]
	if d.State != instance.StatePending && d.State != instance.StateRunning {
		return fmt.Errorf("instance %q state is %q, want %q or %q", id, d.State, instance.StatePending, instance.StateRunning)
	}
	if miss, ok := containsTags(d.Tags, spec.Tags); !ok {
		return fmt.Errorf("instance %q lacks tag %s", id, miss)
	}
	if spec.LogicalID != nil {
		if d.LogicalID == nil {
			return fmt.Errorf("instance %q provisioned with logical ID %q describes without one", id, *spec.LogicalID)
		}
		if *d.LogicalID != *spec.LogicalID {
			return fmt.Errorf("instance %q logical ID is %q, want %q", id, *d.LogicalID, *spec.LogicalID)
		}
	}
	return nil
}

// checkGone judges a describe after Destroy: the instance is absent or terminating.
func checkGone(ds []instance.Description, id instance.ID) error {
	for _, d := range findInstance(ds, id) {
		if d.State != instance.StateTerminating {
			return fmt.Errorf("destroyed instance %q is still listed, state %q", id, d.State)
		}
	}
	return nil
}

func ids(ds []instance.Description) []instance.ID {
	out := make([]instance.ID, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

// jsonEqual reports whether a and b encode the same JSON value, whatever
// their spacing and key order.
func jsonEqual(a, b []byte) (bool, error) {
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		return false, fmt.Errorf("decode %s: %w", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		return false, fmt.Errorf("decode %s: %w", b, err)
	}
	return reflect.DeepEqual(va, vb), nil
}

// jsonObject reports what is wrong with raw as a properties object.
func jsonObject(raw []byte) error {
	if len(raw) == 0 {
		return errors.New("no properties")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("properties %s are not a JSON object: %w", raw, err)
	}
	return nil
}

// providerName is what a provider Name must look like: it is a label in HCL
// (provider "simulator" {}), a directory name and part of a binary name, and
// "." separates it from an alias in provider keys.
var providerName = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// checkMetadata judges what a provider says about itself.
func checkMetadata(md provider.Metadata) []error {
	var errs []error
	if !providerName.MatchString(md.Name) {
		errs = append(errs, fmt.Errorf("name %q does not match %s", md.Name, providerName))
	}
	if md.Version == "" || strings.ContainsAny(md.Version, "/\\ \t\n") {
		errs = append(errs, fmt.Errorf("version %q must be non-empty and usable as a directory name", md.Version))
	}
	if len(md.Objects) == 0 {
		errs = append(errs, errors.New("no objects served"))
	}
	seen := map[string]bool{}
	for _, o := range md.Objects {
		key := string(o.Kind) + "/" + o.Type
		switch o.Kind {
		case provider.KindInstance, provider.KindFlavor, provider.KindLoadBalancer, provider.KindAuthorizer, provider.KindMetrics:
		default:
			errs = append(errs, fmt.Errorf("object %q: unknown kind %q", key, o.Kind))
		}
		if o.Type == "" {
			errs = append(errs, fmt.Errorf("object of kind %q has no type", o.Kind))
		}
		if o.Type == provider.AnyName && o.Kind != provider.KindLoadBalancer {
			errs = append(errs, fmt.Errorf("object %q: only load balancers may be served by any name", key))
		}
		if seen[key] {
			errs = append(errs, fmt.Errorf("object %q listed twice", key))
		}
		seen[key] = true
		for name, a := range o.Schema.Attributes {
			if _, err := attributeType(a.Type); err != nil {
				errs = append(errs, fmt.Errorf("object %q attribute %q: %w", key, name, err))
			}
		}
	}
	return errs
}

// attributeType parses a schema attribute type written as an HCL type
// constraint ("list(string)").
func attributeType(s string) (cty.Type, error) {
	expr, diags := hclsyntax.ParseExpression([]byte(s), "type", hcl.InitialPos)
	if diags.HasErrors() {
		return cty.NilType, fmt.Errorf("type %q: %s", s, diags.Error())
	}
	ty, diags := typeexpr.TypeConstraint(expr)
	if diags.HasErrors() {
		return cty.NilType, fmt.Errorf("type %q is not an HCL type constraint: %s", s, diags.Error())
	}
	return ty, nil
}

// checkSchema reports where valid properties disagree with the schema the
// provider publishes: `infrakit validate` checks stacks against that schema,
// so it must accept what the provider itself accepts.
func checkSchema(s provider.Schema, raw json.RawMessage) []error {
	var props map[string]json.RawMessage
	if err := json.Unmarshal(raw, &props); err != nil {
		return []error{fmt.Errorf("valid properties %s are not a JSON object: %w", raw, err)}
	}
	var errs []error
	names := make([]string, 0, len(s.Attributes))
	for name := range s.Attributes {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		a := s.Attributes[name]
		v, ok := props[name]
		if !ok || string(v) == "null" {
			if a.Required {
				errs = append(errs, fmt.Errorf("required attribute %q is missing from the valid properties", name))
			}
			continue
		}
		ty, err := attributeType(a.Type)
		if err != nil {
			errs = append(errs, fmt.Errorf("attribute %q: %w", name, err))
			continue
		}
		if ty.HasDynamicTypes() {
			continue // "any": JSON alone does not say which cty type was meant
		}
		if _, err := ctyjson.Unmarshal(v, ty); err != nil {
			errs = append(errs, fmt.Errorf("attribute %q = %s does not conform to its schema type %s: %v", name, v, a.Type, err))
		}
	}
	if !s.Open {
		for name := range props {
			if _, ok := s.Attributes[name]; !ok {
				errs = append(errs, fmt.Errorf("attribute %q of the valid properties is not in the (closed) schema", name))
			}
		}
	}
	return errs
}

// checkMadeAsListed checks that an instance described as it was made (a
// State says it was) is what a listing with properties right after shows,
// but for a state that moved on: a host takes one described running as
// ready without listing it.
func checkMadeAsListed(made, listed instance.Description) error {
	if made.State == "" {
		return nil
	}
	switch {
	case made.ID != listed.ID:
		return fmt.Errorf("ProvisionDescribed: described instance %q, listed %q", made.ID, listed.ID)
	case made.State == instance.StateRunning && listed.State != instance.StateRunning:
		return fmt.Errorf("ProvisionDescribed: instance %q described running, then listed %s", made.ID, listed.State)
	case made.Address != listed.Address:
		return fmt.Errorf("ProvisionDescribed: instance %q described at address %q, listed at %q", made.ID, made.Address, listed.Address)
	case !reflect.DeepEqual(made.LogicalID, listed.LogicalID):
		return fmt.Errorf("ProvisionDescribed: instance %q described with logical ID %v, listed with %v", made.ID, made.LogicalID, listed.LogicalID)
	case !maps.Equal(made.Tags, listed.Tags):
		return fmt.Errorf("ProvisionDescribed: instance %q described with tags %v, listed with %v", made.ID, made.Tags, listed.Tags)
	}
	if eq, err := jsonEqual(made.Properties, listed.Properties); err != nil || !eq {
		return fmt.Errorf("ProvisionDescribed: instance %q described with properties %s, listed with %s (%v)", made.ID, made.Properties, listed.Properties, err)
	}
	return nil
}
