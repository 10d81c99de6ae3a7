package state

import (
	"bytes"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to the state decoder, as a damaged or
// hand-edited state file (or etcd value) would. Whatever the input: nothing
// panics; a document is refused (an *InvalidError) or decoded; and one that
// decodes encodes to a document that decodes again to the same encoding,
// so what a read accepts a write keeps.
func FuzzDecode(f *testing.F) {
	sample, err := Encode(sampleDoc())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sample)
	for _, s := range []string{
		`{"version": 1, "serial": 3, "lineage": "L"}`,
		`{"version": 1, "serial": 3, "lineage": "L", "stack": {"name": "s", "groups": [{"name": "g", "size": -5}]}}`,
		`{"version": 1, "serial": 3, "lineage": "L", "stack": {"name": "s", "limits": {"max_group_size": 2}, "groups": [{"name": "g", "logical_ids": ["a", "b", "c"]}]}}`,
		`{"version": 1, "serial": 1, "lineage": "L", "enrollments": {"e": {"pending": [{"name": "s", "enrollments": [{"name": "e", "target": {"properties": "{ host = member.id }"}}]}]}}}`,
		`{"version": 2, "serial": "x"}`,
		"\x00\x00",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := Decode("s.json", data)
		if err != nil {
			if _, ok := err.(*InvalidError); !ok || doc != nil {
				t.Fatalf("Decode refused with %T %v (doc %v), want an *InvalidError and no document", err, err, doc)
			}
			return
		}
		enc, err := Encode(doc)
		if err != nil {
			t.Fatalf("a decoded document does not encode: %v", err)
		}
		again, err := Decode("s.json", enc)
		if err != nil {
			t.Fatalf("an encoded document is refused: %v\n%s", err, enc)
		}
		if enc2, _ := Encode(again); !bytes.Equal(enc2, enc) {
			t.Fatalf("decode and encode do not settle:\n%s\n%s", enc, enc2)
		}
	})
}
