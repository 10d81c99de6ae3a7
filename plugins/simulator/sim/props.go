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
