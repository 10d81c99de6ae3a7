package enrollment

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/infrakit/infrakit/sdk/nfs"
)

// Changes read as JSON in the CLI's shapes (snake_case, as `enrollment
// describe -json`), and read back as they were written (plan files).
func TestChangesJSON(t *testing.T) {
	ch := Changes{
		Enrollment:  "nfs",
		Authorize:   []nfs.Authorization{authz("", "c1", `{"host":"c1","iops":10}`)},
		Reauthorize: []Replacement{{Old: authz("a2", "c2", `{"host":"c2","iops":5}`), New: authz("", "c2", `{"host":"c2","iops":10}`)}},
		Revoke:      []Revocation{{Authorization: authz("a3", "c3", `{"host":"c3","iops":10}`), Reason: ReasonMemberGone}},
		Deferred:    []nfs.Authorization{petAuthz("a4", "x4", "p4")},
		Failed:      []RenderFailure{{Member: "c5", Err: errors.New("boom"), Error: "boom"}},
		Settings:    []Setting{{Attribute: "destroy_on_free", Old: "false", New: "true"}},
	}
	ch.Authorize[0].Options = []string{"rw"}
	b, err := json.Marshal(ch)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, bad := range []string{"SourceID", "Properties", "Authorization\"", "Host", "Tags"} {
		if strings.Contains(s, bad) {
			t.Errorf("JSON has Go field name %s: %s", bad, s)
		}
	}
	for _, good := range []string{`"source_id":"c1"`, `"properties":{"host":"c1","iops":10}`, `"options":["rw"]`,
		`"revoke":[{"authorization":{"id":"a3","source_id":"c3"`, `"reason":"member-gone"`, `"deferred":[{"id":"a4"`,
		`"infrakit.logical_id":"p4"`, `"failed":[{"member":"c5","error":"boom"}]`, `"settings":[{"attribute":"destroy_on_free","old":"false","new":"true"}]`} {
		if !strings.Contains(s, good) {
			t.Errorf("JSON lacks %s: %s", good, s)
		}
	}
	if strings.Contains(s, `"id":""`) {
		t.Errorf("an authorization not made yet has an id: %s", s)
	}
	var back Changes
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Failed[0].Err == nil || back.Failed[0].Err.Error() != "boom" {
		t.Fatalf("failure read back as %+v", back.Failed)
	}
	back.Failed[0].Err = ch.Failed[0].Err
	if !reflect.DeepEqual(back, ch) {
		t.Fatalf("read back:\n got %+v\nwant %+v", back, ch)
	}
	var empty Changes
	if b, _ := json.Marshal(Changes{Enrollment: "nfs"}); string(b) != `{"enrollment":"nfs"}` || json.Unmarshal(b, &empty) != nil || empty.Enrollment != "nfs" {
		t.Fatalf("empty changes: %s", b)
	}
}
