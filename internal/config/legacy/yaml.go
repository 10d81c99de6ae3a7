package legacy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"gopkg.in/yaml.v3"
)

// maxNodes bounds how many values the documents of one file expand to,
// counting each use of an alias: "billion laughs" files fail instead of
// eating memory.
const maxNodes = 100_000

// parseYAML reads every document of a YAML stream (--- separated) into
// trees with source ranges. Empty documents are skipped.
func parseYAML(s *source) (docs []*node, diags hcl.Diagnostics) {
	// yaml.v3 is third-party code fed with user input; a panic in it must
	// become an error about the file, not end infrakit.
	defer func() {
		if r := recover(); r != nil {
			docs = nil
			diags = hcl.Diagnostics{yamlError(s, fmt.Errorf("yaml: %v", r))}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(s.src))
	c := &yamlConverter{s: s}
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, hcl.Diagnostics{yamlError(s, err)}
		}
		if len(doc.Content) == 0 {
			continue
		}
		n := c.convert(doc.Content[0], 0)
		if c.err != nil {
			return nil, hcl.Diagnostics{c.err}
		}
		if n.kind == kindNull {
			continue // a document of only comments or "~"
		}
		docs = append(docs, n)
	}
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

// yamlError turns a yaml.v3 error ("yaml: line 3: mapping values are not
// allowed in this context") into a diagnostic at that line.
func yamlError(s *source, err error) *hcl.Diagnostic {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	subject := s.rangeOf(0, 0)
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		if line, convErr := strconv.Atoi(m[1]); convErr == nil {
			// yaml.v3 reports a parser error ("did not find expected
			// key") at the 0-based line of the construct it was in, so
			// the line after the one named is the one to show.
			if strings.Contains(msg, "did not find expected") {
				line++
			}
			line = min(line, s.lastLine())
			start := s.offset(line, 1)
			for start < len(s.src) && (s.src[start] == ' ' || s.src[start] == '\t') {
				start++
			}
			end := start
			for end < len(s.src) && s.src[end] != '\n' && s.src[end] != '\r' {
				end++
			}
			subject = s.rangeOf(start, end)
		}
		msg = strings.TrimSpace(yamlLine.ReplaceAllString(msg, ""))
		msg = strings.TrimPrefix(msg, ": ")
	}
	detail := upperFirst(msg) + "."
	if bytes.Contains(s.src, []byte("{{")) && !strings.Contains(msg, "excessive") {
		detail += " Template actions ({{ ... }}) outside quoted strings are not YAML: render the template first, or escape them as \\{\\{ ... \\}\\}."
	}
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Invalid YAML",
		Detail:   detail,
		Subject:  subject.Ptr(),
	}
}

// yamlConverter turns yaml.v3 nodes into the tree the JSON reader makes.
type yamlConverter struct {
	s     *source
	nodes int
	err   *hcl.Diagnostic
}

func (c *yamlConverter) fail(r hcl.Range, summary, detail string) *node {
	if c.err == nil {
		c.err = &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: r.Ptr()}
	}
	return &node{kind: kindNull, rng: r}
}

// rangeOf is where a yaml.v3 node is. yaml.v3 keeps only where a node
// starts; a scalar's end is found in the source, anything else is given
// its first character.
func (c *yamlConverter) rangeOf(n *yaml.Node) hcl.Range {
	start := c.s.offset(n.Line, n.Column)
	end := start + 1
	if n.Kind == yaml.ScalarNode {
		end = c.scalarEnd(start, n)
	}
	return c.s.rangeOf(start, min(end, len(c.s.src)))
}

