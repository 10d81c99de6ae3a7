package filesd

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/infrakit/infrakit/sdk/provider"
)

func TestParseProperties(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want Properties
	}{
		{`{"file": "prometheus/web.json", "address": "127.0.0.1:20001"}`, Properties{File: "prometheus/web.json", Address: "127.0.0.1:20001"}},
		{`{"file": "/etc/prometheus/targets/web.json", "address": "[2001:db8::7]:9100", "labels": {"infrakit_group": "web", "tier": "front"}}`,
			Properties{File: "/etc/prometheus/targets/web.json", Address: "[2001:db8::7]:9100", Labels: map[string]string{"infrakit_group": "web", "tier": "front"}}},
		{`{"file": "web.json", "address": "web-1.internal:8080", "labels": {"job": "web", "instance": "w1", "x": ""}}`,
			Properties{File: "web.json", Address: "web-1.internal:8080", Labels: map[string]string{"job": "web", "instance": "w1", "x": ""}}},
	} {
		got, err := ParseProperties(json.RawMessage(c.raw))
		if err != nil {
			t.Fatalf("%s: %v", c.raw, err)
		}
		if got.File != c.want.File || got.Address != c.want.Address || !maps.Equal(got.Labels, c.want.Labels) {
			t.Errorf("%s: got %+v, want %+v", c.raw, got, c.want)
		}
	}
}

func TestParsePropertiesRefuses(t *testing.T) {
	const ok = `"file": "web.json", "address": "127.0.0.1:1"`
	for _, c := range []struct {
		raw   string
		paths []string
	}{
		{`[]`, []string{""}},
		{`{}`, []string{"file", "address"}},
		{`null`, []string{"file", "address"}},
		{`{` + ok + `, "port": 80}`, []string{"port"}},
		{`{"file": 1, "address": "127.0.0.1:1"}`, []string{"file"}},
		{`{"file": "", "address": "127.0.0.1:1"}`, []string{"file"}},
		{`{"file": "web.yml", "address": "127.0.0.1:1"}`, []string{"file"}},
		{`{"file": "prometheus/", "address": "127.0.0.1:1"}`, []string{"file"}},
		{`{"file": "prometheus/.json", "address": "127.0.0.1:1"}`, []string{"file"}},
		{`{"file": "web.json", "address": ""}`, []string{"address"}},
		{`{"file": "web.json", "address": null}`, []string{"address"}},
		{`{"file": "web.json", "address": "127.0.0.1"}`, []string{"address"}},
		{`{"file": "web.json", "address": "http://127.0.0.1:80"}`, []string{"address"}},
		{`{"file": "web.json", "address": "127.0.0.1:80/metrics"}`, []string{"address"}},
		{`{"file": "web.json", "address": ":80"}`, []string{"address"}},
		{`{"file": "web.json", "address": "127.0.0.1:0"}`, []string{"address"}},
		{`{"file": "web.json", "address": "127.0.0.1:70000"}`, []string{"address"}},
		{`{"file": "web.json", "address": "127.0.0.1:http"}`, []string{"address"}},
		{`{"file": "web.json", "address": "a b:80"}`, []string{"address"}},
		{`{` + ok + `, "labels": ["a"]}`, []string{"labels"}},
		{`{` + ok + `, "labels": {"a": 1}}`, []string{"labels.a"}},
		{`{` + ok + `, "labels": {"infrakit.group": "web"}}`, []string{"labels.infrakit.group"}},
		{`{` + ok + `, "labels": {"1a": "x"}}`, []string{"labels.1a"}},
		{`{` + ok + `, "labels": {"": "x"}}`, []string{"labels."}},
		{`{` + ok + `, "labels": {"__scheme__": "https"}}`, []string{"labels.__scheme__"}},
		{`{` + ok + `, "labels": {"infrakit_instance": "x"}}`, []string{"labels.infrakit_instance"}},
		{`{` + ok + `, "labels": {"infrakit_logical_id": "x"}}`, []string{"labels.infrakit_logical_id"}},
		{`{"address": "x", "labels": {"a-b": "x", "ok": "y"}}`, []string{"file", "address", "labels.a-b"}},
	} {
		_, err := ParseProperties(json.RawMessage(c.raw))
		var ds provider.Diagnostics
		if !errors.As(err, &ds) {
			t.Errorf("%s: want diagnostics, got %v", c.raw, err)
			continue
		}
		var got []string
		for _, d := range ds {
			got = append(got, strings.Join(d.Path, "."))
		}
		if !slices.Equal(got, c.paths) {
			t.Errorf("%s: diagnostics at %q, want %q: %v", c.raw, got, c.paths, err)
		}
	}
}
