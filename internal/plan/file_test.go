package plan

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/state"
)

func TestSaveLoadRoundTrip(t *testing.T) {
	p := examplePlan(t)
	p.Desired.Groups[0].Update.HealthTimeout = config.Duration(90e9)
	p.Desired.Groups[0].Tags = map[string]string{"project": "e2e"}
	var b bytes.Buffer
	if err := p.Save(&b); err != nil {
		t.Fatal(err)
	}
	back, err := Load(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, p) {
		t.Errorf("round trip changed the plan:\n  %+v\n  %+v", back, p)
	}
	// The file is JSON with stable field names.
	for _, want := range []string{fmt.Sprintf(`"format_version":%d`, FormatVersion), `"state_lineage":"`, `"state_serial":7`, `"desired":{`, `"action":"roll"`, `"reason":"scale-down"`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("plan file lacks %s", want)
		}
	}
}

func TestLoadRefuses(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"garbage", "not json", "not a plan file"},
		{"state file", `{"version":1,"serial":3,"lineage":"x"}`, "no format_version"},
		{"newer format", fmt.Sprintf(`{"format_version":%d,"desired":{}}`, FormatVersion+1), "newer than this infrakit reads"},
		{"older format", fmt.Sprintf(`{"format_version":%d,"desired":{}}`, FormatVersion-1), "older than this infrakit reads"},
		{"no stack", fmt.Sprintf(`{"format_version":%d}`, FormatVersion), "no desired stack"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(strings.NewReader(tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestCheckState(t *testing.T) {
	planAt := func(doc *state.Document) *Plan {
		p, err := Compute(stackOf(), doc, World{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	at7 := stored(7)
	moved := stored(8)
	moved.Lineage = at7.Lineage
	other := stored(7) // same serial, another lineage

	for _, tc := range []struct {
		name    string
		plan    *Plan
		doc     *state.Document
		wantErr error
		mention string
	}{
		{"same state", planAt(at7), at7, nil, ""},
		{"serial moved", planAt(at7), moved, ErrStalePlan, "serial 7, now 8"},
		{"another lineage", planAt(at7), other, ErrOtherState, other.Lineage},
		{"state gone", planAt(at7), state.NewDocument(), ErrOtherState, "no state is stored now"},
		{"state gone (nil)", planAt(at7), nil, ErrOtherState, "no state is stored now"},
		{"no state then, none now (fresh lineages differ)", planAt(state.NewDocument()), state.NewDocument(), nil, ""},
		{"no state then (nil), none now", planAt(nil), nil, nil, ""},
		{"no state then, stored since", planAt(state.NewDocument()), at7, ErrStalePlan, "before any state existed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.plan.CheckState(tc.doc)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("CheckState = %v, want %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("CheckState error %q does not mention %q", err, tc.mention)
			}
		})
	}
}
