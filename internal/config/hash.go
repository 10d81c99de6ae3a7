package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// ConfigHash identifies the group's member configuration: the instance and
// flavor sections only (provider, type and properties, with object keys
// sorted). Size, logical IDs, tags, update and health never change it, so
// scaling never rolls instances. It is the value of the infrakit.config.hash
// tag: 16 hex digits of a SHA-256.
func (g *Group) ConfigHash() string {
	type section struct {
		Provider   string          `json:"provider"`
		Type       string          `json:"type"`
		Properties json.RawMessage `json:"properties"`
	}
	canonical := func(p Plugin) section {
		typ := p.Type
		if p.TypeImplied {
			// Filled in by ValidateWithProviders; the same stack loaded but not
			// yet validated must hash the same.
			typ = ""
		}
		return section{Provider: p.Provider, Type: typ, Properties: canonicalJSON(p.Properties)}
	}
	doc := struct {
		Instance section   `json:"instance"`
		Flavors  []section `json:"flavors"`
	}{Instance: canonical(g.Instance)}
	for _, f := range g.Flavors {
		doc.Flavors = append(doc.Flavors, canonical(f))
	}
	b, err := json.Marshal(doc)
	if err != nil {
		// Only invalid JSON in properties gets here, and canonicalJSON has
		// already replaced that by a JSON string of its bytes.
		panic("config: hashing group " + g.Name + ": " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}

// canonicalJSON re-encodes JSON with object keys sorted and no insignificant
// space, keeping numbers as written. Missing properties are an empty object;
// bytes that are not JSON are hashed as a JSON string of themselves.
func canonicalJSON(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		b, _ := json.Marshal(string(raw))
		return b
	}
	b, err := json.Marshal(v) // maps are encoded with sorted keys
	if err != nil {
		b, _ = json.Marshal(string(raw))
	}
	return b
}
