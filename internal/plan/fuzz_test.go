package plan

import (
	"bytes"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to the plan-file reader (`apply
// PLANFILE`). Whatever the input: nothing panics; a file is refused or
// loaded; and a plan that loads saves to a file that loads again to the
// same bytes, so the plan applied is the plan read.
func FuzzLoad(f *testing.F) {
	for _, p := range []*Plan{examplePlan(f), {FormatVersion: FormatVersion, Desired: stackOf()}} {
		var b bytes.Buffer
		if err := p.Save(&b); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	f.Add([]byte(`{"format_version": 1, "desired": {"name": "s", "groups": [{"name": "g", "size": -5}]}}`))
	f.Add([]byte(`{"format_version": 1, "desired": {"name": "s"}, "steps": [{"id": 1, "after": [1]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Load(bytes.NewReader(data))
		if err != nil {
			return
		}
		var saved bytes.Buffer
		if err := p.Save(&saved); err != nil {
			t.Fatalf("a loaded plan does not save: %v", err)
		}
		again, err := Load(bytes.NewReader(saved.Bytes()))
		if err != nil {
			t.Fatalf("a saved plan does not load: %v\n%s", err, saved.Bytes())
		}
		var resaved bytes.Buffer
		if err := again.Save(&resaved); err != nil || !bytes.Equal(resaved.Bytes(), saved.Bytes()) {
			t.Fatalf("load and save do not settle (%v):\n%s\n%s", err, saved.Bytes(), resaved.Bytes())
		}
	})
}
