package legacy

import (
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
)

// kind is the JSON type of a node. YAML documents are read into the same
// tree, so the readers of the two formats share every rule after parsing.
type kind int

const (
	kindNull kind = iota
	kindBool
	kindNumber
	kindString
	kindObject
	kindArray
)

// String is the kind as messages name it: "a string", "an object".
func (k kind) String() string {
	switch k {
	case kindBool:
		return "a boolean"
	case kindNumber:
		return "a number"
	case kindString:
		return "a string"
	case kindObject:
		return "an object"
	case kindArray:
		return "a list"
	}
	return "null"
}

// node is one value of a specification with where it is in the source.
type node struct {
	kind kind
	rng  hcl.Range
	// text is a string's value, a number's literal (JSON syntax, finite) or
	// "true"/"false".
	text   string
	fields []field // objects, in source order
	items  []*node // arrays
}

// field is one member of an object.
type field struct {
	name      string
	nameRange hcl.Range
	value     *node
}

// source is one specification file and the table that turns byte offsets
// into the lines and columns diagnostics show.
type source struct {
	filename string
	src      []byte
	lines    []int // byte offset of the start of each line
}

func newSource(filename string, src []byte) *source {
	s := &source{filename: filename, src: src, lines: []int{0}}
	for i, c := range src {
		if c == '\n' {
			s.lines = append(s.lines, i+1)
		}
	}
	return s
}

// pos is the position of a byte offset; columns count characters, as HCL's do.
func (s *source) pos(offset int) hcl.Pos {
	offset = min(max(offset, 0), len(s.src))
	line := sort.Search(len(s.lines), func(i int) bool { return s.lines[i] > offset }) - 1
	col := utf8.RuneCount(s.src[s.lines[line]:offset]) + 1
	return hcl.Pos{Line: line + 1, Column: col, Byte: offset}
}

// offset is the byte offset of a 1-based line and character column (what
// yaml.v3 nodes carry), clamped to the source.
func (s *source) offset(line, col int) int {
	if line < 1 {
		return 0
	}
	if line > len(s.lines) {
		return len(s.src)
	}
	off := s.lines[line-1]
	for c := 1; c < col && off < len(s.src) && s.src[off] != '\n'; c++ {
		_, size := utf8.DecodeRune(s.src[off:])
		off += size
	}
	return off
}

// lastLine is the number of the last line with something on it.
func (s *source) lastLine() int {
	n := len(s.lines)
	for n > 1 && len(strings.TrimSpace(string(s.src[s.lines[n-1]:]))) == 0 {
		n--
	}
	return n
}

// rangeOf is the range of bytes [start, end).
func (s *source) rangeOf(start, end int) hcl.Range {
	if end < start {
		end = start
	}
	return hcl.Range{Filename: s.filename, Start: s.pos(start), End: s.pos(end)}
}

// field returns the object's field whose name matches name ignoring case
// (the old formats were decoded by encoding/json, which matches names that
// way), or nil.
func (n *node) field(name string) *field {
	if n == nil || n.kind != kindObject {
		return nil
	}
	for i := range n.fields {
		if strings.EqualFold(n.fields[i].name, name) {
			return &n.fields[i]
		}
	}
	return nil
}

// startRange is the zero-length range where n starts, for diagnostics about
// something missing from it.
func (n *node) startRange() hcl.Range {
	r := n.rng
	r.End = r.Start
	return r
}
