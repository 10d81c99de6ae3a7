package legacy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
)

// maxDepth bounds the nesting of objects and lists, so a hostile file costs
// an error rather than the stack.
const maxDepth = 256

// parseJSON reads a JSON document into a tree with source ranges. It is a
// small recursive-descent parser rather than encoding/json because every
// value needs its line and column, and duplicate keys (which encoding/json
// silently resolves to the last) must be reported.
func parseJSON(s *source) (*node, hcl.Diagnostics) {
	p := &jsonParser{s: s, b: s.src}
	p.space()
	if p.i == len(p.b) {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Empty specification",
			Detail:   "The file holds no JSON value; a specification is an object, or a list of objects.",
			Subject:  s.rangeOf(0, 0).Ptr(),
		}}
	}
	n := p.value(0)
	if p.err == nil {
		p.space()
		if p.i < len(p.b) {
			p.fail(p.i, "Extra data after the JSON value: a file holds one value; put several specifications in a list [...].")
		}
	}
	if p.err != nil {
		return nil, hcl.Diagnostics{p.err}
	}
	return n, nil
}

type jsonParser struct {
	s   *source
	b   []byte
	i   int
	err *hcl.Diagnostic
}

// fail records the first syntax error, pointing at the character at offset.
func (p *jsonParser) fail(offset int, detail string) {
	if p.err != nil {
		return
	}
	end := offset
	if end < len(p.b) {
		_, size := utf8.DecodeRune(p.b[end:])
		end += size
	}
	p.err = &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Invalid JSON",
		Detail:   detail,
		Subject:  p.s.rangeOf(offset, end).Ptr(),
	}
}

// unexpected reports the character at the current offset.
func (p *jsonParser) unexpected(want string) {
	if p.i >= len(p.b) {
		p.fail(p.i, fmt.Sprintf("The file ends where %s was expected.", want))
		return
	}
	if bytes.HasPrefix(p.b[p.i:], []byte("{{")) {
		p.fail(p.i, "Template actions ({{ ... }}) are not supported: only a {{/* comment */}} at the start of the file is. Render the template first (the old `infrakit template` command) and convert its output.")
		return
	}
	r, _ := utf8.DecodeRune(p.b[p.i:])
	p.fail(p.i, fmt.Sprintf("Unexpected %q where %s was expected.", r, want))
}

func (p *jsonParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) value(depth int) *node {
	if depth > maxDepth {
		p.fail(p.i, fmt.Sprintf("Values are nested more than %d deep.", maxDepth))
		return nil
	}
	p.space()
	if p.i >= len(p.b) {
		p.unexpected("a value")
		return nil
	}
	if bytes.HasPrefix(p.b[p.i:], []byte("{{")) {
		p.unexpected("a value")
		return nil
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		start := p.i
		s, ok := p.str()
		if !ok {
			return nil
		}
		return &node{kind: kindString, text: s, rng: p.s.rangeOf(start, p.i)}
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	default:
		for _, lit := range []struct {
			word string
			kind kind
		}{{"true", kindBool}, {"false", kindBool}, {"null", kindNull}} {
			if bytes.HasPrefix(p.b[p.i:], []byte(lit.word)) {
				start := p.i
				p.i += len(lit.word)
				return &node{kind: lit.kind, text: lit.word, rng: p.s.rangeOf(start, p.i)}
			}
		}
		p.unexpected("a value")
		return nil
	}
}

func (p *jsonParser) object(depth int) *node {
	n := &node{kind: kindObject}
	start := p.i
	p.i++ // {
	seen := map[string]hcl.Range{}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		n.rng = p.s.rangeOf(start, p.i)
		return n
	}
	for {
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			p.unexpected("a quoted key")
			return nil
		}
		keyStart := p.i
		key, ok := p.str()
		if !ok {
			return nil
		}
		keyRange := p.s.rangeOf(keyStart, p.i)
		if first, dup := seen[key]; dup {
			p.fail(keyStart, fmt.Sprintf("The key %q is already set at line %d; each key may appear once.", key, first.Start.Line))
			return nil
		}
		seen[key] = keyRange
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			p.unexpected("':'")
			return nil
		}
		p.i++
		v := p.value(depth + 1)
		if v == nil {
			return nil
		}
		n.fields = append(n.fields, field{name: key, nameRange: keyRange, value: v})
		p.space()
		if p.i < len(p.b) && p.b[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.b) && p.b[p.i] == '}' {
			p.i++
			n.rng = p.s.rangeOf(start, p.i)
			return n
		}
		p.unexpected("',' or '}'")
		return nil
	}
}

func (p *jsonParser) array(depth int) *node {
	n := &node{kind: kindArray}
	start := p.i
	p.i++ // [
	p.space()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		n.rng = p.s.rangeOf(start, p.i)
		return n
	}
	for {
		v := p.value(depth + 1)
		if v == nil {
			return nil
		}
		n.items = append(n.items, v)
		p.space()
		if p.i < len(p.b) && p.b[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.b) && p.b[p.i] == ']' {
			p.i++
			n.rng = p.s.rangeOf(start, p.i)
			return n
		}
		p.unexpected("',' or ']'")
		return nil
	}
}

// str reads a quoted string at the current offset. encoding/json decodes
// its escapes once the extent is known, so escape handling is the standard
// library's.
func (p *jsonParser) str() (string, bool) {
	start := p.i
	p.i++ // opening quote
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == '"':
			p.i++
			var s string
			if err := json.Unmarshal(p.b[start:p.i], &s); err != nil {
				p.fail(start, fmt.Sprintf("Invalid string: %s.", err))
				return "", false
			}
			return s, true
		case c == '\\':
			p.i += 2
		case c < 0x20:
			p.fail(p.i, "A string may not contain a line break or control character; write it as an escape like \\n.")
			return "", false
		default:
			p.i++
		}
	}
	p.fail(start, "This string has no closing quote.")
	return "", false
}

// number reads a number with JSON's grammar: -?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?
func (p *jsonParser) number() *node {
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.b[p.i] == '-' {
		p.i++
	}
	intStart := p.i
	if digits() == 0 {
		p.unexpected("a digit")
		return nil
	}
	if p.b[intStart] == '0' && p.i-intStart > 1 {
		p.fail(intStart, "A number may not start with 0.")
		return nil
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if digits() == 0 {
			p.unexpected("a digit")
			return nil
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			p.unexpected("a digit")
			return nil
		}
	}
	text := string(p.b[start:p.i])
	if !finiteFloat(text) {
		p.fail(start, "The number "+truncate(text, 40)+" is out of range: a number must fit a 64-bit float, as the old formats required.")
		return nil
	}
	return &node{kind: kindNumber, text: text, rng: p.s.rangeOf(start, p.i)}
}

// finiteFloat reports whether a JSON number is within the range of a
// float64 (and, when not zero, does not round to zero). Larger exponents
// would have the stack's JSON encoding write millions of digits.
func finiteFloat(text string) bool {
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsInf(f, 0) {
		return false
	}
	if f == 0 {
		mantissa, _, _ := strings.Cut(strings.ToLower(text), "e")
		return strings.Trim(mantissa, "-0.") == ""
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
