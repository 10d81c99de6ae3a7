package sim

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/infrakit/infrakit/sdk/provider"
)

// isAbsent reports whether properties were not given: empty or JSON null
// (an HCL block without a properties attribute).
func isAbsent(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// validateObject accepts nothing or a JSON object; anything else is a
// diagnostic about the whole properties value (an empty path).
func validateObject(raw json.RawMessage) error {
	if isAbsent(raw) {
		return nil
	}
	if !json.Valid(raw) {
		return provider.AttributeError("Invalid properties", "properties are not valid JSON")
	}
	if k := jsonKind(raw); k != "object" {
		return provider.AttributeError("Invalid properties", fmt.Sprintf("properties must be an object, got %s", k))
	}
	return nil
}

// normalizeObject is raw, or nil when absent, so files do not carry "null".
func normalizeObject(raw json.RawMessage) json.RawMessage {
	if isAbsent(raw) {
		return nil
	}
	return raw
}

// jsonKind names the kind of a JSON value in the words of HCL types, for
// error details ("got number").
func jsonKind(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '{':
		return "object"
	case '[':
		return "list"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

// compact returns raw without insignificant whitespace: files are indented
// for people, but callers get the same bytes they would have sent.
func compact(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw // unreachable for a decoded RawMessage
	}
	return b.Bytes()
}
