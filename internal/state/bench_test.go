package state

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/infrakit/infrakit/internal/config"
)

// bigDocument is a stack of 3 groups with n instances between them, each
// instance fully populated as apply records it.
func bigDocument(n int) *Document {
	doc := NewDocument()
	doc.Stack = &config.Stack{Name: "bench", Providers: []*config.Provider{{Name: "simulator"}, {Name: "vanilla"}}}
	names := []string{"miners", "cattle", "pets"}
	for _, name := range names {
		size := n / len(names)
		doc.Stack.Groups = append(doc.Stack.Groups, &config.Group{
			Name:     name,
			Size:     &size,
			Tags:     map[string]string{"project": "bench"},
			Instance: config.Plugin{Provider: "simulator", Type: "compute", Properties: json.RawMessage(`{"note":"bench"}`)},
			Flavors:  []config.Plugin{{Provider: "vanilla", Properties: json.RawMessage(`{"init":["echo hi"]}`)}},
		})
	}
	for i := range n {
		g := doc.Group(names[i%len(names)])
		g.Instances = append(g.Instances, Instance{
			ID:         fmt.Sprintf("i-%08x", i),
			LogicalID:  fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255),
			ConfigHash: fmt.Sprintf("%064x", i*2654435761),
			State:      "running",
			Address:    fmt.Sprintf("10.%d.%d.%d:80", i>>16&255, i>>8&255, i&255),
		})
	}
	return doc
}

// BenchmarkWrite10k is one state write as apply batches them: 10,000
// instances across 3 groups, including the compare-and-swap check of the
// previous file, the backup link and all fsyncs. It must stay well under
// 50 ms.
func BenchmarkWrite10k(b *testing.B) {
	l := NewLocal(filepath.Join(b.TempDir(), "infrakit.state.json"))
	doc := bigDocument(10_000)
	if err := l.Write(b.Context(), doc); err != nil {
		b.Fatal(err)
	}
	data, _ := Encode(doc)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := l.Write(b.Context(), doc); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(data)), "file-bytes")
}

// BenchmarkWrite10kForeign is the same write when the file on disk was
// written by another process, so it must be decoded and validated first.
func BenchmarkWrite10kForeign(b *testing.B) {
	path := filepath.Join(b.TempDir(), "infrakit.state.json")
	doc := bigDocument(10_000)
	if err := NewLocal(path).Write(b.Context(), doc); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := NewLocal(path).Write(b.Context(), doc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncode10k(b *testing.B) {
	doc := bigDocument(10_000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(doc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRead10k(b *testing.B) {
	l := NewLocal(filepath.Join(b.TempDir(), "infrakit.state.json"))
	if err := l.Write(b.Context(), bigDocument(10_000)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Read(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteSmall is the fixed cost of a write (fsyncs, renames).
func BenchmarkWriteSmall(b *testing.B) {
	l := NewLocal(filepath.Join(b.TempDir(), "infrakit.state.json"))
	doc := sampleDoc()
	doc.Serial = 0
	for b.Loop() {
		if err := l.Write(b.Context(), doc); err != nil {
			b.Fatal(err)
		}
	}
}
