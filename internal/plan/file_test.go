package plan

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/instance"
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

// TestLoadRefusesInvalidDesired: apply PLANFILE stores the plan's desired
// stack as it stands, so a plan file whose stack breaks the rules (edited
// by hand: a negative size, one over max_group_size, a path as the stack
// name) is refused like a damaged state.
func TestLoadRefusesInvalidDesired(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(st *config.Stack)
		want string
	}{
		{"negative size", func(st *config.Stack) { *st.Groups[0].Size = -5 }, "the size must be at least 0; got -5"},
		{"size 1e9", func(st *config.Stack) { *st.Groups[0].Size = 1e9 }, "1000000000 instances is more than the stack allows"},
		{"stack name", func(st *config.Stack) { st.Name = "../x" }, "is not a valid stack name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := examplePlan(t)
			tc.edit(p.Desired)
			var b bytes.Buffer
			if err := p.Save(&b); err != nil {
				t.Fatal(err)
			}
			_, err := Load(&b)
			if err == nil || !errors.Is(err, config.ErrInvalidStored) || !strings.Contains(err.Error(), tc.want) ||
				!strings.Contains(err.Error(), "the plan file's desired stack is not valid") {
				t.Fatalf("Load = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

func TestCheckState(t *testing.T) {
	planAt := func(doc *state.Document) *Plan {
		p, err := Compute(stackOf(), doc, World{}, Scope{})
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

func TestCheck(t *testing.T) {
	prov := Step{ID: 1, Kind: StepProvision}
	for _, tc := range []struct {
		name  string
		steps []Step
		want  string
	}{
		{"a sound graph", []Step{prov, {ID: 2, Kind: StepAwait, Made: 1, After: []StepID{1}}, {ID: 3, Kind: StepDestroy, After: []StepID{2, 1}}}, ""},
		{"no steps", nil, ""},
		{"IDs out of order", []Step{{ID: 2}}, "step 1 has ID 2"},
		{"a step waiting for one not there", []Step{prov, {ID: 2, After: []StepID{3}}}, "waits for step 3, which is not in the plan"},
		{"a step waiting for itself", []Step{{ID: 1, After: []StepID{1}}}, "waits for step 1"},
		{"made by no provision", []Step{{ID: 1, Kind: StepDrain}, {ID: 2, Kind: StepRegister, Made: 1}}, "acts on the instance of step 1, which provisions nothing"},
		{"a cycle", []Step{prov, {ID: 2, After: []StepID{3}}, {ID: 3, After: []StepID{2}}}, "cycle (1 of 3 can run)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.steps)
			if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestLoadRefusesBrokenSteps(t *testing.T) {
	p := examplePlan(t)
	p.Steps[1].After = append(p.Steps[1].After, StepID(len(p.Steps)+5))
	var b bytes.Buffer
	if err := p.Save(&b); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(&b); err == nil || !strings.Contains(err.Error(), "the plan file's steps are broken") {
		t.Errorf("Load error = %v", err)
	}
}

func TestCheckWorld(t *testing.T) {
	p := examplePlan(t)
	now := map[string]string{}
	for g, fp := range p.Observed {
		now[g] = fp
	}
	if err := p.CheckWorld(now); err != nil {
		t.Fatalf("the world as planned: %v", err)
	}
	if _, ok := p.Observed["lost"]; ok {
		t.Error("a group that could not be observed is fingerprinted")
	}
	now["cattle"] = Fingerprint(running("c", 9, "x"))
	if err := p.CheckWorld(now); !errors.Is(err, ErrWorldMoved) || !strings.Contains(err.Error(), `group "cattle"`) {
		t.Errorf("CheckWorld = %v", err)
	}
	// Members in another order, or terminating ones, are the same members.
	ms := running("c", 3, "x")
	moved := append([]group.Member{ms[2], {ID: "c-9", State: instance.StateTerminating}}, ms[:2]...)
	if Fingerprint(ms) != Fingerprint(moved) {
		t.Error("the fingerprint depends on order or terminating members")
	}
}
