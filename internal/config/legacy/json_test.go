package legacy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// plain turns a tree back into what encoding/json decodes (with UseNumber),
// to compare the two readers.
func plain(n *node) any {
	switch n.kind {
	case kindObject:
		m := map[string]any{}
		for _, f := range n.fields {
			m[f.name] = plain(f.value)
		}
		return m
	case kindArray:
		l := []any{}
		for _, item := range n.items {
			l = append(l, plain(item))
		}
		return l
	case kindString:
		return n.text
	case kindNumber:
		return json.Number(n.text)
	case kindBool:
		return n.text == "true"
	}
	return nil
}

// fataler is what helpers need of *testing.T and *rapid.T alike.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func decodeStd(t fataler, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("encoding/json cannot read %q: %v", b, err)
	}
	if l, ok := v.([]any); ok && len(l) == 0 {
		return []any{}
	}
	return v
}

// jsonValue generates values encoding/json can write: nested objects and
// lists of strings (any Unicode, quotes, escapes), numbers, booleans, null.
func jsonValue(depth int) *rapid.Generator[any] {
	return rapid.Custom(func(t *rapid.T) any {
		choices := 5
		if depth > 0 {
			choices = 7
		}
		switch rapid.IntRange(0, choices-1).Draw(t, "kind") {
		case 0:
			return rapid.String().Draw(t, "string")
		case 1:
			return rapid.Int64().Draw(t, "int")
		case 2:
			return rapid.Float64Range(-1e9, 1e9).Draw(t, "float")
		case 3:
			return rapid.Bool().Draw(t, "bool")
		case 4:
			return nil
		case 5:
			return rapid.SliceOfN(jsonValue(depth-1), 0, 4).Draw(t, "list")
		default:
			return rapid.MapOfN(rapid.String(), jsonValue(depth-1), 0, 4).Draw(t, "object")
		}
	})
}

// checkRanges checks that every node's range (and every key's) covers
// exactly the JSON text of that value.
func checkRanges(t *rapid.T, src []byte, n *node) {
	got := decodeStd(t, src[n.rng.Start.Byte:n.rng.End.Byte])
	if !reflect.DeepEqual(got, plain(n)) {
		t.Fatalf("range %d-%d holds %q, not the node's value %v", n.rng.Start.Byte, n.rng.End.Byte, src[n.rng.Start.Byte:n.rng.End.Byte], plain(n))
	}
	line := bytes.Count(src[:n.rng.Start.Byte], []byte("\n")) + 1
	if n.rng.Start.Line != line {
		t.Fatalf("node at byte %d is on line %d, range says %d", n.rng.Start.Byte, line, n.rng.Start.Line)
	}
	for _, f := range n.fields {
		if key := decodeStd(t, src[f.nameRange.Start.Byte:f.nameRange.End.Byte]); key != f.name {
			t.Fatalf("key range holds %v, not %q", key, f.name)
		}
		checkRanges(t, src, f.value)
	}
	for _, item := range n.items {
		checkRanges(t, src, item)
	}
}

// TestParseJSONAgreesWithEncodingJSON: for any JSON encoding/json writes
// (compact or indented), the position-tracking parser reads the same value,
// and every range in the tree covers exactly its value's text.
func TestParseJSONAgreesWithEncodingJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := jsonValue(3).Draw(t, "value")
		var src []byte
		var err error
		if rapid.Bool().Draw(t, "indent") {
			src, err = json.MarshalIndent(v, "", "\t")
		} else {
			src, err = json.Marshal(v)
		}
		if err != nil {
			t.Fatal(err)
		}
		n, diags := parseJSON(newSource("v.json", src))
		if diags.HasErrors() {
			t.Fatalf("%s: %s", src, diags.Error())
		}
		if got, want := plain(n), decodeStd(t, src); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: read %#v, encoding/json reads %#v", src, got, want)
		}
		checkRanges(t, src, n)
	})
}

func TestParseJSONErrors(t *testing.T) {
	tests := []struct {
		src, pos, detail string
	}{
		{`{"a": 1,}`, "1:9", `Unexpected '}' where a quoted key was expected.`},
		{`[1 2]`, "1:4", `Unexpected '2' where ',' or ']' was expected.`},
		{"{\"a\":\n  tru}", "2:3", `Unexpected 't' where a value was expected.`},
		{`"abc`, "1:1", "no closing quote"},
		{"\"a\nb\"", "1:3", "line break or control character"},
		{`"\x"`, "1:1", "Invalid string"},
		{`01`, "1:1", "may not start with 0"},
		{`1.`, "1:3", "where a digit was expected"},
		{`-`, "1:2", "where a digit was expected"},
		{`{} {}`, "1:4", "Extra data after the JSON value"},
		{`{"a": 1, "a": 2}`, "1:10", `The key "a" is already set at line 1`},
		{`{"a": `, "1:7", "The file ends where a value was expected."},
		{strings.Repeat("[", maxDepth+2), "1:258", "nested more than 256 deep"},
		{"", "1:1", "holds no JSON value"},
		{"[1e400]", "1:2", "The number 1e400 is out of range"},
		{"[-1e-400]", "1:2", "The number -1e-400 is out of range"},
	}
	for _, tt := range tests {
		_, diags := parseJSON(newSource("f.json", []byte(tt.src)))
		if len(diags) != 1 || diags[0].Subject == nil {
			t.Errorf("%q: want one error with a subject, got %v", tt.src, diags)
			continue
		}
		d := diags[0]
		if got := posString(d.Subject.Start.Line, d.Subject.Start.Column); got != tt.pos || !strings.Contains(d.Detail, tt.detail) {
			t.Errorf("%q: %s %q, want %s %q", tt.src, got, d.Detail, tt.pos, tt.detail)
		}
	}
}

func posString(line, col int) string { return fmt.Sprintf("%d:%d", line, col) }

func TestSourcePositions(t *testing.T) {
	s := newSource("f", []byte("ab\nçd\n\nx"))
	for _, tt := range []struct {
		offset, line, col int
	}{{0, 1, 1}, {2, 1, 3}, {3, 2, 1}, {5, 2, 2}, {7, 3, 1}, {8, 4, 1}, {9, 4, 2}, {99, 4, 2}} {
		p := s.pos(tt.offset)
		if p.Line != tt.line || p.Column != tt.col {
			t.Errorf("pos(%d) = %d:%d, want %d:%d", tt.offset, p.Line, p.Column, tt.line, tt.col)
		}
		if tt.offset <= 9 {
			if back := s.offset(tt.line, tt.col); back != min(tt.offset, 9) {
				t.Errorf("offset(%d, %d) = %d, want %d", tt.line, tt.col, back, tt.offset)
			}
		}
	}
}
