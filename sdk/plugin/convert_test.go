package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/nfs"
	pb "github.com/infrakit/infrakit/sdk/proto/infrakit/provider/v1"
	"github.com/infrakit/infrakit/sdk/provider"
)

// Properties of the conversions alone: SPI value -> message -> bytes ->
// message -> SPI value is the identity, up to what the wire cannot tell
// apart (nil and empty maps, slices and properties).

func wire[M proto.Message](t *rapid.T, m M) M {
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := m.ProtoReflect().New().Interface().(M)
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func genTags(t *rapid.T, label string) map[string]string {
	m := rapid.MapOfN(rapid.String(), rapid.String(), 0, 4).Draw(t, label)
	if len(m) == 0 {
		return nil
	}
	return m
}

func genStrings(t *rapid.T, label string) []string {
	s := rapid.SliceOfN(rapid.String(), 0, 3).Draw(t, label)
	if len(s) == 0 {
		return nil
	}
	return s
}

func genProperties(t *rapid.T) json.RawMessage {
	v := rapid.MapOfN(rapid.StringMatching(`[a-z]{1,5}`), rapid.Int(), 0, 3).Draw(t, "properties")
	if len(v) == 0 {
		return nil
	}
	b, _ := json.Marshal(v)
	return b
}

func genLogicalID(t *rapid.T) *instance.LogicalID {
	if !rapid.Bool().Draw(t, "pet") {
		return nil
	}
	id := instance.LogicalID(rapid.String().Draw(t, "logical_id")) // "" is a pet too
	return &id
}

func genSpec(t *rapid.T) instance.Spec {
	s := instance.Spec{
		Properties: genProperties(t),
		Tags:       genTags(t, "tags"),
		Init:       rapid.String().Draw(t, "init"),
		LogicalID:  genLogicalID(t),
	}
	for range rapid.IntRange(0, 2).Draw(t, "attachments") {
		s.Attachments = append(s.Attachments, instance.Attachment{ID: rapid.String().Draw(t, "id"), Type: rapid.String().Draw(t, "type")})
	}
	return s
}

func genDescription(t *rapid.T) instance.Description {
	return instance.Description{
		ID:         instance.ID(rapid.String().Draw(t, "id")),
		LogicalID:  genLogicalID(t),
		Tags:       genTags(t, "tags"),
		Properties: genProperties(t),
		Address:    rapid.String().Draw(t, "address"),
		State:      rapid.SampledFrom([]instance.State{"", instance.StatePending, instance.StateRunning, instance.StateTerminating}).Draw(t, "state"),
	}
}

func TestSpecRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genSpec(t)
		if got := specFromProto(wire(t, specToProto(s))); !reflect.DeepEqual(got, s) {
			t.Fatalf("got %#v\nwant %#v", got, s)
		}
	})
}

func TestDescriptionRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := genDescription(t)
		pd, err := descriptionToProto(d)
		if err != nil {
			t.Fatal(err)
		}
		got, err := descriptionFromProto(wire(t, pd))
		if err != nil || !reflect.DeepEqual(got, d) {
			t.Fatalf("got %#v, %v\nwant %#v", got, err, d)
		}
	})
}

func TestEventRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := instance.Event{Type: instance.EventGone, ID: instance.ID(rapid.String().Draw(t, "id"))}
		if rapid.Bool().Draw(t, "changed") {
			d := genDescription(t)
			e = instance.Event{Type: instance.EventChanged, ID: d.ID, Instance: &d}
		}
		pe, err := eventToProto(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := eventFromProto(wire(t, pe))
		if err != nil || !reflect.DeepEqual(got, e) {
			t.Fatalf("got %#v, %v\nwant %#v", got, err, e)
		}
	})
}

func TestAuthorizationRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := nfs.Authorization{
			ID:         rapid.String().Draw(t, "id"),
			SourceID:   instance.ID(rapid.String().Draw(t, "source_id")),
			Host:       rapid.String().Draw(t, "host"),
			Volume:     rapid.String().Draw(t, "volume"),
			Options:    genStrings(t, "options"),
			Properties: genProperties(t),
			Tags:       genTags(t, "tags"),
		}
		if got := authorizationFromProto(wire(t, authorizationToProto(a))); !reflect.DeepEqual(got, a) {
			t.Fatalf("got %#v\nwant %#v", got, a)
		}
	})
}

func TestLoadBalancerTypesRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := loadbalancer.Route{
			Port:                 rapid.IntRange(0, 65535).Draw(t, "port"),
			Protocol:             loadbalancer.Protocol(rapid.String().Draw(t, "protocol")),
			LoadBalancerPort:     rapid.IntRange(0, 65535).Draw(t, "lb_port"),
			LoadBalancerProtocol: loadbalancer.Protocol(rapid.String().Draw(t, "lb_protocol")),
			Certificate:          rapid.String().Draw(t, "certificate"),
		}
		if got := routeFromProto(wire(t, routeToProto(r))); got != r {
			t.Fatalf("got %#v\nwant %#v", got, r)
		}
		var bs []loadbalancer.Backend
		for range rapid.IntRange(0, 3).Draw(t, "backends") {
			bs = append(bs, loadbalancer.Backend{ID: instance.ID(rapid.String().Draw(t, "id")), Address: rapid.String().Draw(t, "address")})
		}
		got := backendsFromProto(wire(t, &pb.LoadBalancerBackendsResponse{Backends: backendsToProto(bs)}).GetBackends())
		if len(got) != len(bs) || (len(bs) > 0 && !reflect.DeepEqual(got, bs)) {
			t.Fatalf("got %#v\nwant %#v", got, bs)
		}
	})
}

func TestAllocationRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := flavor.Allocation{Size: rapid.IntRange(-1, 1<<20).Draw(t, "size")}
		for _, id := range genStrings(t, "logical_ids") {
			a.LogicalIDs = append(a.LogicalIDs, instance.LogicalID(id))
		}
		if got := allocationFromProto(wire(t, allocationToProto(a))); !reflect.DeepEqual(got, a) {
			t.Fatalf("got %#v\nwant %#v", got, a)
		}
	})
}

func TestDiagnosticsRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var ds provider.Diagnostics
		for range rapid.IntRange(1, 4).Draw(t, "n") {
			ds = append(ds, provider.Diagnostic{
				Severity: rapid.SampledFrom([]provider.Severity{provider.Error, provider.Warning}).Draw(t, "severity"),
				Summary:  rapid.String().Draw(t, "summary"),
				Detail:   rapid.String().Draw(t, "detail"),
				Path:     genStrings(t, "path"),
			})
		}
		got := diagnosticsFromProto(wire(t, &pb.InstanceValidateResponse{Diagnostics: diagnosticsToProto(ds)}).GetDiagnostics())
		if !reflect.DeepEqual(got, ds) {
			t.Fatalf("got %#v\nwant %#v", got, ds)
		}
	})
}

// A diagnostic without a severity was returned as an error, so it is one.
func TestDiagnosticWithoutSeverityIsAnError(t *testing.T) {
	got := diagnosticsFromProto(diagnosticsToProto(provider.Diagnostics{{Summary: "oops"}}))
	if !got.HasErrors() {
		t.Fatalf("got %#v", got)
	}
}

func TestEnumsRefuseUnknownValues(t *testing.T) {
	if _, err := descriptionToProto(instance.Description{ID: "i-1", State: "booting"}); err == nil {
		t.Error("state booting accepted")
	}
	if _, err := healthToProto("bogus"); err == nil {
		t.Error("health bogus accepted")
	}
	if _, err := eventToProto(instance.Event{Type: "moved"}); err == nil {
		t.Error("event type moved accepted")
	}
	if _, err := metadataToProto(provider.Metadata{Objects: []provider.Object{{Kind: "volume"}}}); err == nil {
		t.Error("kind volume accepted")
	}
	if _, err := descriptionFromProto(&pb.InstanceDescription{State: 99}); err == nil {
		t.Error("state 99 accepted")
	}
	if _, err := healthFromProto(99); err == nil {
		t.Error("health 99 accepted")
	}
}

