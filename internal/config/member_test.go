package config_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/sdk/instance"
)

// memberOf is the member value of one described instance; logicalID "" is cattle.
func memberOf(t tb, id, logicalID string, tags map[string]string, props, address string) cty.Value {
	t.Helper()
	d := instance.Description{ID: instance.ID(id), Tags: tags, Properties: json.RawMessage(props), Address: address}
	if logicalID != "" {
		lid := instance.LogicalID(logicalID)
		d.LogicalID = &lid
	}
	v, err := config.MemberValue(d)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestRenderProperties(t *testing.T) {
	pet := memberOf(t, "i-7", "10.0.0.7", map[string]string{"tier": "db"}, `{"disk":{"gb":100},"zones":["a","b"]}`, "10.0.0.7:22")
	cattle := memberOf(t, "i-8", "", nil, "", "")

	tests := []struct {
		name   string
		src    string // the properties expression as written
		member cty.Value
		want   string // JSON, or an error substring after "error: "
	}{
		{"literal and id", `{ host = member.id, iops = 10 }`, pet, `{"host":"i-7","iops":10}`},
		{"logical id and address", `{ lid = member.logical_id, at = member.address }`, pet, `{"at":"10.0.0.7:22","lid":"10.0.0.7"}`},
		{"logical id of cattle is null", `{ lid = member.logical_id }`, cattle, `{"lid":null}`},
		{"tags", `{ t = member.tags, tier = member.tags["tier"] }`, pet, `{"t":{"tier":"db"},"tier":"db"}`},
		{"empty tags", `{ t = member.tags }`, cattle, `{"t":{}}`},
		{"properties", `{ gb = member.properties.disk.gb, z = member.properties.zones[1] }`, pet, `{"gb":100,"z":"b"}`},
		{"whole properties", `member.properties`, pet, `{"disk":{"gb":100},"zones":["a","b"]}`},
		{"template", `{ vol = "vol-${member.id}" }`, pet, `{"vol":"vol-i-7"}`},
		{"absent", ``, pet, `{}`},
		{"missing property", `{ x = member.properties.nope }`, cattle, `error: Unsupported attribute`},
		{"not an object", `member.id`, pet, `error: must be an object`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := config.EnrollmentTarget{Provider: "sim", Type: "disk", Properties: tt.src}
			got, err := target.RenderProperties(tt.member)
			if want, isErr := strings.CutPrefix(tt.want, "error: "); isErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v, want %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestMemberValueBadProperties(t *testing.T) {
	_, err := config.MemberValue(instance.Description{ID: "i-1", Properties: json.RawMessage(`{`)})
	if err == nil || !strings.Contains(err.Error(), "member i-1") {
		t.Errorf("err = %v", err)
	}
}

func TestRenderPropertiesBadSource(t *testing.T) {
	target := config.EnrollmentTarget{Properties: "{ host = "}
	if _, err := target.RenderProperties(cty.UnknownVal(config.MemberType())); err == nil || !strings.Contains(err.Error(), "parse") {
		t.Errorf("err = %v", err)
	}
}
