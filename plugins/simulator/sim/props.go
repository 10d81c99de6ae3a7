package sim

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/infrakit/infrakit/sdk/properties"
	"github.com/infrakit/infrakit/sdk/provider"
)

// validateObject accepts nothing or a JSON object; anything else is a
// diagnostic about the whole properties value (an empty path).
func validateObject(raw json.RawMessage) error {
	// Validity first: properties.IsNull reads only the first byte, so
	// "nonsense" would pass for null.
	if len(bytes.TrimSpace(raw)) > 0 && !json.Valid(raw) {
		return provider.AttributeError("Invalid properties", "properties are not valid JSON")
	}
	if properties.IsNull(raw) {
		return nil
	}
	if k := properties.Kind(raw); k != "object" {
		return provider.AttributeError("Invalid properties", fmt.Sprintf("properties must be an object, got %s", k))
	}
	return nil
}

// normalizeObject is raw, or nil when absent, so files do not carry "null".
func normalizeObject(raw json.RawMessage) json.RawMessage {
	if properties.IsNull(raw) {
		return nil
	}
	return raw
}

// compactJSON is a JSON value kept without insignificant whitespace: files
// are indented for people, but callers get the same bytes they would have
// sent. A record read through the store's cache is compacted once, when
// the file is decoded, not on every listing (a listing of 10,000
// authorizations spent a third of its time compacting).
type compactJSON json.RawMessage

// MarshalJSON writes the value as it is (the store indents the file).
func (c compactJSON) MarshalJSON() ([]byte, error) {
	if len(c) == 0 {
		return []byte("null"), nil
	}
	return c, nil
}

// UnmarshalJSON keeps a compacted copy of b.
func (c *compactJSON) UnmarshalJSON(b []byte) error {
	var buf bytes.Buffer
	buf.Grow(len(b))
	if err := json.Compact(&buf, b); err != nil {
		return err
	}
	*c = buf.Bytes()
	return nil
}

// compacted is raw (normalizeObject) without insignificant whitespace.
func compacted(raw json.RawMessage) compactJSON {
	raw = normalizeObject(raw)
	var c compactJSON
	if len(raw) == 0 || c.UnmarshalJSON(raw) != nil {
		return compactJSON(raw) // invalid JSON was refused by validateObject
	}
	return c
}

// raw is c for a description, or nil when absent. It shares the cache's
// record, read-only like the description's tags.
func (c compactJSON) raw() json.RawMessage {
	if len(c) == 0 {
		return nil
	}
	return json.RawMessage(c)
}
