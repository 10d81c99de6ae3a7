package controller

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/infrakit/infrakit/internal/execute"
	"github.com/infrakit/infrakit/internal/plan"
)

func TestOperationValid(t *testing.T) {
	for _, tc := range []struct {
		op   Operation
		want bool
	}{{Enforce, true}, {Destroy, true}, {"", false}, {"apply", false}, {"Enforce", false}} {
		if got := tc.op.Valid(); got != tc.want {
			t.Errorf("Operation(%q).Valid() = %v, want %v", tc.op, got, tc.want)
		}
	}
}

// A spec's String is the address users see in plans and errors.
func TestSpecString(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		want string
	}{
		{Spec{Kind: KindGroup, Metadata: Metadata{Name: "miners"}}, "group.miners"},
		{Spec{Kind: KindIngress, Metadata: Metadata{Name: "test.com"}}, "ingress.test.com"},
		{Spec{Kind: KindEnrollment, Metadata: Metadata{Name: "nfs"}}, "enrollment.nfs"},
	} {
		if got := tc.spec.String(); got != tc.want {
			t.Errorf("%+v: String() = %q, want %q", tc.spec, got, tc.want)
		}
		// The same address a plan gives the object.
		if got := plan.Address(tc.spec.Kind, tc.spec.Metadata.Name); got != tc.want {
			t.Errorf("plan.Address = %q, want %q", got, tc.want)
		}
	}
}

// Freed is the one refusal of a verb on a freed object: it says what
// resumes the object and what destroys it, and matches ErrFreed (and not
// ErrNotFound).
func TestFreed(t *testing.T) {
	for _, tc := range []struct {
		kind, name, want string
	}{
		{KindGroup, "miners", `group "miners" is free (not managed): run "infrakit apply" to manage it again, or "infrakit group destroy miners" to destroy it`},
		{KindIngress, "test.com", `ingress "test.com" is free (not managed): run "infrakit apply" to manage it again, or "infrakit ingress destroy test.com" to destroy it`},
		{KindEnrollment, "nfs", `enrollment "nfs" is free (not managed): run "infrakit apply" to manage it again, or "infrakit enrollment destroy nfs" to destroy it`},
	} {
		err := Freed(tc.kind, tc.name)
		if err.Error() != tc.want {
			t.Errorf("Freed(%s, %s) =\n  %s\nwant\n  %s", tc.kind, tc.name, err, tc.want)
		}
		if !errors.Is(err, ErrFreed) || errors.Is(err, ErrNotFound) {
			t.Errorf("Freed(%s, %s): errors.Is ErrFreed %v, ErrNotFound %v; want true, false",
				tc.kind, tc.name, errors.Is(err, ErrFreed), errors.Is(err, ErrNotFound))
		}
	}
}

// NotFound names the object and how to get it into the state; for a group
// also how to see the groups there are. It matches ErrNotFound (and not
// ErrFreed).
func TestNotFound(t *testing.T) {
	for _, tc := range []struct {
		kind, name, want string
	}{
		{KindGroup, "web", "group \"web\" is not in the state (apply the stack first, or see `infrakit group ls`)"},
		{KindIngress, "test.com", `ingress "test.com" is not in the state (apply the stack first)`},
		{KindEnrollment, "nfs", `enrollment "nfs" is not in the state (apply the stack first)`},
	} {
		err := NotFound(tc.kind, tc.name)
		if err.Error() != tc.want {
			t.Errorf("NotFound(%s, %s) =\n  %s\nwant\n  %s", tc.kind, tc.name, err, tc.want)
		}
		if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrFreed) {
			t.Errorf("NotFound(%s, %s): errors.Is ErrNotFound %v, ErrFreed %v; want true, false",
				tc.kind, tc.name, errors.Is(err, ErrNotFound), errors.Is(err, ErrFreed))
		}
	}
}

// Result.Err joins the failures (nil without any, and for no result).
func TestResultErr(t *testing.T) {
	var none *Result
	if err := none.Err(); err != nil {
		t.Fatalf("nil result: %v", err)
	}
	if err := (&Result{}).Err(); err != nil {
		t.Fatalf("no failures: %v", err)
	}
	r := &Result{Failed: []execute.Failure{
		{Step: plan.Step{Kind: plan.StepDestroy, Object: "group.web"}, Instance: "i-1", Err: errors.New("cloud says no")},
		{Step: plan.Step{Kind: plan.StepProvision, Object: "group.web"}, Instance: "i-2", Err: errors.New("out of capacity")},
	}}
	err := r.Err()
	if err == nil {
		t.Fatal("failures joined into no error")
	}
	for _, f := range r.Failed {
		if !strings.Contains(err.Error(), f.Error()) {
			t.Errorf("error %q does not hold the failure %q", err, f.Error())
		}
	}
	var f execute.Failure
	if !errors.As(err, &f) || f.Instance != "i-1" {
		t.Errorf("errors.As finds %+v, want the first failure", f)
	}
}

// The values controllers take and return are data: they survive a JSON
// round trip, in the field names of the API.
func TestValuesRoundTripJSON(t *testing.T) {
	spec := Spec{
		Kind:       KindGroup,
		Metadata:   Metadata{Name: "miners", Tags: map[string]string{"project": "e2e"}},
		Properties: json.RawMessage(`{"name":"miners","size":5}`),
	}
	obj := Object{Spec: spec, Freed: true, State: json.RawMessage(`{"members":[]}`)}
	for _, v := range []any{spec, obj, Metadata{Name: "x"}} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		back := reflect.New(reflect.TypeOf(v))
		if err := json.Unmarshal(b, back.Interface()); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back.Elem().Interface(), v) {
			t.Errorf("round trip of %T: got %+v, want %+v", v, back.Elem().Interface(), v)
		}
	}
	b, _ := json.Marshal(obj)
	want := `{"spec":{"kind":"group","metadata":{"name":"miners","tags":{"project":"e2e"}},"properties":{"name":"miners","size":5}},"freed":true,"state":{"members":[]}}`
	if string(b) != want {
		t.Errorf("object JSON\n got %s\nwant %s", b, want)
	}
	if b, _ := json.Marshal(Object{Spec: Spec{Kind: KindIngress, Metadata: Metadata{Name: "x"}}}); string(b) != `{"spec":{"kind":"ingress","metadata":{"name":"x"}}}` {
		t.Errorf("a bare object's JSON %s, want the empty fields left out", b)
	}
}
