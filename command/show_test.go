package command

import (
	"encoding/json"
	"testing"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/state"
)

func TestShowJSONControllers(t *testing.T) {
	five := 5
	doc := state.NewDocument()
	doc.Serial = 3
	doc.Stack = &config.Stack{
		Name:   "s",
		Groups: []*config.Group{{Name: "miners", Size: &five}},
		Ingresses: []*config.Ingress{{Name: "test.com", Rules: []config.Rule{
			{LoadBalancer: "lb1", Groups: []string{"miners"}},
			{LoadBalancer: "lb2", Groups: []string{"miners"}},
			{LoadBalancer: "lb1", Groups: []string{"cattle", "miners"}},
		}}},
		Enrollments: []*config.Enrollment{{Name: "nfs", Source: "cattle"}},
	}
	doc.Enrollments = map[string]*state.ControllerStatus{"nfs": {Freed: true}}
	got, err := json.Marshal(newShowJSON(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"stack":"s","serial":3,"lineage":"` + doc.Lineage + `",` +
		`"groups":[{"group":"miners","size":5,"instances":0,"freed":false,"update_stopped":false}],` +
		`"ingresses":[{"ingress":"test.com","freed":false,"loadbalancers":[` +
		`{"loadbalancer":"lb1","groups":["miners","cattle"]},{"loadbalancer":"lb2","groups":["miners"]}]}],` +
		`"enrollments":[{"enrollment":"nfs","source":"cattle","freed":true}]}`
	if string(got) != want {
		t.Errorf("show -json =\n%s\nwant\n%s", got, want)
	}

	empty, err := json.Marshal(newShowJSON(state.NewDocument()))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"stack":"","serial":0,"lineage":"","groups":[],"ingresses":[],"enrollments":[]}`; string(empty) != want {
		t.Errorf("show -json of no state = %s, want %s", empty, want)
	}
}