func (c *yamlConverter) scalarEnd(start int, n *yaml.Node) int {
	src := c.s.src
	if start >= len(src) {
		return start
	}
	switch q := src[start]; {
	case q == '\'' || q == '"':
		for i := start + 1; i < len(src); i++ {
			switch {
			case q == '"' && src[i] == '\\':
				i++
			case src[i] == q && q == '\'' && i+1 < len(src) && src[i+1] == '\'':
				i++ // '' is an escaped quote
			case src[i] == q:
				return i + 1
			}
		}
	case bytes.HasPrefix(src[start:], []byte(n.Value)) && n.Value != "":
		return start + len(n.Value)
	}
	// A block scalar (| or >) or a plain scalar over several lines: the
	// rest of its first line.
	end := start
	for end < len(src) && src[end] != '\n' && src[end] != '\r' {
		end++
	}
	return max(end, start+1)
}

func (c *yamlConverter) convert(n *yaml.Node, depth int) *node {
	if c.err != nil {
		return &node{}
	}
	r := c.rangeOf(n)
	c.nodes++
	if c.nodes > maxNodes {
		return c.fail(r, "Specification too large",
			fmt.Sprintf("The documents expand to more than %d values (counting each use of an alias).", maxNodes))
	}
	if depth > maxDepth {
		return c.fail(r, "Specification too deep", fmt.Sprintf("Values are nested more than %d deep.", maxDepth))
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			return c.fail(r, "Invalid YAML", "This alias names no anchor.")
		}
		return c.convert(n.Alias, depth+1)
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return &node{kind: kindNull, rng: r}
		}
		return c.convert(n.Content[0], depth+1)
	case yaml.SequenceNode:
		out := &node{kind: kindArray, rng: r}
		for _, item := range n.Content {
			out.items = append(out.items, c.convert(item, depth+1))
		}
		return out
	case yaml.MappingNode:
		out := &node{kind: kindObject, rng: r}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			kr := c.rangeOf(k)
			if k.Kind != yaml.ScalarNode {
				detail := "A key must be a plain value like name, not a list or a mapping."
				if bytes.HasPrefix(c.s.src[kr.Start.Byte:], []byte("{")) && bytes.Contains(c.s.src, []byte("{{")) {
					detail += " A template action {{ ... }} outside quotes reads as a mapping: quote it, or escape it as \\{\\{ ... \\}\\}."
				}
				return c.fail(kr, "Invalid key", detail)
			}
			if k.ShortTag() == "!!merge" {
				return c.fail(kr, "Unsupported YAML merge key",
					"Merge keys (<<: *anchor) are not supported in specifications; write the fields out.")
			}
			out.fields = append(out.fields, field{name: k.Value, nameRange: kr, value: c.convert(v, depth+1)})
		}
		return out
	case yaml.ScalarNode:
		return c.scalar(n, r)
	}
	return c.fail(r, "Invalid YAML", "This kind of YAML node is not supported.")
}

// scalar resolves a scalar by its tag, as yaml.v3 does when decoding.
func (c *yamlConverter) scalar(n *yaml.Node, r hcl.Range) *node {
	switch n.ShortTag() {
	case "!!null":
		return &node{kind: kindNull, text: "null", rng: r}
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return c.fail(r, "Invalid value", fmt.Sprintf("%q is not a boolean.", n.Value))
		}
		return &node{kind: kindBool, text: strconv.FormatBool(b), rng: r}
	case "!!int":
		var i int64
		if err := n.Decode(&i); err == nil {
			return &node{kind: kindNumber, text: strconv.FormatInt(i, 10), rng: r}
		}
		var u uint64
		if err := n.Decode(&u); err == nil {
			return &node{kind: kindNumber, text: strconv.FormatUint(u, 10), rng: r}
		}
		return c.fail(r, "Invalid number", fmt.Sprintf("%q is not a whole number infrakit can read.", n.Value))
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return c.fail(r, "Invalid number", fmt.Sprintf("%q is not a finite number.", n.Value))
		}
		return &node{kind: kindNumber, text: strconv.FormatFloat(f, 'g', -1, 64), rng: r}
	}
	// Strings, and timestamps and other tags kept as the text written.
	return &node{kind: kindString, text: n.Value, rng: r}
}
