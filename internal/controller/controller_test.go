package controller

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestOperationValid(t *testing.T) {
	for _, tc := range []struct {
		op   Operation
		want bool
	}{{Enforce, true}, {Destroy, true}, {"", false}, {"apply", false}} {
		if got := tc.op.Valid(); got != tc.want {
			t.Errorf("Operation(%q).Valid() = %v, want %v", tc.op, got, tc.want)
		}
	}
}

// The values controllers return are data: they survive a JSON round trip.
func TestValuesRoundTripJSON(t *testing.T) {
	spec := Spec{
		Kind:       KindGroup,
		Metadata:   Metadata{Name: "miners", Tags: map[string]string{"project": "e2e"}},
		Properties: json.RawMessage(`{"name":"miners","size":5}`),
	}
	if spec.String() != "group.miners" {
		t.Errorf("spec.String() = %q, want group.miners", spec.String())
	}
	ch := Change{Kind: KindGroup, Name: "miners", Operation: Enforce, Steps: []Step{
		{Action: "create"},
		{Action: "destroy", Target: "i-3", Reason: "scale-down"},
	}}
	if ch.Empty() || (Change{}).Empty() == false {
		t.Error("Empty() is wrong")
	}
	if got := ch.Steps[1].String(); got != "destroy i-3 (scale-down)" {
		t.Errorf("step string = %q", got)
	}
	obj := Object{Spec: spec, State: json.RawMessage(`{"members":[]}`)}
	for _, v := range []any{spec, ch, obj} {
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
}
