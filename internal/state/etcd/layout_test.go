package etcd

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/internal/state"
)

// genDoc draws a stored document: a few groups (names that need escaping
// too) of sorted instances, flags, ingress and enrollment records.
func genDoc(t *rapid.T) *state.Document {
	doc := state.NewDocument()
	doc.Serial = rapid.Uint64Range(1, 100).Draw(t, "serial")
	for _, name := range rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"a", "b", "web/x", "e f", "ä"}), 0, 4, rapid.ID).Draw(t, "groups") {
		g := doc.Group(name)
		g.Freed = rapid.Bool().Draw(t, "freed")
		g.Destroying = rapid.Bool().Draw(t, "destroying")
		ids := rapid.SliceOfDistinct(rapid.IntRange(0, 5000), rapid.ID).Draw(t, "ids")
		slices.Sort(ids)
		for _, id := range ids {
			g.Instances = append(g.Instances, instance(id))
		}
		if len(g.Instances) == 0 && rapid.Bool().Draw(t, "nil instances") {
			g.Instances = nil
		}
	}
	for _, name := range rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"lb", "lb2"}), 0, 2, rapid.ID).Draw(t, "ingresses") {
		if doc.Ingresses == nil {
			doc.Ingresses = map[string]*state.ControllerStatus{}
		}
		doc.Ingresses[name] = &state.ControllerStatus{Freed: rapid.Bool().Draw(t, "ingress freed")}
	}
	if rapid.Bool().Draw(t, "enrollment") {
		doc.Enrollments = map[string]*state.ControllerStatus{"join": {}}
	}
	return doc
}

func instance(id int) state.Instance {
	return state.Instance{ID: fmt.Sprintf("i-%07d", id), LogicalID: fmt.Sprintf("10.0.%d.%d", id/256, id%256),
		ConfigHash: "sha256:abcdef0123456789", State: "running", Address: fmt.Sprintf("10.0.%d.%d:80", id/256, id%256)}
}

// canonical is doc as the local backend would read it back.
func canonical(t interface{ Fatalf(string, ...any) }, doc *state.Document) *state.Document {
	data, err := state.Encode(doc)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	back, err := state.Decode("x", data)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return back
}

// roundTrip encodes doc over base, decodes the parts into b's cache and
// assembles the document again.
func roundTrip(t *rapid.T, b *Backend, doc *state.Document, base map[string]bool) (*encoded, *state.Document) {
	k := b.live()
	e, err := encode(k, doc, base, func(key string) []state.Instance { return b.cache.chunks[key] })
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range e.parts {
		if err := decodePart("x", b.prefix, p.key, p.value, b.cache); err != nil {
			t.Fatal(err)
		}
	}
	h, err := decodeHead("x", e.head)
	if err != nil {
		t.Fatal(err)
	}
	if refs := refKeys(k, h, func(key string) *groupRec { return b.cache.groups[key] }); !reflect.DeepEqual(refs, e.refs) {
		t.Fatalf("the head refers to %v, the encoding to %v", refs, e.refs)
	}
	back, err := assemble("x", k, h, b.cache)
	if err != nil {
		t.Fatal(err)
	}
	return e, back
}

// TestSplitRoundTrip: any document, split into parts and assembled again,
// is what the local backend reads back; and changing one instance of it
// makes two new parts (its chunk and its group's record), whatever the
// document's size.
func TestSplitRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := New(nil, Options{Prefix: "/p"})
		doc := genDoc(t)
		e, back := roundTrip(t, b, doc, nil)
		if want := canonical(t, doc); !reflect.DeepEqual(back, want) {
			t.Fatalf("assembled %+v, want %+v", back, want)
		}
		var names []string
		for name, g := range doc.Groups {
			if len(g.Instances) > 0 {
				names = append(names, name)
			}
		}
		if len(names) == 0 {
			return
		}
		slices.Sort(names)
		g := doc.Groups[rapid.SampledFrom(names).Draw(t, "changed group")]
		i := rapid.IntRange(0, len(g.Instances)-1).Draw(t, "changed instance")
		g.Instances[i].State = "stopping"
		e2, back := roundTrip(t, b, doc, e.refs)
		if want := canonical(t, doc); !reflect.DeepEqual(back, want) {
			t.Fatalf("after the change: assembled %+v, want %+v", back, want)
		}
		if len(e2.parts) != 2 {
			t.Fatalf("one changed instance made %d new parts, want 2", len(e2.parts))
		}
	})
}

// TestChunkEnds: chunks cover the list in order within the bounds, and
// their ends depend on the instances' IDs, not on their position: an
// insertion moves only the ends near it.
func TestChunkEnds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ids := rapid.SliceOfDistinct(rapid.IntRange(0, 1e6), rapid.ID).Draw(t, "ids")
		slices.Sort(ids)
		ins := make([]state.Instance, len(ids))
		for i, id := range ids {
			ins[i] = instance(id)
		}
		ends := chunkEnds(ins)
		start := 0
		for i, end := range ends {
			n := end - start
			if n <= 0 || n > chunkMax || (n < chunkMin && i != len(ends)-1) {
				t.Fatalf("chunk %d has %d instances", i, n)
			}
			start = end
		}
		if start != len(ins) {
			t.Fatalf("chunks end at %d of %d", start, len(ins))
		}
		// Chunk contents by first ID, before and after one insertion.
		firsts := func(ins []state.Instance) map[string]int {
			out := map[string]int{}
			s := 0
			for _, e := range chunkEnds(ins) {
				out[ins[s].ID] = e - s
				s = e
			}
			return out
		}
		before := firsts(ins)
		extra := instance(rapid.IntRange(1e6+1, 2e6).Draw(t, "inserted"))
		pos := rapid.IntRange(0, len(ins)).Draw(t, "at")
		after := firsts(slices.Insert(slices.Clone(ins), pos, extra))
		changed := 0
		for id, n := range after {
			if before[id] != n {
				changed++
			}
		}
		if changed > 3 {
			t.Fatalf("one insertion changed %d chunks", changed)
		}
	})
}
