package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Encode renders doc as the stored form: indented JSON with a trailing
// newline, byte for byte what json.Encoder with SetIndent("", "  ") and
// SetEscapeHTML(false) writes. The key order is stable (struct fields in
// declaration order, map keys sorted) so successive states diff well. HTML
// escaping is off because init scripts ("a && b") should read as written.
func Encode(doc *Document) ([]byte, error) {
	var compact bytes.Buffer
	enc := json.NewEncoder(&compact)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	// Indenting the compact form in one pass is several times faster than
	// the encoder's own indenting, which re-scans with the full JSON state
	// machine — and a state write of 10,000 instances must stay cheap.
	src := bytes.TrimSuffix(compact.Bytes(), []byte("\n"))
	out := indentCompact(make([]byte, 0, len(src)+len(src)/2), src)
	return append(out, '\n'), nil
}

// indentCompact appends src, compact JSON as encoding/json writes it (no
// whitespace outside strings), indented by two spaces per level exactly as
// json.Indent(dst, src, "", "  ") would: empty objects and arrays stay {} and
// [], and ": " separates keys from values.
func indentCompact(dst, src []byte) []byte {
	depth := 0
	opened := false // the last byte opened an object or array
	for i := 0; i < len(src); i++ {
		c := src[i]
		if opened && c != '}' && c != ']' {
			depth++
			dst = newline(dst, depth)
		}
		opened = false
		switch c {
		case '"':
			// Copy the whole string; only \" and \\ can hide a quote.
			j := i + 1
			for j < len(src) && src[j] != '"' {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			dst = append(dst, src[i:min(j+1, len(src))]...)
			i = j
		case '{', '[':
			dst = append(dst, c)
			opened = true
		case '}', ']':
			if src[i-1] != '{' && src[i-1] != '[' {
				depth--
				dst = newline(dst, depth)
			}
			dst = append(dst, c)
		case ',':
			dst = newline(append(dst, ','), depth)
		case ':':
			dst = append(dst, ':', ' ')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

const indentSpaces = "                                                                "

func newline(dst []byte, depth int) []byte {
	dst = append(dst, '\n')
	for n := 2 * depth; n > 0; n -= len(indentSpaces) {
		dst = append(dst, indentSpaces[:min(n, len(indentSpaces))]...)
	}
	return dst
}

// Decode parses and validates a stored document. state names where it came
// from, for messages. Anything that cannot be trusted is an *InvalidError:
// an empty or truncated document, invalid JSON (with line:col), a format
// newer than FormatVersion, a missing version, lineage or serial, a stored
// stack that breaks the rules of the stack language (checkStacks).
func Decode(state string, data []byte) (*Document, error) {
	invalid := func(err error, format string, args ...any) error {
		return &InvalidError{State: state, Reason: fmt.Sprintf(format, args...), Err: err}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, invalid(nil, "is empty (truncated by a crash?)")
	}
	if data[0] == 0 {
		// What a filesystem leaves when the size reached the disk but the
		// data did not — a crash of a writer that did not fsync.
		return nil, invalid(nil, "holds NUL bytes instead of JSON (its data never reached the disk before a crash?)")
	}

	doc := &Document{}
	if err := json.Unmarshal(data, doc); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn) && strings.Contains(syn.Error(), "unexpected end of JSON input"):
			line, col := position(data, syn.Offset)
			return nil, invalid(err, "is truncated: the JSON ends early at line %d, col %d", line, col)
		case errors.As(err, &syn):
			line, col := position(data, syn.Offset)
			return nil, invalid(err, "is not valid JSON: line %d, col %d: %v", line, col, err)
		case errors.As(err, &typ):
			// A newer format may not fit this build's types; say that
			// rather than the type error it causes.
			if v, ok := peekVersion(data); ok && v > FormatVersion {
				return nil, newerFormat(state, v)
			}
			if typ.Field == "" {
				return nil, invalid(err, "is not a JSON object (found %s)", typ.Value)
			}
			line, col := position(data, typ.Offset)
			return nil, invalid(err, "line %d, col %d: %v", line, col, err)
		default:
			return nil, invalid(err, "cannot be decoded: %v", err)
		}
	}

	switch {
	case doc.Version == 0:
		return nil, invalid(nil, `has no "version" (not an infrakit state file?)`)
	case doc.Version < 0:
		return nil, invalid(nil, "has an invalid version %d", doc.Version)
	case doc.Version > FormatVersion:
		return nil, newerFormat(state, doc.Version)
	case doc.Lineage == "":
		return nil, invalid(nil, `has no "lineage"`)
	case doc.Serial == 0:
		return nil, invalid(nil, "has serial 0, but a stored state always has serial 1 or more")
	}
	if err := checkStacks(state, doc); err != nil {
		return nil, err
	}
	return doc, nil
}

func newerFormat(state string, v int) error {
	return &InvalidError{State: state, Reason: fmt.Sprintf(
		"was written by a newer infrakit (format %d); this build reads up to %d", v, FormatVersion)}
}

// peekVersion reads only the "version" field.
func peekVersion(data []byte) (int, bool) {
	var h struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(data, &h); err != nil {
		return 0, false
	}
	return h.Version, true
}

// position turns the offset of a JSON error into a 1-based line and column.
// encoding/json reports the offset after the offending byte for most errors
// (and at it for a few), so the column points at or just before the fault.
func position(data []byte, offset int64) (line, col int) {
	off := int(min(max(offset, 1), int64(len(data))))
	prefix := data[:off-1]
	line = bytes.Count(prefix, []byte("\n")) + 1
	col = off - 1 - bytes.LastIndexByte(prefix, '\n')
	return line, col
}