// Errors keep their meaning across the wire: a provider's error as status,
// back as the host's error.
func TestErrorsCrossTheWire(t *testing.T) {
	live := context.Background()
	for _, tc := range []struct {
		provider error
		is       error
		msg      string
	}{
		{errors.New("disk full"), nil, "disk full"},
		{fmt.Errorf("resize: %w", errors.ErrUnsupported), errors.ErrUnsupported, "unsupported operation: resize: unsupported operation"},
		{fmt.Errorf("cloud API: %w", context.DeadlineExceeded), context.DeadlineExceeded, "context deadline exceeded: cloud API: context deadline exceeded"},
		// A cancellation the host did not ask for: the connection went away.
		{context.Canceled, ErrUnavailable, "provider unavailable: context canceled"},
	} {
		diags, err := diagnosticsOrStatus(tc.provider)
		if diags != nil {
			t.Fatalf("%v: became diagnostics", tc.provider)
		}
		got := errorFromStatus(live, err)
		if got.Error() != tc.msg || (tc.is != nil && !errors.Is(got, tc.is)) {
			t.Errorf("%v: got %q, want %q (is %v)", tc.provider, got, tc.msg, tc.is)
		}
	}
	// Diagnostics, even wrapped, travel as diagnostics.
	diags, err := diagnosticsOrStatus(fmt.Errorf("validate: %w", provider.AttributeError("s", "d", "a")))
	if err != nil || len(diags) != 1 || diags[0].GetAttributePath()[0] != "a" {
		t.Fatalf("got %v, %v", diags, err)
	}
}

func TestTailKeepsTheEnd(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tl := &tail{max: rapid.IntRange(1, 64).Draw(t, "max")}
		var all strings.Builder
		for _, w := range rapid.SliceOf(rapid.StringMatching(`[a-z\n]{0,20}`)).Draw(t, "writes") {
			_, _ = tl.Write([]byte(w))
			all.WriteString(w)
		}
		got := tl.String()
		if len(got) > tl.max || !strings.HasSuffix(all.String(), got) {
			t.Fatalf("tail %q of %q (max %d)", got, all.String(), tl.max)
		}
	})
}

func TestCompleteMetadata(t *testing.T) {
	declared := provider.Object{Kind: provider.KindLoadBalancer, Type: "lb1", Schema: provider.Schema{Attributes: map[string]provider.Attribute{"x": {Type: "string"}}}}
	cfg := &ServeConfig{
		Metadata:     provider.Metadata{Name: "p", Objects: []provider.Object{declared}},
		Instances:    map[string]instance.Plugin{"b": nil, "a": nil},
		LoadBalancer: func(string) (loadbalancer.L4, error) { return nil, nil },
	}
	got := completeMetadata(cfg)
	want := []provider.Object{
		declared, // a declared load balancer stops "*" being added
		{Kind: provider.KindInstance, Type: "a", Schema: provider.Schema{Open: true}},
		{Kind: provider.KindInstance, Type: "b", Schema: provider.Schema{Open: true}},
	}
	if !reflect.DeepEqual(got.Objects, want) || len(cfg.Metadata.Objects) != 1 {
		t.Fatalf("got %#v", got.Objects)
	}
}

// What a flavor says of its health crosses the wire.
func TestMetadataHealthFromState(t *testing.T) {
	m := provider.Metadata{Name: "p", Objects: []provider.Object{
		{Kind: provider.KindFlavor, Type: "plain", Schema: provider.Schema{Open: true}, HealthFromState: true},
		{Kind: provider.KindFlavor, Type: "checked", Schema: provider.Schema{Open: true}},
	}}
	pm, err := metadataToProto(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := metadataFromProto(pm)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("metadata through the wire = %#v, %v; want %#v", got, err, m)
	}
}
